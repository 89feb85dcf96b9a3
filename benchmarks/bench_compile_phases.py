"""Where the C half of a cold compile goes (issue 12): the core's compile-time counters
(csrc/cstats.c) per phase, over the 240 JSONSchemaBench schemas of ``bench_compile``.

Each schema is compiled cold (caches cleared) ``--rounds`` times with the counters on; per
schema the round with the least total C time is kept.  Prints per phase p50 / p90 / p99 / sum
(ms, CLOCK_MONOTONIC, so run it on a quiet machine), then the ``--top`` slowest schemas with
their phases, subset constructions (NFA -> DFA -> minimal states) and their largest builds.

    python -m benchmarks.bench_compile_phases --top 5
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import cfgmask
from benchmarks.bench_compile import CORPUS, clear, pct
from cfgmask import _core
from cfgmask.compile import components

# The records name a rule by its index in the compile's session (``sess.names``), which compile does
# not keep: the session's names of the latest build, caught on their way into ``rule_dfas``.
_names: list[list[str]] = [[]]
_rule_dfas = components.rule_dfas


def _rule_dfas_naming(*args, **kwargs):  # type: ignore[no-untyped-def]
    _names[0] = args[-1].names  # rule_dfas(rules, start, outlined, limits, sess); grows in it
    return _rule_dfas(*args, **kwargs)


def corpus() -> list[tuple[str, cfgmask.Grammar]]:
    out = []
    for path in sorted(CORPUS.glob("*.jsonl")):
        for line in path.read_text().splitlines():
            if not line.strip():
                continue
            row = json.loads(line)
            try:
                out.append((f"{path.stem}/{row.get('id')}", cfgmask.Grammar.from_json_schema(row["schema"])))
            except cfgmask.CfgmaskError:
                pass
    return out


def measure(g: cfgmask.Grammar, vocab: cfgmask.Vocabulary, rounds: int) -> dict | None:
    best = None
    for _ in range(rounds):
        clear()
        _core.compile_stats()
        try:
            cfgmask.compile(g, vocab)
        except cfgmask.CfgmaskError:
            return None
        st = _core.compile_stats()
        st["total"] = sum(st["ns"].values())
        st["names"] = _names[0]
        if best is None or st["total"] < best["total"]:
            best = st
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--top", type=int, default=5, help="slowest schemas to detail")
    ap.add_argument("--out", type=Path, help="per schema phases (JSON)")
    args = ap.parse_args()
    _core.compile_stats_enable(True)
    components.rule_dfas = _rule_dfas_naming
    vocab = cfgmask.Vocabulary.llama3()
    rows = [(name, st) for name, g in corpus() if (st := measure(g, vocab, args.rounds))]
    phases = list(rows[0][1]["ns"])
    print(f"C phases of a cold compile, {len(rows)} schemas, ms")
    print(f"{'phase':12s} {'p50':>8s} {'p90':>8s} {'p99':>8s} {'max':>8s} {'sum':>8s}")
    for ph in [*phases, "total"]:
        xs = [(st["total"] if ph == "total" else st["ns"][ph]) / 1e6 for _, st in rows]
        cols = (pct(xs, 0.5), pct(xs, 0.9), pct(xs, 0.99), max(xs))
        print(f"{ph:12s} " + " ".join(f"{x:8.3f}" for x in cols) + f" {sum(xs):8.1f}")
    for name, st in sorted(rows, key=lambda r: -r[1]["total"])[: args.top]:
        parts = "  ".join(f"{ph} {st['ns'][ph] / 1e6:.2f}" for ph in phases if st["ns"][ph] >= 5e4)
        print(f"\n{name}: {st['total'] / 1e6:.2f} ms  ({parts})")
        print(
            f"  {st['builds']} subset constructions: NFA {st['nfa_states']} -> DFA {st['dfa_states']}"
            f" -> minimal {st['min_states']} states"
        )
        names = st["names"]
        for rec in sorted(st["records"], key=lambda r: -(r[4] + r[5]))[:5]:
            name = names[rec[0]] if rec[0] < len(names) else f"name {rec[0]}"
            print(
                f"  {name}: {rec[1]} -> {rec[2]} -> {rec[3]} states,"
                f" subsets {rec[4] / 1e6:.2f} ms, minimize {rec[5] / 1e6:.2f} ms"
            )
    if args.out:
        args.out.write_text(
            json.dumps({n: {k: v for k, v in st.items() if k not in ("records", "names")} for n, st in rows})
        )


if __name__ == "__main__":
    main()
