"""Benchmarks are opt-in: `pytest bench -m bench --benchmark-enable` (or `python -m bench`)."""
