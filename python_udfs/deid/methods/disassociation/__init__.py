"""Disassociation of diagnosis-code sets, k^m-anonymity (paper 003)."""
