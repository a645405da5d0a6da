"""Request-driven generalization with k per source system (paper 002)."""
