"""Benchmark harnesses of the scheduler library (run through ``python -m scheduler ...``)."""
