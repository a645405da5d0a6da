"""Checks shared by the per-method verifiers (they import these, never each other)."""
