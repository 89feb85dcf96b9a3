"""Counters in the parser against the unrolled compile, on every JSONSchemaBench schema whose
segment form has segments: exactness, cost and the warm path, for deciding whether
``CompileLimits.counters`` can be on by default.

Each schema whose ``segment_form`` (``CompileLimits(counters=True)``) has segments is compiled twice
from one ``Grammar``: *off* = ``cfgmask.compile`` (the unrolled grammar), *on* = ``segment_form`` +
``c_tables`` + ``_core.GrammarHandle`` (what the counted compile builds; the front end is outside
both).  Caches are cleared before each compile; the vocabulary (with its segcut tables) is primed
by one schema first.

* exactness: every valid and invalid test instance on a fresh matcher of each, in turn: every mask
  bit-identical, every token accepted or refused alike, and after the last token the same
  ``is_accepting``; the first difference of an instance is recorded (schema, instance, step);
* cost (thread CPU, medians of ``--reps``): the compile, the first valid document's fills cold
  (a fresh grammar), and its fills *warm*: the same document replayed on a second fresh matcher
  of the same grammar (every entry it needs already built); per fill, the builds it made on the
  counted grammar (``seg_entry_stats``, ``seg_far_builds``, ``seg_near_builds``,
  ``seg_ladder_builds``; a keyed build neither far nor near is a plain counted walk);
* ``--callgrind IDS``: the same compile and fills, cold and warm, on and off, counted in
  instructions under callgrind (one process, each schema cold, the vocabulary primed by the first;
  ``--out`` gets ``{label: Ir}``, labels
  ``MODE:compile:ID``, ``MODE:fill:ID:STEP``, ``MODE:warm:ID:STEP``); ``--modes``/``--phases`` pick
  which are counted (a warm replay always follows the first), ``--profile F`` collects them into one
  callgrind file for ``callgrind_annotate`` instead;
* ``--off-strategy k=v,...`` (census mode): the off compile with Strategy fields replaced, to see what
  a piece the counted grammar lacks (``closing_verdicts=0``, ``stack_verdicts=0``,
  ``filter_uncertain=0``, ``mask_memo_min_items=2**63``) is worth on the unrolled one.

    python -m benchmarks.counters_census --out /tmp/census.json
    python -m benchmarks.counters_census --callgrind o6199,sp_4 --out /tmp/cg.json
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
SPLITS = ROOT / "tests" / "corpora" / "jsonschemabench"


def _setup() -> tuple[Any, Any, Any, tuple[Callable[[Any], Any], Callable[[Any], Any]]]:
    import cfgmask as cm
    from cfgmask import _core
    from cfgmask.compile.compiled import MatcherLimits, _settings
    from cfgmask.compile.segments import c_tables, segment_form
    from cfgmask.compile.strategy import DEFAULT

    from .common import llama3

    tokens = llama3()
    vocab = cm.Vocabulary.from_token_bytes(
        list(tokens.token_bytes), stop_token_ids=tokens.stops, special_token_ids=sorted(tokens.special)
    )
    vocab._handle()
    on_limits = cm.CompileLimits(counters=True)

    def on_compile(form: Any) -> Any:
        return _core.GrammarHandle(
            c_tables(form), vocab._handle(), list(vocab.stop_ids), _settings(MatcherLimits(), DEFAULT)
        )

    def form_of(grammar: Any) -> Any:
        return segment_form(grammar.ir, on_limits)

    return cm, _core, vocab, (on_compile, form_of)


def _jobs(ids: set[str] | None) -> list[dict[str, Any]]:
    from .bench_maskbench import job_of, load_corpus

    def short(rid: str) -> str:
        return rid.split("/")[-1].removesuffix("_Normalized")

    recs = load_corpus(SPLITS, None, sample=False)
    return [
        job_of(r) | {"id": short(r["id"])} for r in recs if ids is None or {r["id"], short(r["id"])} & ids
    ]


def _builds(_core: Any) -> tuple[int, ...]:
    """Cumulative build counters: keyed entries built, found again, far, near, donor, loop."""
    built, found = _core.seg_entry_stats()[:2]
    donor, loop = _core.seg_ladder_builds()[:2]
    return (built, found, _core.seg_far_builds(), _core.seg_near_builds(), donor, loop)


def _replay(mh: Any, toks: list[int], row: np.ndarray, on_fill: Callable[[int, float], None]) -> None:
    for i in range(len(toks) + 1):
        t0 = time.thread_time_ns()
        mh.fill_mask(row)
        on_fill(i, (time.thread_time_ns() - t0) / 1e6)
        if i == len(toks) or not mh.accept_token(toks[i]):
            return


def _exact(_core: Any, gh_off: Any, gh_on: Any, job: dict[str, Any], words: int) -> dict[str, Any]:
    out: dict[str, Any] = {"instances": 0, "masks": 0, "accepts": 0, "refusals": 0, "diffs": []}
    a, b = np.zeros(words, dtype=np.int32), np.zeros(words, dtype=np.int32)
    for kind in ("valid", "invalid"):
        for n, toks in enumerate(job[kind]):
            out["instances"] += 1
            m_off, m_on = _core.MatcherHandle(gh_off), _core.MatcherHandle(gh_on)
            for i in range(len(toks) + 1):
                m_off.fill_mask(a)
                try:
                    m_on.fill_mask(b)
                except Exception as e:  # noqa: BLE001 - a refusal is a finding
                    out["diffs"].append({"kind": kind, "n": n, "step": i, "what": f"fill raised {e!r}"})
                    break
                out["masks"] += 1
                if not np.array_equal(a, b):
                    d = np.flatnonzero(np.unpackbits((a ^ b).view(np.uint8), bitorder="little"))
                    out["diffs"].append(
                        {"kind": kind, "n": n, "step": i, "what": "mask", "tokens": d[:20].tolist()}
                    )
                    break
                if i == len(toks):
                    if m_off.is_accepting() != m_on.is_accepting():
                        out["diffs"].append({"kind": kind, "n": n, "step": i, "what": "is_accepting"})
                    break
                va, vb = m_off.accept_token(toks[i]), m_on.accept_token(toks[i])
                if va != vb:
                    out["diffs"].append(
                        {"kind": kind, "n": n, "step": i, "what": f"accept {toks[i]}: {va} vs {vb}"}
                    )
                    break
                if not va:
                    out["refusals"] += 1
                    break
                out["accepts"] += 1
    return out


def _strategy(spec: str | None) -> Any:
    """``DEFAULT`` with ``field=int`` pairs replaced (``--off-strategy``)."""
    import dataclasses

    from cfgmask.compile.strategy import DEFAULT

    pairs = [kv.split("=") for kv in spec.split(",")] if spec else []
    return dataclasses.replace(DEFAULT, **{k: type(getattr(DEFAULT, k))(int(v)) for k, v in pairs})


def census(args: argparse.Namespace) -> dict[str, Any]:
    cm, _core, vocab, (on_compile, form_of) = _setup()
    off_strategy = _strategy(args.off_strategy)
    words = vocab.size // 32 + 1
    row = np.zeros(words, dtype=np.int32)
    jobs = _jobs(set(args.ids.split(",")) if args.ids else None)
    results: dict[str, Any] = {}
    primed = False
    for job in jobs:
        sid = job["id"]
        try:
            grammar = cm.Grammar.from_json_schema(job["text"])
            form = form_of(grammar)
        except Exception as e:  # noqa: BLE001
            results[sid] = {"skipped": repr(e)[:200]}
            continue
        if not form.segments:
            continue
        rec: dict[str, Any] = {"segments": len(form.segments)}
        if not primed and job["valid"]:  # the vocabulary's first counted build, once
            _replay(_core.MatcherHandle(on_compile(form)), job["valid"][0], row, lambda i, t: None)
            primed = True
        cm.clear_caches()
        rec["exact"] = {"instances": 0, "masks": 0, "accepts": 0, "refusals": 0, "diffs": []}
        if not args.no_exact:
            rec["exact"] = _exact(
                _core,
                cm.compile(grammar, vocab, _strategy=off_strategy)._handle,
                on_compile(form_of(grammar)),
                job,
                words,
            )
        if job["valid"]:
            toks = job["valid"][0]
            for mode in ("off", "on"):
                comp, cold, warm = [], [], []
                fills: list[list[float]] = []
                builds: list[tuple[int, ...]] = []
                for rep in range(args.reps):
                    g = cm.Grammar.from_json_schema(job["text"])
                    cm.clear_caches()
                    t0 = time.thread_time_ns()
                    gh = (
                        on_compile(form_of(g))
                        if mode == "on"
                        else cm.compile(g, vocab, _strategy=off_strategy)._handle
                    )
                    comp.append((time.thread_time_ns() - t0) / 1e6)
                    per: list[float] = []
                    prev = [_builds(_core)]

                    def fill(
                        i: int,
                        t: float,
                        per: list[float] = per,
                        prev: list[Any] = prev,
                        rep: int = rep,
                        builds: list[Any] = builds,
                    ) -> None:
                        per.append(t)
                        if rep == 0:
                            now = _builds(_core)
                            builds.append(tuple(x - y for x, y in zip(now, prev[0], strict=True)))
                            prev[0] = now

                    _replay(_core.MatcherHandle(gh), toks, row, fill)
                    cold.append(sum(per))
                    fills.append(per)
                    w: list[float] = []

                    def keep(i: int, t: float, w: list[float] = w) -> None:
                        w.append(t)

                    _replay(_core.MatcherHandle(gh), toks, row, keep)
                    warm.append(sum(w))
                med = [statistics.median(x) for x in zip(*fills, strict=True)]
                top = sorted(range(len(med)), key=lambda i: -med[i])[:3]
                rec[mode] = {
                    "compile_ms": statistics.median(comp),
                    "fills_ms": statistics.median(cold),
                    "warm_ms": statistics.median(warm),
                    "n_fills": len(med),
                    "max_fill_ms": max(med),
                    "top": [[i, med[i], list(builds[i])] for i in top],
                    "builds": [sum(b[k] for b in builds) for k in range(6)],
                }
        results[sid] = rec
        ex = rec["exact"]
        print(
            sid,
            f"inst {ex['instances']} masks {ex['masks']} diffs {len(ex['diffs'])}",
            *(
                f"{m} c {rec[m]['compile_ms']:.1f} f {rec[m]['fills_ms']:.1f} w {rec[m]['warm_ms']:.1f}"
                for m in ("off", "on")
                if m in rec
            ),
            file=sys.stderr,
            flush=True,
        )
    return results


def _cg_inner(args: argparse.Namespace) -> None:
    from .callgrind_costs import Counter

    cm, _core, vocab, (on_compile, form_of) = _setup()
    row = np.zeros(vocab.size // 32 + 1, dtype=np.int32)
    count = Counter(profile=args.profile is not None)
    jobs = {j["id"]: j for j in _jobs(set(args.callgrind.split(",")))}
    first = True
    for sid in args.callgrind.split(","):
        job = jobs[sid]
        toks = job["valid"][0]
        for mode in args.modes.split(","):
            g = cm.Grammar.from_json_schema(job["text"])
            if first and mode == "on":  # prime the vocabulary outside the counted regions
                _replay(_core.MatcherHandle(on_compile(form_of(g))), toks, row, lambda i, t: None)
                first = False
            cm.clear_caches()

            def build(g: Any = g, mode: str = mode) -> Any:
                return on_compile(form_of(g)) if mode == "on" else cm.compile(g, vocab)._handle

            phases = args.phases.split(",")
            gh = count.region(f"{mode}:compile:{sid}", build) if "compile" in phases else build()
            for phase in ("fill", "warm"):  # warm: a second matcher, after the first (counted or not)
                mh = _core.MatcherHandle(gh)
                for i in range(len(toks) + 1):
                    b0 = _builds(_core)
                    if phase in phases:
                        count.region(f"{mode}:{phase}:{sid}:{i}", mh.fill_mask, row)
                    else:
                        mh.fill_mask(row)
                    if mode == "on" and phase == "fill":
                        d = [x - y for x, y in zip(_builds(_core), b0, strict=True)]
                        if any(d[k] for k in (0, 4, 5)):
                            print(f"BUILDS {sid}:{i} {d}", file=sys.stderr, flush=True)
                    if i == len(toks):
                        break
                    mh.accept_token(toks[i])


def _cg_outer(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="cgcensus") as tmp:
        cmd = [
            "valgrind",
            "--tool=callgrind",
            "--instr-atstart=no",
            "--collect-atstart=no",
            f"--callgrind-out-file={args.profile or f'{tmp}/cg.out'}",
            sys.executable,
            "-m",
            "benchmarks.counters_census",
            "--inner",
            "--callgrind",
            args.callgrind,
            "--modes",
            args.modes,
            "--phases",
            args.phases,
            *(["--profile", args.profile] if args.profile else []),
        ]
        env = dict(os.environ, PYTHONHASHSEED="0", PYTHONPATH=str(ROOT))
        subprocess.run(cmd, check=True, env=env, cwd=ROOT, stdout=sys.stderr)
        counts: dict[str, Any] = {}
        for f in Path(tmp).iterdir():
            t = f.read_text(errors="replace")
            label = re.search(r"^desc: Trigger: Client Request: (.*)$", t, re.M)
            n = re.search(r"^(?:summary|totals): (\d+)", t, re.M)
            if label and n:
                counts[label.group(1)] = counts.get(label.group(1), 0) + int(n.group(1))
    return counts


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--out", help="JSON file for the results")
    ap.add_argument("--ids", help="comma-separated schema ids (default: every schema with segments)")
    ap.add_argument("--reps", type=int, default=3, help="timed repetitions per schema and mode (median)")
    ap.add_argument("--no-exact", action="store_true", help="costs only")
    ap.add_argument(
        "--off-strategy",
        help="the off compile's Strategy fields replaced, e.g. stack_verdicts=0,closing_verdicts=0 "
        "(what a piece the counted grammar lacks is worth on the unrolled one)",
    )
    ap.add_argument("--callgrind", help="comma-separated schema ids to count in instructions instead")
    ap.add_argument("--modes", default="off,on", help="with --callgrind: which compiles (off, on)")
    ap.add_argument("--phases", default="compile,fill,warm", help="with --callgrind: which regions")
    ap.add_argument(
        "--profile", help="with --callgrind: every region into this one callgrind file (callgrind_annotate)"
    )
    ap.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.inner:
        _cg_inner(args)
        return 0
    res = _cg_outer(args) if args.callgrind else census(args)
    if args.out:
        Path(args.out).write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
