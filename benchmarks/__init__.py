"""ptxdsl's benchmarks against the alternatives: `python -m benchmarks` (see run_all.py)."""
