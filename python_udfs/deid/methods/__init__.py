"""The published algorithms, as pure Python + numpy (no plpy)."""
