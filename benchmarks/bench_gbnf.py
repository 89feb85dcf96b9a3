"""MaskBench-style replay of the shipped GBNF grammars: cfgmask beside xgrammar and llguidance.

For each grammar (grammars/{json,c,arithmetic,sql}.gbnf, and grammars/sql.lark: the SQL
documents against the Lark grammar) and a set of real documents (benchmarks/documents.py),
tokenized with Llama-3 BPE:

1. every engine replays every document; a document cfgmask rejects is dropped, one a peer
   rejects is a finding (with the exact text and token);
2. compile time, cold: grammar text to a compiled grammar, caches cleared, median of several;
3. replay on one thread: the time of each mask (fill the bitmask; accept_token timed apart)
   at every step, the final step (where only the stop tokens are allowed) included.
   Pass 1 runs on a freshly compiled grammar (cfgmask's lazy mask cache starts empty: cold),
   repeated with a fresh compile each time; pass 2 replays on the compiled grammar of the
   last pass 1 (warm);
4. the masks are compared with cfgmask's at every step both engines computed; for each
   disagreement the first differing ids are reported with their bytes and the text so far.

An engine that precomputes its whole mask table at compile time (xgrammar) gives the same
cost whether earlier steps were masked or not, so when its replay would run past
--budget seconds only every k-th step is masked (the others just accepted); the table says
how many steps were timed.  Engines with lazy caches (cfgmask, llguidance) mask every step.

    python -m benchmarks.bench_gbnf            # full run, ~10 minutes on 2 cores
    python -m benchmarks.bench_gbnf --quick    # smoke run, < 1 minute
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import math
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np

from .common import (
    GRAMMARS_DIR,
    LLAMA3_STOPS,
    Engine,
    LarkText,
    Stats,
    allowed_ids,
    environment,
    fmt,
    llama3_token_bytes,
    load_engines,
    median_ms,
    single_thread,
    tokenize,
    write_results,
)
from .documents import DOCUMENTS

GRAMMARS = ("json", "c", "arithmetic", "sql", "sql.lark")
ENGINES = ("cfgmask", "xgrammar", "llguidance")
SAMPLABLE = {"xgrammar"}  # masks precomputed at compile time: skipping steps changes nothing
PROBES = 8  # steps masked to estimate an engine's cost before choosing its stride
MAX_EXAMPLES = 6  # detailed disagreements kept per (grammar, peer)


@dataclass
class Doc:
    index: int
    text: str
    tokens: list[int]


@dataclass
class Replay:
    """Per-step results of one pass of one engine over one document."""

    fill_ns: list[int] = field(default_factory=list)
    accept_ns: list[int] = field(default_factory=list)
    digests: dict[int, tuple[int, bytes]] = field(default_factory=dict)  # step -> (popcount, hash)


def _digest(words: np.ndarray) -> tuple[int, bytes]:
    return int(np.bitwise_count(words.view(np.uint32)).sum()), hashlib.blake2b(
        words.tobytes(), digest_size=8
    ).digest()


def _prefix(tokens: Sequence[int], step: int, width: int = 60) -> str:
    text = b"".join(llama3_token_bytes()[t] for t in tokens[:step]).decode("utf-8", "replace")
    return ("…" if len(text) > width else "") + text[-width:]


# ---- acceptance --------------------------------------------------------------------------


def check_documents(engine: Engine, compiled: Any, docs: Sequence[Doc]) -> dict[int, str | None]:
    """doc index -> None if the engine accepts the whole document, else why not."""
    out: dict[int, str | None] = {}
    for d in docs:
        m = engine.matcher(compiled)
        out[d.index] = None
        for i, t in enumerate(d.tokens):
            if not engine.accept(m, t):
                out[d.index] = f"rejects token {i} {llama3_token_bytes()[t]!r} after {_prefix(d.tokens, i)!r}"
                break
        else:
            if not engine.is_accepting(m):
                out[d.index] = "not accepting at the end of the document"
    return out


# ---- replay ------------------------------------------------------------------------------


def replay(
    engine: Engine,
    compiled: Any,
    docs: Sequence[Doc],
    stride: int = 1,
    offset: int = 0,
    digests: bool = False,
    only: set[int] | None = None,
) -> dict[int, Replay]:
    """One pass over ``docs``: mask step s (counted over the pass) when s % stride == offset,
    or when s is in ``only``; the other steps are only accepted."""
    clock = time.perf_counter_ns
    mask = engine.new_mask()
    words = engine.mask_words(mask)
    out: dict[int, Replay] = {}
    step = 0
    gc.disable()
    try:
        for d in docs:
            r = out[d.index] = Replay()
            m = engine.matcher(compiled)
            fill = partial(engine.fill, m, mask)
            accept = partial(engine.accept, m)
            for i in range(len(d.tokens) + 1):
                if (step in only) if only is not None else (step % stride == offset):
                    t0 = clock()
                    fill()
                    r.fill_ns.append(clock() - t0)
                    if digests:
                        r.digests[i] = _digest(words)
                step += 1
                if i == len(d.tokens):
                    break
                t0 = clock()
                ok = accept(d.tokens[i])
                r.accept_ns.append(clock() - t0)
                if not ok:
                    break  # only documents the engine accepts are replayed; kept as a guard
    finally:
        gc.enable()
    return out


def choose_stride(engine: Engine, compiled: Any, docs: Sequence[Doc], budget_s: float) -> int:
    """1, or for an engine whose masks do not depend on earlier steps, the stride that keeps one
    pass near ``budget_s`` (estimated from masking a few steps spread over the documents)."""
    if engine.name not in SAMPLABLE or not docs:
        return 1
    steps = sum(len(d.tokens) + 1 for d in docs)
    probes = {round(k * (steps - 1) / (PROBES - 1)) for k in range(PROBES)}
    r = replay(engine, compiled, docs, only=probes)
    fills = [t for x in r.values() for t in x.fill_ns]
    per_step = sum(fills) / len(fills) / 1e9
    return max(1, math.ceil(per_step * steps / budget_s))


# ---- mask comparison ---------------------------------------------------------------------


def compare(
    ref: Engine,
    ref_cg: Any,
    peer: Engine,
    peer_cg: Any,
    docs: Sequence[Doc],
    ref_pass: dict[int, Replay],
    peer_pass: dict[int, Replay],
) -> dict[str, Any]:
    """Steps where both engines masked and the masks differ; details for the first few."""
    compared = differing = 0
    examples: list[dict[str, Any]] = []
    for d in docs:
        a, b = ref_pass.get(d.index), peer_pass.get(d.index)
        if a is None or b is None:
            continue
        doc_first = True
        for step, dig in b.digests.items():
            if step not in a.digests:
                continue
            compared += 1
            if a.digests[step] == dig:
                continue
            differing += 1
            if doc_first and len(examples) < MAX_EXAMPLES:
                examples.append(_difference(ref, ref_cg, peer, peer_cg, d, step))
                doc_first = False
    return {"steps_compared": compared, "steps_differing": differing, "examples": examples}


def _mask_at(engine: Engine, compiled: Any, d: Doc, step: int) -> np.ndarray:
    m = engine.matcher(compiled)
    for t in d.tokens[:step]:
        engine.accept(m, t)
    mask = engine.new_mask()
    engine.fill(m, mask)
    return allowed_ids(engine.mask_words(mask))


def _difference(ref: Engine, ref_cg: Any, peer: Engine, peer_cg: Any, d: Doc, step: int) -> dict[str, Any]:
    a, b = _mask_at(ref, ref_cg, d, step), _mask_at(peer, peer_cg, d, step)
    only_ref, only_peer = np.setdiff1d(a, b), np.setdiff1d(b, a)
    toks = llama3_token_bytes()
    return {
        "doc": d.index,
        "step": step,
        "prefix": _prefix(d.tokens, step),
        "next_token": repr(toks[d.tokens[step]]) if step < len(d.tokens) else "<end>",
        f"{ref.name}_allowed": int(a.size),
        f"{peer.name}_allowed": int(b.size),
        f"only_{ref.name}": [(int(t), repr(toks[t])) for t in only_ref[:8]],
        f"only_{peer.name}": [(int(t), repr(toks[t])) for t in only_peer[:8]],
        f"n_only_{ref.name}": int(only_ref.size),
        f"n_only_{peer.name}": int(only_peer.size),
    }


# ---- one grammar -------------------------------------------------------------------------


def _grammar_path(name: str) -> Any:
    """grammars/NAME.gbnf, or grammars/NAME for a Lark grammar (``sql.lark``)."""
    return GRAMMARS_DIR / (name if name.endswith(".lark") else f"{name}.gbnf")


def bench_grammar(name: str, engines: Sequence[Engine], args: argparse.Namespace) -> dict[str, Any]:
    lark = name.endswith(".lark")
    raw = _grammar_path(name).read_text()
    text = LarkText(raw) if lark else raw
    docs = [Doc(i, s, tokenize(s)) for i, s in enumerate(DOCUMENTS[name.removesuffix(".lark")]())]
    if args.quick:
        docs = docs[: args.quick_docs]

    def first_pass(
        e: Engine, cg: Any, ds: Sequence[Doc], stride: int, offset: int, first: bool
    ) -> dict[int, Replay]:
        return replay(e, cg, ds, stride, offset, digests=first)

    def agree(
        ref: Engine,
        peer: Engine,
        compiled: dict[str, Any],
        ds: Sequence[Doc],
        a: dict[int, Replay],
        b: dict[int, Replay],
    ) -> dict[str, Any]:
        return compare(ref, compiled[ref.name], peer, compiled[peer.name], ds, a, b)

    return bench_documents(name, text, engines, docs, args, first_pass, agree)


def bench_documents(
    name: str,
    text: Any,
    engines: Sequence[Engine],
    docs: list[Doc],
    args: argparse.Namespace,
    replay_fn: Callable[[Engine, Any, Sequence[Doc], int, int, bool], dict[int, Replay]],
    compare_fn: Callable[..., dict[str, Any]],
) -> dict[str, Any]:
    """Compile ``text`` (through each engine's ``adapt``), check the documents, replay them cold
    (``args.reps`` fresh compiles) and warm, and compare the masks with the first engine's.
    ``replay_fn(engine, compiled, docs, stride, offset, first)`` times one pass (``first``: keep
    what ``compare_fn`` needs); ``compare_fn(ref, peer, compiled, docs, ref_pass, peer_pass)``."""
    result: dict[str, Any] = {
        "documents": len(docs),
        "tokens": sum(len(d.tokens) for d in docs),
        "engines": {},
    }
    compiled: dict[str, Any] = {}
    compile_s: dict[str, list[float]] = {}  # every cold compile of the run is timed
    accepted: dict[str, set[int]] = {}
    for e in engines:
        info: dict[str, Any] = {}
        result["engines"][e.name] = info
        gtext, info["rewrites"] = e.adapt(text)
        try:
            compiled[e.name], t = _cold_compile(e, gtext)
            compile_s[e.name] = [t]
        except Exception as ex:  # a peer that cannot read the grammar is a finding, not a crash
            info["error"] = f"{type(ex).__name__}: {ex}"
            _log(f"  {e.name}: cannot compile: {info['error'][:200]}")
            continue
        verdicts = check_documents(e, compiled[e.name], docs)
        info["rejected"] = {i: v for i, v in verdicts.items() if v}
        accepted[e.name] = {i for i, v in verdicts.items() if not v}
        for i, why in info["rejected"].items():
            _log(f"  {e.name} rejects {name} doc {i}: {why}")
    ref = engines[0]
    if ref.name in accepted:  # documents the engine under test rejects are dropped for everyone
        result["dropped"] = sorted(set(range(len(docs))) - accepted[ref.name])
        docs = [d for d in docs if d.index in accepted[ref.name]]
    passes: dict[str, dict[int, Replay]] = {}
    for e in engines:
        if e.name not in compiled:
            continue
        info = result["engines"][e.name]
        own = [d for d in docs if d.index in accepted[e.name]]
        info["documents"] = [d.index for d in own]
        gtext = e.adapt(text)[0]
        # every document cfgmask accepts is replayed (up to a rejection, for the mask
        # comparison); the statistics count the documents this engine accepts whole
        stride = choose_stride(e, compiled[e.name], docs, args.budget)
        info["stride"] = stride
        keep = {d.index for d in own}
        cold_fill: list[int] = []
        cold_accept: list[int] = []
        per_doc_cold: dict[int, list[int]] = {i: [] for i in keep}
        for rep in range(args.reps):
            _log(f"  {e.name}: pass 1 (cold) #{rep + 1}, stride {stride}")
            cg, t = _cold_compile(e, gtext)
            compile_s[e.name].append(t)
            r = replay_fn(e, cg, docs, stride, rep % stride, rep == 0)
            if rep == 0:
                passes[e.name] = r
            for i, x in r.items():
                if i in keep:
                    cold_fill += x.fill_ns
                    cold_accept += x.accept_ns
                    per_doc_cold[i] += x.fill_ns
        _log(f"  {e.name}: pass 2 (warm)")
        w = replay_fn(e, cg, own, stride, 0, False)
        info["cold"] = Stats.of_ns(cold_fill)
        info["warm"] = Stats.of_ns([t for x in w.values() for t in x.fill_ns])
        info["accept"] = Stats.of_ns(cold_accept)
        info["_per_doc_cold"] = per_doc_cold  # for ratios over shared documents; dropped on output
        info["compile_ms"] = median_ms(compile_s[e.name])
        info["compile_runs"] = len(compile_s[e.name])
        if e.name == "cfgmask" and args.warm_compile:
            # XGrammar's way: the whole mask cache built at compile time, then one pass
            _log("  cfgmask: compile(warm=True), then pass 3 (precompiled)")
            pg, t = _cold_compile(e, gtext, warm=True)
            info["compile_warm_ms"] = t * 1e3
            pw = replay_fn(e, pg, own, stride, 0, False)
            info["precompiled"] = Stats.of_ns([t for x in pw.values() for t in x.fill_ns])
        if e.name == "cfgmask":
            info["cache"] = dict(cg.stats)
    result["agreement"] = {}
    if ref.name in passes:
        for e in engines[1:]:
            if e.name in passes:
                _log(f"  comparing masks: {ref.name} vs {e.name}")
                result["agreement"][e.name] = compare_fn(
                    ref, e, compiled, docs, passes[ref.name], passes[e.name]
                )
    result["ratios"] = _ratios(result, ref.name)
    return result


def _cold_compile(e: Engine, gtext: str, warm: bool = False) -> tuple[Any, float]:
    """Compile with the engine's caches cleared; (compiled grammar, seconds)."""
    e.clear_caches()
    gc.collect()
    t0 = time.perf_counter()
    cg = e.compile(gtext, warm=True) if warm else e.compile(gtext)  # type: ignore[call-arg]
    return cg, time.perf_counter() - t0


def _ratios(result: dict[str, Any], ref: str) -> dict[str, dict[str, float | None]]:
    """cfgmask / peer, the mask statistics taken over the documents both accept."""
    out: dict[str, dict[str, float | None]] = {}
    r = result["engines"].get(ref, {})
    if r.get("cold") is None:
        return out
    for peer, p in result["engines"].items():
        if peer == ref or p.get("cold") is None:
            continue
        shared = set(r["_per_doc_cold"]) & set(p["_per_doc_cold"])
        a = Stats.of_ns([t for i in shared for t in r["_per_doc_cold"][i]])
        b = Stats.of_ns([t for i in shared for t in p["_per_doc_cold"][i]])
        row: dict[str, float | None] = {
            "compile": r["compile_ms"] / p["compile_ms"],
            "documents": len(shared),
        }
        for k in ("mean", "p50", "p99", "max"):
            row[k] = getattr(a, k) / getattr(b, k) if a and b and getattr(b, k) else None
        out[peer] = row
    return out


# ---- output ------------------------------------------------------------------------------


def table(results: dict[str, Any], label: str = "grammar", lw: int = 11, w: int = 10) -> str:
    """The side-by-side table; ``label``/``lw`` name and size the first column, ``w`` the
    number columns (bench_schemas widens them for seconds-long masks)."""
    stats = ("mean", "p50", "p99", "max")
    cols = "".join(f"{c:>{w}}" for c in stats)
    head = f"{label:<{lw}}{'engine':<11}{'docs':>5}{'compile ms':>11} |{cols}{'n':>6} |{cols} |{'accept':>8}"
    lines = [
        f"{'':<{lw + 27}}| pass 1 (cold): mask µs{'':<{4 * w - 16}}| pass 2 (warm): mask µs{'':<{4 * w - 22}}"
        "| mean µs",
        head,
        "-" * len(head),
    ]
    for g, res in results.items():
        for e, info in res["engines"].items():
            if info.get("cold") is None:
                why = info.get("error", "rejects every document")
                lines.append(f"{g:<{lw}}{e:<11}  {why[:90]}")
                continue
            c, wm, a = info["cold"], info["warm"], info["accept"]
            n = f"{c.n}" + ("*" if info["stride"] > 1 else "")
            lines.append(
                f"{g:<{lw}}{e:<11}{len(info['documents']):>5}{fmt(info['compile_ms'], 11)} |"
                + "".join(fmt(getattr(c, k), w) for k in stats)
                + f"{n:>6} |"
                + "".join(fmt(getattr(wm, k), w) for k in stats)
                + f" |{fmt(a.mean if a else None, 8)}"
            )
    lines.append("* every k-th step timed (an engine with no lazy state; see --budget)")
    pre = [
        (g, r["engines"]["cfgmask"])
        for g, r in results.items()
        if "precompiled" in r["engines"].get("cfgmask", {})
    ]
    if pre:
        lines += [
            "",
            "cfgmask after compile(warm=True) (whole mask cache built at compile time), one pass:",
            f"{label:<{lw}}{'compile ms':>11} |" + "".join(f"{k:>{w}}" for k in stats),
        ]
        for g, info in pre:
            p = info["precompiled"]
            lines.append(
                f"{g:<{lw}}{fmt(info['compile_warm_ms'], 11)} |"
                + "".join(fmt(getattr(p, k), w) for k in stats)
            )
    if not any(res["ratios"] for res in results.values()):
        return "\n".join(lines)
    lines += [
        "",
        "cfgmask / peer (pass 1 mask times over the documents both engines accept; < 1: cfgmask faster)",
        f"{label:<{lw}}{'peer':<11}{'docs':>5}" + "".join(f"{c:>9}" for c in ("compile", *stats)),
    ]
    for g, res in results.items():
        for peer, r in res["ratios"].items():
            vals = "".join(_ratio(r[k]) for k in ("compile", *stats))
            lines.append(f"{g:<{lw}}{peer:<11}{r['documents']:>5}{vals}")
    return "\n".join(lines)


def _ratio(x: float | None) -> str:
    if x is None:
        return f"{'-':>9}"
    return f"{x:>9.2g}" if x < 0.1 else f"{x:>9.2f}"


def findings(results: dict[str, Any]) -> str:
    lines = []
    for g, res in results.items():
        if res.get("dropped"):
            lines.append(f"{g}: cfgmask rejects documents {res['dropped']} (dropped)")
        for e, info in res["engines"].items():
            if info.get("error"):
                lines.append(f"{g}: {e} cannot compile the grammar: {info['error'][:200]}")
            for i, why in info.get("rejected", {}).items():
                lines.append(f"{g}: {e} rejects doc {i}: {why}")
            if info.get("rewrites"):
                lines.append(f"{g}: {e} got the grammar with: {'; '.join(info['rewrites'])}")
        for peer, a in res["agreement"].items():
            lines.append(
                f"{g}: masks cfgmask vs {peer}: {a['steps_differing']} of {a['steps_compared']} "
                "compared steps differ"
            )
            for x in a["examples"][:3]:
                lines.append(
                    f"    doc {x['doc']} step {x['step']} after {x['prefix']!r}: "
                    f"cfgmask {x['cfgmask_allowed']}, {peer} {x[peer + '_allowed']}; "
                    f"only cfgmask {x['only_cfgmask'][:4]}, only {peer} {x['only_' + peer][:4]}"
                )
    return "\n".join(lines)


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="smoke run: one document a grammar, one cold pass")
    p.add_argument("--grammars", default=",".join(GRAMMARS))
    p.add_argument("--engines", default=",".join(ENGINES), help="the first one is the reference")
    p.add_argument(
        "--reps",
        type=int,
        default=2,
        help="cold passes, each on a fresh compile (compile time: median of reps + 1)",
    )
    p.add_argument(
        "--budget",
        type=float,
        default=12.0,
        help="seconds of masking one pass may take for an engine with no lazy state",
    )
    p.add_argument(
        "--no-warm-compile",
        dest="warm_compile",
        action="store_false",
        help="skip timing cfgmask's compile(warm=True)",
    )
    p.add_argument("--out", default="bench_gbnf")
    args = p.parse_args(argv)
    args.quick_docs = 1
    if args.quick:
        args.reps, args.budget, args.warm_compile = 1, 1.5, False
        args.out += "_quick"
    single_thread()
    engines, missing = load_engines(args.engines.split(","))
    for name, why in missing.items():
        _log(f"{name}: {why}")
    if not engines:
        return 1
    t0 = time.perf_counter()
    results: dict[str, Any] = {}
    for g in args.grammars.split(","):
        if not _grammar_path(g).exists():
            _log(f"{g}: no {_grammar_path(g).relative_to(GRAMMARS_DIR.parent)}, skipped")
            continue
        _log(f"{g}:")
        results[g] = bench_grammar(g, engines, args)
    print(table(results))
    if len(engines) == 1:
        why = f"{', '.join(missing)} not installed: see benchmarks/README.md" if missing else "--engines"
        print(f"\nno peer ran: {engines[0].name} alone ({why})")
    if args.quick:
        print(
            "\nquick run: one document a grammar and one cold pass, so p99 is the slowest of a few "
            "dozen masks and moves with the machine's load; README.md's table is the full run "
            "(python -m benchmarks.bench_gbnf: every document, thousands of masks)"
        )
    print()
    print(findings(results))
    for res in results.values():
        for info in res["engines"].values():
            info.pop("_per_doc_cold", None)
    env = environment(engines)
    env["missing"] = missing
    env["args"] = vars(args)
    env["wall_s"] = round(time.perf_counter() - t0, 1)
    env["stop_tokens"] = list(LLAMA3_STOPS)
    path = write_results(args.out, {"environment": env, "grammars": results})
    print(f"\nwrote {path} ({env['wall_s']} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
