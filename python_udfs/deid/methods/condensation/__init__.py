"""Improved condensation: k-means clusters, PCA synthesis (paper 004)."""
