"""Make the pure modules importable for unit tests (no server needed)."""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "python_udfs"))
