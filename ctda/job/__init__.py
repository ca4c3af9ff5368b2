"""Multi-rank jobs: one critical path across ranks, stragglers, job what-ifs (see run.py)."""
