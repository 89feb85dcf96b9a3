"""JSON Schema ``enum`` of n strings: cold compile time by n, canonical and full language, and the
masks of documents of the 100,000-value enum with the Llama-3 vocabulary.

    python -m benchmarks.bench_enum [--sizes 10,100,1000,10000,100000] [--docs 20]

Values are random identifiers of 5-15 characters (``[a-z_]``), fixed seed.  Compile time is
``Grammar.from_json_schema`` plus ``compile``, after ``cfgmask.clear_caches()``, the best of
three.  Masks: the documents are members' canonical texts, tokenized by Llama-3; every mask
along each (the first is the one at the start of the string) on a fresh compile, so first
visits are counted.
"""

from __future__ import annotations

import argparse
import random
import string
import time
from typing import Any

from .common import CfgmaskEngine, Stats, fmt, tokenize, write_results


def identifiers(n: int, seed: int = 1) -> list[str]:
    rnd = random.Random(seed)
    out: set[str] = set()
    while len(out) < n:
        out.add("".join(rnd.choice(string.ascii_lowercase + "_") for _ in range(rnd.randint(5, 15))))
    return sorted(out)


def compile_ms(engine: CfgmaskEngine, values: list[str], canonical: bool, repeat: int = 3) -> float:
    cm = engine._cm
    best = float("inf")
    for _ in range(repeat):
        cm.clear_caches()
        t0 = time.perf_counter()
        cm.compile(cm.Grammar.from_json_schema({"enum": values}, canonical=canonical), engine.vocab)
        best = min(best, time.perf_counter() - t0)
    return best * 1e3


def masks(engine: CfgmaskEngine, values: list[str], docs: int) -> dict[str, Any]:
    cm = engine._cm
    cm.clear_caches()
    compiled = cm.compile(cm.Grammar.from_json_schema({"enum": values}), engine.vocab)
    rnd = random.Random(2)
    first: list[int] = []
    rest: list[int] = []
    mask = engine.new_mask()
    for text in rnd.sample(values, docs):
        m = engine.matcher(compiled)
        for i, t in enumerate(tokenize(f'"{text}"')):
            t0 = time.perf_counter_ns()
            engine.fill(m, mask)
            (first if i == 0 else rest).append(time.perf_counter_ns() - t0)
            if not engine.accept(m, t):
                raise AssertionError(f"token {t} of {text!r} refused")
        t0 = time.perf_counter_ns()
        engine.fill(m, mask)
        rest.append(time.perf_counter_ns() - t0)
        assert engine.is_accepting(m)
    return {"first": Stats.of_ns(first), "later": Stats.of_ns(rest)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sizes", default="10,100,1000,10000,100000")
    ap.add_argument("--full-max", type=int, default=10_000, help="largest n for canonical=False")
    ap.add_argument("--docs", type=int, default=20)
    args = ap.parse_args()
    engine = CfgmaskEngine()
    rows = []
    print(f"{'n':>8} {'canonical ms':>13} {'full ms':>9}")
    for n in [int(x) for x in args.sizes.split(",")]:
        values = identifiers(n)
        canon = compile_ms(engine, values, True)
        full = compile_ms(engine, values, False) if n <= args.full_max else None
        rows.append({"n": n, "canonical_ms": canon, "full_ms": full})
        print(f"{n:>8} {fmt(canon, 13)} {fmt(full)}")
    got = masks(engine, identifiers(max(int(x) for x in args.sizes.split(","))), args.docs)
    for k, s in got.items():
        print(f"mask {k:>5}: n={s.n} p50 {fmt(s.p50)} µs  p99 {fmt(s.p99)} µs  max {fmt(s.max)} µs")
    print("wrote", write_results("bench_enum", {"compile": rows, "masks": got}))


if __name__ == "__main__":
    main()
