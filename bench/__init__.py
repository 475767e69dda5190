"""devplace benchmarks: each module `bench/<name>.py` has `run(quick: bool) -> dict`; `python -m bench` writes JSON."""
