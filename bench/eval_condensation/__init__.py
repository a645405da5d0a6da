"""Utility and risk evaluation of condensation (paper 004 sec. 3.5) against the peers copulas
and DataSynthesizer.  Runs in the benchmark-only virtualenv bench/.venv-eval (`make bench-eval`),
never in the server's Python."""
