"""The compile pipeline after the front end (issue 12): ``cfgmask.compile(grammar, vocab)`` of
grammars never seen before.

Every JSONSchemaBench schema of ``tests/corpora/jsonschemabench`` (240) goes through the JSON
Schema front end first, untimed; then each compile is timed cold (the table and automaton caches
cleared before it; the loop walks a vocabulary keeps are not part of a compile), Llama-3
vocabulary, one thread.  ``--fresh N`` also times the first compile of ``grammars/json.gbnf``
in N fresh ``python -c`` processes (import excluded; ``Vocabulary.llama3()``, which builds the
vocabulary's trie, timed apart).  ``--profile`` prints a cProfile of the schema compiles.

    python -m benchmarks.bench_compile --fresh 5
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import cfgmask
from cfgmask.compile import compiled as cc

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "corpora" / "jsonschemabench"

FRESH = """
import time, cfgmask
t = time.perf_counter(); v = cfgmask.Vocabulary.llama3(); c = time.perf_counter() - t
g = cfgmask.Grammar.from_gbnf(open('grammars/json.gbnf').read())
t = time.perf_counter(); cfgmask.compile(g, v); a = time.perf_counter() - t
cfgmask.clear_caches()
t = time.perf_counter(); cfgmask.compile(g, v); b = time.perf_counter() - t
print(a * 1e3, b * 1e3, c * 1e3)
"""


def schemas() -> list[cfgmask.Grammar]:
    out = []
    for path in sorted(CORPUS.glob("*.jsonl")):
        for line in path.read_text().splitlines():
            if not line.strip():
                continue
            try:  # as bench_maskbench: a refusal is not compiled
                out.append(cfgmask.Grammar.from_json_schema(json.loads(line)["schema"]))
            except cfgmask.CfgmaskError:
                pass
    return out


def clear() -> None:
    with cc._TABLE_LOCK:
        cc._TABLE_CACHE.clear()
    cc.CACHE.clear()


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def run_schemas(
    grammars: list[cfgmask.Grammar], vocab: cfgmask.Vocabulary, rounds: int, clock: Any = time.perf_counter
) -> list[float]:
    """Per schema, the median over ``rounds`` cold compiles, in ms."""
    per: list[list[float]] = [[] for _ in grammars]
    for _ in range(rounds):
        for i, g in enumerate(grammars):
            clear()
            t = clock()
            try:
                cfgmask.compile(g, vocab)
            except cfgmask.CfgmaskError:
                continue  # counted apart by bench_maskbench
            per[i].append((clock() - t) * 1e3)
    return [statistics.median(p) for p in per if p]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3, help="cold compiles of each schema (median kept)")
    ap.add_argument("--fresh", type=int, default=0, help="fresh processes for json.gbnf's first compile")
    ap.add_argument("--profile", action="store_true", help="cProfile the schema compiles (tottime)")
    cpu = "the thread's CPU time, not wall time (on a machine shared with others)"
    ap.add_argument("--cpu", action="store_true", help=cpu)
    args = ap.parse_args()
    vocab = cfgmask.Vocabulary.llama3()
    grammars = schemas()
    run_schemas(grammars[:20], vocab, 1)  # warm up the interpreter's caches, not ours
    if args.profile:
        import cProfile
        import pstats

        prof = cProfile.Profile()
        prof.enable()
        run_schemas(grammars, vocab, 1)
        prof.disable()
        pstats.Stats(prof).sort_stats("tottime").print_stats(30)
    ms = run_schemas(grammars, vocab, args.rounds, time.thread_time if args.cpu else time.perf_counter)
    what = "compile after the front end" + (" (CPU time)" if args.cpu else "")
    print(
        f"{what}, {len(ms)} schemas, ms: p50 {pct(ms, 0.5):.3f}  p90 {pct(ms, 0.9):.3f}"
        f"  p99 {pct(ms, 0.99):.2f}  max {max(ms):.2f}  mean {statistics.mean(ms):.3f}"
    )
    if args.fresh:
        first, second, vocab_ms = [], [], []
        for _ in range(args.fresh):
            out = subprocess.run(
                [sys.executable, "-c", FRESH], cwd=ROOT, capture_output=True, text=True, check=True
            )
            a, b, c = map(float, out.stdout.split())
            first.append(a)
            second.append(b)
            vocab_ms.append(c)
        print(
            f"json.gbnf in a fresh process, ms: first compile median {statistics.median(first):.2f}"
            f" (all {', '.join(f'{x:.1f}' for x in first)}); cold again {statistics.median(second):.2f};"
            f" Vocabulary.llama3() apart {statistics.median(vocab_ms):.0f}"
        )


if __name__ == "__main__":
    main()
