"""Structural tags for tool calling: per-token mask cost over a long stretch of free text and
inside tool calls, cfgmask beside XGrammar on the same spec (Llama-3 vocabulary, one thread).

    python -m benchmarks.bench_structural_tag [--paragraphs 40] [--passes 3]

The spec is ``cfgmask.tools.tool_call_structural_tag`` of ``examples/tools.json`` (Hermes syntax,
``tool_choice="auto"``): ``triggered_tags`` with the trigger ``<tool_call>``, each tag a JSON
Schema.  The document is prose (paragraphs of docs/design.md, no ``<tool_call>`` in them) with a
Hermes tool call after every tenth paragraph, tokenized by Llama-3 BPE; both engines replay the
same ids.  Every mask is timed and counted as *free text* or *in a call* by where its token
starts.  Pass 1 is cold (a fresh compile: first visits of each state included); later passes
replay the document with a new matcher on the same compiled grammar (warm caches).  Compile time
is the structural tag's parse plus compile.
"""

from __future__ import annotations

import argparse
import json
import re
import time
from pathlib import Path
from typing import Any

from .common import (
    CfgmaskEngine,
    Stats,
    XGrammarEngine,
    environment,
    fmt,
    llama3,
    single_thread,
    write_results,
)

ROOT = Path(__file__).resolve().parent.parent


def document(paragraphs: int) -> tuple[str, list[tuple[int, int]]]:
    """Prose with tool calls; the character spans of the calls."""
    text = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
    prose = [
        p.strip() for p in re.split(r"\n\s*\n", text) if p.strip() and not p.startswith(("|", "```", "#"))
    ]
    calls = [
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}'
        "\n</tool_call>",
        '<tool_call>\n{"name": "get_time", "arguments": {"timezone": "Europe/Oslo"}}\n</tool_call>',
    ]
    out, spans = "", []
    for i in range(paragraphs):
        out += prose[i % len(prose)] + "\n\n"
        if i % 10 == 9:
            call = calls[(i // 10) % len(calls)]
            spans.append((len(out), len(out) + len(call)))
            out += call + "\n\n"
    return out, spans


def replay(engine: Any, compiled: Any, ids: list[int], in_call: list[bool]) -> dict[str, list[int]]:
    times: dict[str, list[int]] = {"free text": [], "in a call": []}
    m = engine.matcher(compiled)
    mask = engine.new_mask()
    for t, call in zip(ids, in_call, strict=True):
        t0 = time.perf_counter_ns()
        engine.fill(m, mask)
        times["in a call" if call else "free text"].append(time.perf_counter_ns() - t0)
        if not engine.accept(m, t):
            raise AssertionError(f"{engine.name} refused token {t} ({engine.tokens.token_bytes[t]!r})")
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--paragraphs", type=int, default=40)
    ap.add_argument("--passes", type=int, default=3)
    args = ap.parse_args()
    single_thread()

    from cfgmask.tools import tool_call_structural_tag

    tools = json.loads((ROOT / "examples" / "tools.json").read_text())
    spec = tool_call_structural_tag(tools, "auto", "hermes")
    text, spans = document(args.paragraphs)
    tokens = llama3()
    ids = tokens.encode(text)
    offsets, pos = [], 0
    for t in ids:
        offsets.append(pos)
        pos += len(tokens.token_bytes[t].decode("utf-8", "replace"))
    in_call = [any(a <= o < b for a, b in spans) for o in offsets]
    print(f"document: {len(ids)} tokens, {sum(in_call)} of them in {len(spans)} calls")

    engines: list[Any] = [CfgmaskEngine(tokens), XGrammarEngine(tokens)]
    results: dict[str, Any] = {"spec": spec, "tokens": len(ids), "call_tokens": sum(in_call), "engines": {}}
    for e in engines:
        e.clear_caches()
        t0 = time.perf_counter()
        if e.name == "cfgmask":
            compiled = e._cm.compile(e._cm.Grammar.structural_tag(spec), e.vocab)
        else:
            compiled = e.compiler.compile_structural_tag(json.dumps(spec))
        compile_ms = (time.perf_counter() - t0) * 1e3
        cold = replay(e, compiled, ids, in_call)
        warm: dict[str, list[int]] = {"free text": [], "in a call": []}
        for _ in range(args.passes - 1):
            for k, v in replay(e, compiled, ids, in_call).items():
                warm[k] += v
        results["engines"][e.name] = {
            "compile_ms": compile_ms,
            "cold": {k: Stats.of_ns(v) for k, v in cold.items()},
            "warm": {k: Stats.of_ns(v) for k, v in warm.items()},
        }

    head = f"{'engine':10} {'compile ms':>10}  {'pass':5} {'region':10}"
    print(f"\n{head} {'p50 µs':>9} {'p99 µs':>9} {'max µs':>9}")
    for name, r in results["engines"].items():
        for when in ("cold", "warm"):
            for region, s in r[when].items():
                if s is not None:
                    row = f"{name:10} {r['compile_ms']:10.1f}  {when:5} {region:10}"
                    print(f"{row} {fmt(s.p50)} {fmt(s.p99)} {fmt(s.max)}")
    ours, theirs = results["engines"]["cfgmask"], results["engines"]["xgrammar"]
    print("\nratios xgrammar / cfgmask (above 1: cfgmask faster)")
    results["ratios"] = {}
    for when in ("cold", "warm"):
        for region in ("free text", "in a call"):
            a, b = ours[when][region], theirs[when][region]
            if a and b:
                r = {"p50": b.p50 / a.p50, "p99": b.p99 / a.p99}
                results["ratios"][f"{when} {region}"] = r
                print(f"  {when:5} {region:10} p50 {r['p50']:6.2f}   p99 {r['p99']:6.2f}")
    results["ratios"]["compile"] = theirs["compile_ms"] / ours["compile_ms"]
    print(f"  compile {results['ratios']['compile']:.2f}")
    results["environment"] = environment(engines)
    print(f"\nwrote {write_results('bench_structural_tag', results)}")


if __name__ == "__main__":
    main()
