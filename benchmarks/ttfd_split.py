"""Where time to first document goes, per engine, on a chosen set of JSONSchemaBench schemas, in
MaskBench's order (``benchmarks/maskbench_worker.py``): caches cleared, then (``--cold``) what the
worker does before each compile (``gc``: ``gc.collect()``, which walks the heap and leaves the
caches cold), nothing (``none``: the code and data of the last compile still cached), or a 64 MiB
read (``thrash``); then the compile (cfgmask: front end and ``compile`` apart), the first
matcher, the first valid instance's masks and accepts, and the replay loop's own time (its span
less the masks and accepts).  Wall time, both engines in one process taking turns schema by
schema; per schema the median of ``--rounds``, then medians and sums over the schemas.

    python -m benchmarks.ttfd_split --ids /tmp/ids.json --cold gc --rounds 3
"""

from __future__ import annotations

import argparse
import gc
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from .bench_maskbench import TEST_CORPUS, job_of, load_corpus
from .common import single_thread
from .maskbench_worker import Runtime, replay, warm_up

CLOCK = time.perf_counter_ns
PARTS = ("front_end", "compile", "matcher", "fills", "accepts", "loop", "ttfd")


def one(rt: Runtime, job: dict[str, Any], cold: str, thrash: np.ndarray) -> dict[str, float] | None:
    rt.clear()
    if cold == "gc":
        gc.collect()
    elif cold == "thrash":
        thrash.sum()
    t0 = CLOCK()
    try:
        if rt.name == "cfgmask":
            import cfgmask

            g = cfgmask.Grammar.from_json_schema(job["text"])
            t1 = CLOCK()
            compiled = cfgmask.compile(g, rt.engine.vocab)  # type: ignore[attr-defined]
        else:
            t1 = t0
            compiled = rt.compile(job["text"])
    except Exception:  # noqa: BLE001 - a refusal: the schema is left out for this engine
        return None
    t2 = CLOCK()
    m = rt.first_matcher(compiled)
    t3 = CLOCK()
    r = replay(rt, m, job["valid"][0])
    t4 = CLOCK()
    if r["status"] != "ok":
        return None
    fills, accepts = sum(r["masks"]), sum(r["accepts"])
    return {
        "front_end": t1 - t0,
        "compile": t2 - t1,
        "matcher": t3 - t2,
        "fills": fills,
        "accepts": accepts,
        "loop": (t4 - t3) - fills - accepts,
        "ttfd": t4 - t0,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ids", type=Path, help="JSON list of schema ids (default: every schema)")
    ap.add_argument("--engines", default="cfgmask,llguidance")
    ap.add_argument("--cold", choices=("gc", "none", "thrash"), default="gc")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    single_thread()
    ids = set(json.loads(args.ids.read_text())) if args.ids else None
    jobs = [job_of(r) for r in load_corpus(TEST_CORPUS, None, False) if ids is None or r["id"] in ids]
    jobs = [j for j in jobs if j["valid"]]
    engines = args.engines.split(",")
    rts = {e: Runtime(e) for e in engines}
    for rt in rts.values():
        warm_up(rt)
    thrash = np.ones(64 << 20, np.uint8)
    got: dict[str, dict[str, list[dict[str, float]]]] = {e: {} for e in engines}
    for _ in range(args.rounds):
        for job in jobs:
            for e in engines:
                row = one(rts[e], job, args.cold, thrash)
                if row is not None:
                    got[e].setdefault(job["id"], []).append(row)
    both = set.intersection(*(set(g) for g in got.values()))
    out: dict[str, Any] = {"cold": args.cold, "schemas": len(both), "engines": {}}
    for e in engines:
        per = {s: {k: float(np.median([r[k] for r in rows])) for k in PARTS} for s, rows in got[e].items()}
        sel = [per[s] for s in sorted(both)]
        med = {k: float(np.median([p[k] for p in sel])) / 1e3 for k in PARTS}
        tot = {k: sum(p[k] for p in sel) / 1e6 for k in PARTS}
        out["engines"][e] = {"median_us": med, "sum_ms": tot, "per_schema": per}
        cells = "  ".join(f"{k} {med[k]:.0f}" for k in PARTS)
        print(f"{e:11s} (cold={args.cold}, {len(both)} schemas) median µs: {cells}")
        print(f"{'':11s} sums ms: " + "  ".join(f"{k} {tot[k]:.2f}" for k in PARTS))
    if args.out:
        args.out.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
