"""The JSON Schema front end alone: ``Grammar.from_json_schema(text)`` per schema, no compile.

For every schema of a JSONSchemaBench folder (default ``tests/corpora/jsonschemabench``, 240),
``--passes`` times over the whole corpus in file order (so a schema's later passes do not
follow each other), time ``Grammar.from_json_schema(text)`` with the defaults (canonical,
strict), as ``bench_maskbench`` does; a refusal is timed up to its ``GrammarError``.  A schema's
time is the median of its passes; the table gives p50 / p90 / p99 / max over schemas, in ms.
``--cold`` also clears the front end's process-wide memo tables (``functools`` caches of the
JSON Schema modules) before each schema: a process whose first schema this is.

    python -m benchmarks.bench_frontend                       # 240 schemas, 5 passes
    python -m benchmarks.bench_frontend --cold --passes 3
    python -m benchmarks.bench_frontend --cpu                 # thread CPU time: a busy machine
    python -m benchmarks.bench_frontend --profile 30          # cProfile: the top 30 by own time
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import json
import pstats
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
TEST_CORPUS = ROOT / "tests" / "corpora" / "jsonschemabench"


def load_texts(folder: Path, limit: int | None) -> list[tuple[str, str]]:
    """(id, schema as JSON text) for every schema of every split, in file order."""
    out = []
    for path in sorted(folder.glob("*.jsonl")):
        rows = [json.loads(line) for line in path.read_text().split("\n") if line.strip()]
        out += [(r["id"], json.dumps(r["schema"])) for r in rows[:limit]]
    return out


def front_end_caches() -> list[Any]:
    """The ``functools`` memo tables of the JSON Schema front end's modules."""
    from cfgmask.frontends import json_schema

    pkg = Path(json_schema.__file__).parent
    caches = []
    for mod in list(sys.modules.values()):
        f = getattr(mod, "__file__", None) or ""
        if not f or Path(f).parent != pkg:
            continue
        for v in vars(mod).values():
            if isinstance(v, functools._lru_cache_wrapper):
                caches.append(v)
    return caches


def run_once(text: str) -> bool:
    from cfgmask import Grammar
    from cfgmask.errors import GrammarError

    try:
        Grammar.from_json_schema(text)
    except GrammarError:
        return False
    return True


def measure(texts: list[tuple[str, str]], passes: int, cold: bool, cpu: bool) -> tuple[np.ndarray, int]:
    """Milliseconds per schema (median of its passes) and how many schemas were refused;
    ``cpu``: this thread's CPU time instead of wall time (steadier on a shared machine)."""
    clock = time.thread_time_ns if cpu else time.perf_counter_ns
    caches = front_end_caches()
    times = np.zeros((passes, len(texts)))
    refused = 0
    for p in range(passes):
        for i, (_, text) in enumerate(texts):
            if cold:
                for c in caches:
                    c.cache_clear()
            t0 = clock()
            ok = run_once(text)
            times[p, i] = (clock() - t0) / 1e6
            refused += p == 0 and not ok
    return np.median(times, axis=0), refused


def profile(texts: list[tuple[str, str]], passes: int, top: int) -> None:
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(passes):
        for _, text in texts:
            run_once(text)
    prof.disable()
    pstats.Stats(prof).sort_stats("tottime").print_stats(top)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--splits", type=Path, default=TEST_CORPUS, help="folder of JSONSchemaBench *.jsonl")
    ap.add_argument("--limit", type=int, default=None, help="first N schemas of each split")
    ap.add_argument("--passes", type=int, default=5)
    ap.add_argument("--cold", action="store_true", help="clear the front end's memo tables per schema")
    ap.add_argument("--cpu", action="store_true", help="thread CPU time instead of wall time")
    ap.add_argument("--profile", type=int, default=0, metavar="N", help="cProfile instead: top N")
    ap.add_argument("--slowest", type=int, default=5, help="list the N slowest schemas")
    args = ap.parse_args(argv)

    texts = load_texts(args.splits, args.limit)
    for _, text in texts:  # imports and first-call costs out of the figures
        run_once(text)
    if args.profile:
        profile(texts, args.passes, args.profile)
        return
    ms, refused = measure(texts, args.passes, args.cold, args.cpu)
    p50, p90, p99 = np.percentile(ms, [50, 90, 99])
    mode = ("cold memo tables" if args.cold else "memo tables kept") + (", CPU time" if args.cpu else "")
    print(f"JSON Schema front end, {len(texts)} schemas ({refused} refused), {args.passes} passes, {mode}")
    print("| ms per schema | p50 | p90 | p99 | max | mean |")
    print("|---|---:|---:|---:|---:|---:|")
    print(f"| from_json_schema | {p50:.3f} | {p90:.3f} | {p99:.3f} | {ms.max():.3f} | {ms.mean():.3f} |")
    for i in np.argsort(-ms)[: args.slowest]:
        print(f"  {ms[i]:8.3f} ms  {texts[i][0]}")


if __name__ == "__main__":
    main()
