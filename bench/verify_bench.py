"""Wall time of ``migrate-v3 verify`` on the bundled example, cold and cached.

Cold: a fresh ``MODULAR_CACHE_DIR`` (so MAX compiles every graph and kernel
from scratch) and a fresh mypy cache. Cached: the same command again with
both caches kept. Each run is a separate process, timed end to end.

    python bench/verify_bench.py [--runs-cached N] [--keep]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
V2 = ROOT / "fixtures" / "models" / "tinylm"
V3 = ROOT / "fixtures" / "verify" / "tinylm_v3"


def run_once(cache: Path) -> tuple[float, dict[str, object]]:
    env = {**os.environ, "MODULAR_CACHE_DIR": str(cache / "modular")}
    cmd = [
        sys.executable, "-m", "migrate_v3", "verify", str(V2), str(V3), "--format", "json",
        "--greedy", "3", "--mypy-cache", str(cache / "mypy"),
    ]
    start = time.perf_counter()
    proc = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True)
    took = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"verify exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
    return took, json.loads(proc.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs-cached", type=int, default=2)
    parser.add_argument("--keep", action="store_true", help="keep the temporary caches")
    args = parser.parse_args()
    cache = Path(tempfile.mkdtemp(prefix="verify-bench-"))
    try:
        cold, report = run_once(cache)
        cached = [run_once(cache)[0] for _ in range(args.runs_cached)]
    finally:
        if not args.keep:
            shutil.rmtree(cache, ignore_errors=True)
    result = {
        "package": "fixtures/models/tinylm vs fixtures/verify/tinylm_v3",
        "graphs": report["graphs_compiled"],
        "cold_s": round(cold, 1),
        "cached_s": [round(t, 1) for t in cached],
        "cold_over_cached": round(cold / min(cached), 1) if cached else None,
        "cpus": os.cpu_count(),
        "loadavg_at_end": [round(x, 2) for x in os.getloadavg()],
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
