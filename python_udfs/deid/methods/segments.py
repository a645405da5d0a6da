"""Small numpy helpers over segments (runs of rows) shared by the methods."""
from ..copyfields import ranges  # noqa: F401  (one implementation for the whole package)
