"""Serving benchmark: vLLM with SmolLM2-135M-Instruct on JSON-Schema requests, four ways.

* ``unconstrained``: the same prompts, no grammar (the speed ceiling; cfgmask's plugin is
  installed and loaded but masks nothing);
* ``cfgmask``: cfgmask's logits-processor plugin, the schema in ``extra_args["json_schema"]``;
* ``xgrammar`` and ``guidance``: vLLM's own structured-output backends
  (``structured_outputs_config={"backend": ...}``), the schema in ``StructuredOutputsParams``.

The requests: the first N schemas of ``bench_model_schemas.select_schemas`` (JSONSchemaBench,
Glaiveai2K / Github_easy / Github_medium), one request each, the model's chat template with a
prompt that names the schema; temperature 0.7, a seed per request, ``--max-tokens`` new tokens.
All requests are added at once and the engine is stepped until they finish (``LLMEngine``), so
the batch is what vLLM's scheduler makes of N concurrent requests.  A request an engine refuses
at admission is counted as refused.

Each mode runs in its own process (its own engine: vLLM fixes the structured-output backend per
engine) with the engine in that process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``) so that cfgmask's
per-step processor time can be read off the processor; a warm-up request with a schema not in the
set runs first.  cfgmask's disk cache is a fresh directory for each run: every schema compiles.

Reported per mode: output tokens per second over the whole batch (a mode whose outputs end
sooner runs a smaller batch for longer: compare TPOT too), time to first token (p50 / p90, from
adding the requests), time per output token after the first (TPOT, p50 over requests),
cfgmask's processor time per engine step (p50 / p99 / max), and validity of every output
(``json.loads`` and ``jsonschema`` with format checks; a truncated output is invalid).

    python -m benchmarks.bench_vllm --quick          # 8 requests, 96 tokens
    nice python -m benchmarks.bench_vllm --requests 24
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

MODES = ("unconstrained", "cfgmask", "xgrammar", "guidance")
SYSTEM = "You are a helpful assistant that answers with one JSON document and nothing else."


def _prompt(tok: Any, schema: Any) -> str:
    user = "Write one JSON instance of this JSON Schema, as compact JSON:\n" + json.dumps(
        schema, separators=(",", ":")
    )
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]
    text: str = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    return text


def _percentile(xs: list[float], q: float) -> float:
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def run_mode(mode: str, args: argparse.Namespace) -> dict[str, Any]:
    """One engine, all requests; runs in a worker process."""
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    os.environ["CFGMASK_VLLM_CACHE_DIR"] = tempfile.mkdtemp(prefix="cfgmask-bench-")
    from vllm import LLM, SamplingParams
    from vllm.sampling_params import StructuredOutputsParams

    from benchmarks.bench_model_schemas import select_schemas
    from benchmarks.bench_schemas import jsonschema_verdict
    from cfgmask.cli import cache_dir, load_model

    model = cache_dir() / "smollm2"
    if not (model / "cfgmask-source.json").is_file():
        load_model(None)
    kw: dict[str, Any] = {}
    if mode in ("xgrammar", "guidance"):
        kw["structured_outputs_config"] = {"backend": mode}
    llm = LLM(
        str(model),
        enforce_eager=True,
        dtype="float32",
        max_model_len=args.max_model_len,
        seed=0,
        disable_log_stats=True,
        **kw,
    )
    engine = llm.llm_engine
    tok = llm.get_tokenizer()
    schemas = select_schemas(args.requests + 1, seed=0)
    warm, schemas = schemas[-1], schemas[:-1]

    def params(i: int, schema: Any) -> Any:
        p: dict[str, Any] = {"temperature": 0.7, "seed": 1000 + i, "max_tokens": args.max_tokens}
        if mode == "cfgmask":
            p["extra_args"] = {"json_schema": schema}
        elif mode in ("xgrammar", "guidance"):
            p["structured_outputs"] = StructuredOutputsParams(json=schema)
        return SamplingParams(**p)

    def run(batch: list[tuple[str, Any]]) -> tuple[dict[str, Any], float]:
        t0 = time.perf_counter()
        first: dict[str, float] = {}
        last: dict[str, float] = {}
        done: dict[str, Any] = {}
        refused: dict[str, str] = {}
        for rid, schema in batch:
            try:
                engine.add_request(rid, _prompt(tok, schema), params(int(rid.split("-")[1]), schema))
            except Exception as e:  # noqa: BLE001 - an engine refusing a schema is a result
                refused[rid] = f"{type(e).__name__}: {str(e)[:160]}"
        while engine.has_unfinished_requests():
            for out in engine.step():
                now = time.perf_counter() - t0
                if out.outputs and out.outputs[0].token_ids and out.request_id not in first:
                    first[out.request_id] = now
                if out.finished:
                    done[out.request_id] = out
                    last[out.request_id] = now
        wall = time.perf_counter() - t0
        results = {}
        for rid, schema in batch:
            if rid in refused:
                results[rid] = {"refused": refused[rid]}
                continue
            c = done[rid].outputs[0]
            verdict = jsonschema_verdict(schema, c.text) if c.finish_reason == "stop" else "truncated"
            results[rid] = {
                "tokens": len(c.token_ids),
                "ttft_s": first.get(rid),
                "tpot_s": (last[rid] - first[rid]) / (len(c.token_ids) - 1)
                if rid in first and len(c.token_ids) > 1
                else None,
                "finish": c.finish_reason,
                "verdict": verdict,
                "text": c.text,
            }
        return results, wall

    run([("warm-0", warm["schema"])])
    import cfgmask.vllm

    for p in cfgmask.vllm.processors():
        p.stats.seconds.clear()
        p.stats.steps = p.stats.rows = 0
    results, wall = run([(f"req-{i}", s["schema"]) for i, s in enumerate(schemas)])
    step_s = [s for p in cfgmask.vllm.processors() for s in p.stats.seconds]
    served = [r for r in results.values() if "refused" not in r]
    return {
        "mode": mode,
        "requests": len(results),
        "refused": sum("refused" in r for r in results.values()),
        "wall_s": wall,
        "tokens": sum(r["tokens"] for r in served),
        "tok_per_s": sum(r["tokens"] for r in served) / wall,
        "ttft_p50_s": _percentile([r["ttft_s"] for r in served if r["ttft_s"] is not None], 0.5),
        "ttft_p90_s": _percentile([r["ttft_s"] for r in served if r["ttft_s"] is not None], 0.9),
        "tpot_p50_ms": 1e3 * _percentile([r["tpot_s"] for r in served if r["tpot_s"] is not None], 0.5),
        "valid": sum(r["verdict"] == "valid" for r in served),
        "truncated": sum(r["verdict"] == "truncated" for r in served),
        "proc_steps": len(step_s),
        "proc_p50_ms": 1e3 * _percentile(step_s, 0.5) if step_s else None,
        "proc_p99_ms": 1e3 * _percentile(step_s, 0.99) if step_s else None,
        "proc_max_ms": 1e3 * max(step_s) if step_s else None,
        "proc_mean_ms": 1e3 * statistics.fmean(step_s) if step_s else None,
        "results": results,
        "schema_ids": [f"{s['split']}/{s['id']}" for s in schemas],
    }


def table(rows: list[dict[str, Any]]) -> str:
    base = next((r["tok_per_s"] for r in rows if r["mode"] == "unconstrained"), None)
    head = (
        f"{'mode':<14}{'req':>4}{'refused':>8}{'tokens':>7}{'tok/s':>8}{'x free':>7}{'TTFT p50':>9}"
        f"{'p90':>7}{'TPOT ms':>8}{'valid':>7}{'trunc':>6}{'proc p50':>9}{'p99':>7}{'max ms':>7}"
    )
    lines = [head, "-" * len(head)]

    def ms(v: float | None) -> str:
        return "-" if v is None else f"{v:.2f}"

    for r in rows:
        rel = f"{r['tok_per_s'] / base:.3f}" if base else "-"
        served = r["requests"] - r["refused"]
        lines.append(
            f"{r['mode']:<14}{r['requests']:>4}{r['refused']:>8}{r['tokens']:>7}{r['tok_per_s']:>8.1f}{rel:>7}"
            f"{r['ttft_p50_s']:>8.2f}s{r['ttft_p90_s']:>6.2f}s{r['tpot_p50_ms']:>8.1f}{r['valid']:>4}/{served:<2}{r['truncated']:>6}"
            f"{ms(r['proc_p50_ms']):>9}{ms(r['proc_p99_ms']):>7}{ms(r['proc_max_ms']):>7}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=16)
    ap.add_argument("--max-tokens", type=int, default=192)
    ap.add_argument("--max-model-len", type=int, default=2048)
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--quick", action="store_true", help="8 requests, 96 tokens")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.quick:
        args.requests, args.max_tokens = 8, 96
    if args.worker:
        Path(args.out).write_text(json.dumps(run_mode(args.worker, args), default=str))
        return 0
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for mode in args.modes.split(","):
            out = Path(tmp) / f"{mode}.json"
            cmd = [sys.executable, "-m", "benchmarks.bench_vllm", "--worker", mode, "--out", str(out)]
            cmd += ["--requests", str(args.requests), "--max-tokens", str(args.max_tokens)]
            cmd += ["--max-model-len", str(args.max_model_len)]
            t0 = time.perf_counter()
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode != 0 or not out.is_file():
                print(f"{mode}: failed ({proc.returncode})\n{proc.stderr[-3000:]}", file=sys.stderr)
                continue
            rows.append(json.loads(out.read_text()))
            print(
                f"{mode}: {rows[-1]['tok_per_s']:.1f} tok/s ({time.perf_counter() - t0:.0f} s)",
                file=sys.stderr,
            )
    print(table(rows))
    from benchmarks.common import write_results

    path = write_results("vllm", {"args": vars(args), "modes": rows})
    print(f"results: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
