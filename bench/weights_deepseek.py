"""Full-size DeepSeek-V3 name check: 91,991 checkpoint names vs the lazily built V3 module.

Run it in its own process:  python bench/weights_deepseek.py [--json]
Two peak-memory figures are printed: `peak_rss_mib` (getrusage ru_maxrss)
and `vm_hwm_mib` (/proc VmHWM). Linux carries ru_maxrss across fork+exec, so
when a big process (e.g. a pytest run that compiled a MAX graph) spawns this
script, ru_maxrss reports the parent's size; VmHWM is reset at exec and is
this process's own peak. From a shell both agree.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

DATA = Path("/work/shared/data/deepseek_v3")


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _maxrss() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def _proc_status() -> dict[str, float]:
    """Current anonymous vs file-backed resident memory (Linux), to tell our data from mapped libraries."""
    out: dict[str, float] = {}
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("RssAnon", "RssFile"):
                out[f"{key}_mib_at_end"] = round(int(value.split()[0]) / 1024, 1)
            elif key == "VmHWM":
                out["vm_hwm_mib"] = round(int(value.split()[0]) / 1024, 1)
    except OSError:
        pass
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", type=Path, default=DATA / "config.json")
    ap.add_argument("--patterns", type=Path, default=DATA / "weight_name_patterns.json")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    from migrate_v3.weights.check import run_check
    from migrate_v3.weights.report import to_json, to_text
    from migrate_v3.weights.ruleset import RuleSet
    from migrate_v3.weights.sources import expand_patterns
    from migrate_v3.weights.target import load_module_target
    from migrate_v3.weights.templates import get_template

    t0 = time.perf_counter()
    config = json.loads(args.config.read_text())
    ckpt = expand_patterns(args.patterns)
    t1 = time.perf_counter()
    rss_before_build = _maxrss()
    tpl = get_template("deepseek-v3")
    target = load_module_target(tpl.factory, config, ckpt.entries)
    t2 = time.perf_counter()
    rss_after_build = _maxrss()
    rs = RuleSet.for_config(config, tpl.rules(config), tpl.name)
    result = run_check(rs, ckpt.entries, target)
    t3 = time.perf_counter()
    header = {"checkpoint": str(args.patterns), "checkpoint_kind": ckpt.kind, "target": target.source,
              "rules": f"template {tpl.name}"}
    numbers = {
        "checkpoint_names": len(ckpt.entries),
        "module_parameters": len(target.params),
        "seconds_expand": round(t1 - t0, 2),
        "seconds_build_module_lazy": round(t2 - t1, 2),
        "seconds_map_and_compare": round(t3 - t2, 2),
        "seconds_total": round(t3 - t0, 2),
        "cpu_seconds": round(_cpu(), 1),
        "peak_rss_mib_before_build": rss_before_build,
        "peak_rss_mib_after_build": rss_after_build,
        "peak_rss_mib": _maxrss(),
        **_proc_status(),
    }
    if args.json:
        print(json.dumps({"numbers": numbers, "report": to_json(result, header)}))
    else:
        print(to_text(result, header))
        print(json.dumps(numbers, indent=2))
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
