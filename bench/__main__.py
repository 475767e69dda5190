"""Run benchmarks and write `bench/results/<name>.json`.

    python -m bench                 # all
    python -m bench store allocate  # some
    python -m bench --quick         # small sizes (smoke run; figures are not meaningful)

Every benchmark reports ratios against the raw operation it needs, measured in the same run, because absolute
figures depend on the machine. Nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import importlib
import json
import platform
import sys
import time
from pathlib import Path
from typing import Any

BENCHES = [
    "store",
    "server",
    "allocate",
    "placement",
    "idle",
    "watch_cost",
    "scheduler",
    "controller",
    "etcd",
    "hostile",
    "distributed",
    "nvml",
    "httpclients",
    "footprint",
    "cel",
    "dra_allocate",
    "dra_scheduler",
    "dra_prepare",
    "udev",
    "dra_slices",
    "sim",
    "dashboard",
    "up",
]
RESULTS = Path(__file__).parent / "results"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench")
    parser.add_argument("names", nargs="*", default=BENCHES, help=f"benchmarks to run (default: {' '.join(BENCHES)})")
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for name in args.names:
        if name not in BENCHES:
            parser.error(f"unknown benchmark {name!r} (known: {', '.join(BENCHES)})")
        module = importlib.import_module(f"bench.{name}")
        started = time.perf_counter()
        result: dict[str, Any] = module.run(quick=args.quick)
        result["_meta"] = {
            "benchmark": name,
            "quick": args.quick,
            "seconds": round(time.perf_counter() - started, 3),
            "python": sys.version.split()[0],
            "machine": platform.machine(),
            "cpus": __import__("os").cpu_count(),
        }
        path = args.out / f"{name}.json"
        path.write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
        print(f"{name}: wrote {path}")
        print(json.dumps({k: v for k, v in result.items() if k != "_meta"}, indent=2, sort_keys=True)[:4000])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
