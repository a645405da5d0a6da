"""Anatomy, (K,L)-anonymity over several sensitive attributes (paper 001)."""
