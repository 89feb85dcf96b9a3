"""Serving benchmark: vLLM with SmolLM2-135M-Instruct on JSON-Schema requests, compared on equal work.

Modes (the same requests in each):

* ``unconstrained``: the prompts with no grammar (cfgmask's plugin is installed and loaded, as
  it is in every engine, but masks no row);
* ``cfgmask``: cfgmask's logits-processor plugin, the schema in ``extra_args["json_schema"]``;
* ``xgrammar`` / ``guidance``: vLLM's own structured-output backends, the schema in
  ``StructuredOutputsParams(json=...)``;
* ``free@cfgmask`` / ``free@xgrammar`` / ``free@guidance``: the *equal-length* baselines: the
  same prompts unconstrained, each request with ``ignore_eos=True`` and ``max_tokens`` set to the
  length of that request's output in the named constrained mode (same repetition).  Every request
  then produces exactly as many tokens as it did constrained, so the engine runs the same batch
  occupancy step by step: the only difference left is the constraint.

Why not plain tok/s over the batch: an unconstrained request runs to ``--max-tokens`` while a
constrained one ends when its JSON does, so the unconstrained run steps a full batch for longer
and a constrained run a thinning one; batch tok/s then measures output length, not masking cost
(the first run of this script: cfgmask 0.57x for that reason alone).  So the throughput criterion
(issue 16: cfgmask >= 0.97x unconstrained and >= xgrammar) is read from:

1. ``x free@``: a constrained mode's tok/s over its equal-length baseline's tok/s (same tokens per
   request, same occupancy over time).  For cfgmask vs xgrammar, compare their ``x free@``
   ratios (each against its own equal-length baseline), since their outputs differ in length;
2. ``full tok/s``: decode tok/s over the engine steps in which all N requests each produced one
   decode token (no prefill, none finished yet): equal work per step (N rows) in every mode,
   so these are comparable across all modes directly;
3. TPOT: time per output token after the first, p50 over requests.

Whole-batch tok/s is printed too, with its ``x free`` (over the natural-length unconstrained run)
for completeness; it is not the criterion.

Validity: a request is ``finished`` when vLLM stopped it on a stop token (not the length limit),
``valid`` when its text passes ``json.loads`` and ``jsonschema`` with format checks; a truncated
output is counted and reported, never hidden.  ``--max-tokens`` is set high (384 in --quick) so
that a constrained output that truncates is a finding about the model/schema (e.g. a string
without ``maxLength`` the model never closes), not about the budget.

How it runs: two engines, each in its own process with the engine core in that process
(``VLLM_ENABLE_V1_MULTIPROCESSING=0``, so cfgmask's processor can be timed): engine A with
vLLM's structured-output backend set to xgrammar runs unconstrained, cfgmask, xgrammar and their
equal-length baselines; engine B (backend guidance) runs guidance and free@guidance (vLLM fixes
the backend per engine).  Modes are interleaved: each of ``--reps`` repetitions runs every mode
once, in an order rotated per repetition, so load drifting on a shared machine hits every mode
alike; the table gives medians over repetitions and, in brackets, min-max.  Requests: the first N
schemas of ``bench_model_schemas.select_schemas`` (JSONSchemaBench Glaiveai2K / Github_easy /
Github_medium), the chat template with a prompt that names the schema, temperature 0.7, a seed
per request, all added at once and the engine stepped until done.  Prefix caching is off: every
mode sends the same prompts, and a later mode must not find an earlier one's prefill cached.
A warm-up request with a schema outside the set runs first; grammars compile in the first
repetition (cfgmask's disk cache is a fresh directory) and come from each engine's own
in-memory cache afterwards.

    python -m benchmarks.bench_vllm --quick            # 8 requests, 384 tokens, 3 repetitions
    nice python -m benchmarks.bench_vllm --requests 16 --reps 5
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

ENGINES = {"xgrammar": ("unconstrained", "cfgmask", "xgrammar"), "guidance": ("guidance",)}
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


def run_engine(backend: str, args: argparse.Namespace) -> dict[str, Any]:
    """One engine (structured-output backend ``backend``), its modes interleaved ``reps`` times;
    runs in a worker process."""
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    os.environ["CFGMASK_VLLM_CACHE_DIR"] = tempfile.mkdtemp(prefix="cfgmask-bench-")
    from vllm import LLM, SamplingParams
    from vllm.sampling_params import StructuredOutputsParams

    import cfgmask
    import cfgmask.vllm
    from benchmarks.bench_model_schemas import select_schemas
    from benchmarks.bench_schemas import jsonschema_verdict
    from cfgmask.cli import cache_dir, load_model

    print(f"[{backend}] cfgmask from {cfgmask.__file__}", file=sys.stderr)
    model = cache_dir() / "smollm2"
    if not (model / "cfgmask-source.json").is_file():
        load_model(None)
    llm = LLM(
        str(model),
        enforce_eager=True,
        dtype="float32",
        max_model_len=args.max_model_len,
        seed=0,
        disable_log_stats=True,
        enable_prefix_caching=False,  # every mode sends the same prompts: no mode may reuse another's
        structured_outputs_config={"backend": backend},
    )
    engine = llm.llm_engine
    tok = llm.get_tokenizer()
    schemas = select_schemas(args.requests + 1, seed=0)
    warm, schemas = schemas[-1], schemas[:-1]

    def params(mode: str, i: int, schema: Any, length: int | None) -> Any:
        p: dict[str, Any] = {"temperature": 0.7, "seed": 1000 + i, "max_tokens": args.max_tokens}
        if mode == "cfgmask":
            p["extra_args"] = {"json_schema": schema}
        elif mode in ("xgrammar", "guidance"):
            p["structured_outputs"] = StructuredOutputsParams(json=schema)
        elif mode.startswith("free@"):
            p["max_tokens"], p["ignore_eos"] = max(1, length or 1), True
        return SamplingParams(**p)

    def run(mode: str, batch: list[tuple[int, Any]], lengths: dict[int, int]) -> dict[str, Any]:
        for p in cfgmask.vllm.processors():
            p.stats.seconds.clear()
            p.stats.steps = p.stats.rows = 0
        n = len(batch)
        seen: dict[str, int] = {}
        first: dict[str, float] = {}
        last: dict[str, float] = {}
        done: dict[str, Any] = {}
        refused: dict[str, str] = {}
        full_tokens = 0
        full_s = 0.0
        t0 = time.perf_counter()
        for i, schema in batch:
            rid = f"{mode}-{i}"
            try:
                engine.add_request(rid, _prompt(tok, schema), params(mode, i, schema, lengths.get(i)))
            except Exception as e:  # noqa: BLE001 - an engine refusing a schema is a result
                refused[rid] = f"{type(e).__name__}: {str(e)[:160]}"
        while engine.has_unfinished_requests():
            s0 = time.perf_counter()
            outs = engine.step()
            s1 = time.perf_counter()
            decoded = 0
            for out in outs:
                rid = out.request_id
                k = len(out.outputs[0].token_ids) if out.outputs else 0
                if k and rid not in first:
                    first[rid] = s1 - t0
                elif k == seen.get(rid, 0) + 1 and seen.get(rid, 0) > 0:
                    decoded += 1
                seen[rid] = k
                if out.finished:
                    done[rid] = out
                    last[rid] = s1 - t0
            if decoded == n:  # every request made one decode token this step
                full_tokens += n
                full_s += s1 - s0
        wall = time.perf_counter() - t0
        res: dict[int, dict[str, Any]] = {}
        for i, schema in batch:
            rid = f"{mode}-{i}"
            if rid in refused:
                res[i] = {"refused": refused[rid]}
                continue
            c = done[rid].outputs[0]
            finished = c.finish_reason == "stop"
            res[i] = {
                "tokens": len(c.token_ids),
                "finish": c.finish_reason,
                "verdict": jsonschema_verdict(schema, c.text) if finished else "truncated",
                "ttft_s": first.get(rid),
                "tpot_s": (last[rid] - first[rid]) / (len(c.token_ids) - 1)
                if rid in first and len(c.token_ids) > 1
                else None,
                "text": c.text,
            }
        served = [r for r in res.values() if "refused" not in r]
        step_s = [s for p in cfgmask.vllm.processors() for s in p.stats.seconds]
        tokens = sum(r["tokens"] for r in served)
        return {
            "mode": mode,
            "requests": len(res),
            "refused": len(res) - len(served),
            "wall_s": wall,
            "tokens": tokens,
            "tok_per_s": tokens / wall,
            "full_steps": full_tokens // max(1, n),
            "full_tok_per_s": full_tokens / full_s if full_s else None,
            "ttft_p50_s": _percentile([r["ttft_s"] for r in served if r["ttft_s"] is not None], 0.5),
            "tpot_p50_ms": 1e3 * _percentile([r["tpot_s"] for r in served if r["tpot_s"] is not None], 0.5),
            "finished": sum(r["finish"] == "stop" for r in served),
            "valid": sum(r["verdict"] == "valid" for r in served),
            "proc_steps": len(step_s) if mode == "cfgmask" else 0,
            "proc_p50_ms": 1e3 * _percentile(step_s, 0.5) if mode == "cfgmask" and step_s else None,
            "proc_p99_ms": 1e3 * _percentile(step_s, 0.99) if mode == "cfgmask" and step_s else None,
            "results": res,
        }

    batch = [(i, s["schema"]) for i, s in enumerate(schemas)]
    run(ENGINES[backend][0], [(-1, warm["schema"])], {})
    constrained = ENGINES[backend]
    runs: list[dict[str, Any]] = []
    for rep in range(args.reps):
        k = rep % len(constrained)
        order = list(constrained[k:] + constrained[:k])
        order += [f"free@{m}" for m in constrained if m != "unconstrained"]
        lengths: dict[str, dict[int, int]] = {}
        for mode in order:
            src = lengths.get(mode[5:], {}) if mode.startswith("free@") else {}
            r = run(mode, batch, src)
            r["rep"] = rep
            lengths[mode] = {i: v["tokens"] for i, v in r["results"].items() if "tokens" in v}
            runs.append(r)
            print(
                f"[{backend}] rep {rep} {mode}: {r['tokens']} tok, {r['tok_per_s']:.1f} tok/s, "
                f"full {r['full_tok_per_s'] or 0:.1f} tok/s over {r['full_steps']} steps, "
                f"{r['valid']}/{r['finished']}/{r['requests']} valid/finished",
                file=sys.stderr,
                flush=True,
            )
    return {
        "backend": backend,
        "cfgmask_file": cfgmask.__file__,
        "schema_ids": [f"{s['split']}/{s['id']}" for s in schemas],
        "runs": runs,
    }


def summarize(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per mode: the median (and min, max) over repetitions of each measure."""
    modes: dict[str, list[dict[str, Any]]] = {}
    for r in runs:
        modes.setdefault(r["mode"], []).append(r)
    free_rate = {r["rep"]: r["tok_per_s"] for r in runs if r["mode"] == "unconstrained"}
    rate = {(r["mode"], r["rep"]): r["tok_per_s"] for r in runs}
    full = {(r["mode"], r["rep"]): r["full_tok_per_s"] for r in runs}
    rows = []
    for mode, rs in modes.items():

        def stat(vals: list[float | None]) -> tuple[float, float, float] | None:
            xs = [v for v in vals if v is not None]
            return (statistics.median(xs), min(xs), max(xs)) if xs else None

        row: dict[str, Any] = {"mode": mode, "reps": len(rs)}
        for key in ("tok_per_s", "full_tok_per_s", "ttft_p50_s", "tpot_p50_ms", "proc_p50_ms", "proc_p99_ms"):
            row[key] = stat([r[key] for r in rs])
        row["tokens"] = stat([r["tokens"] for r in rs])
        row["full_steps"] = stat([r["full_steps"] for r in rs])
        # ratios are formed within a repetition (same load), then summarized
        fb = [(r["tok_per_s"], free_rate.get(r["rep"])) for r in rs]
        row["x_free_batch"] = stat([a / b for a, b in fb if b])
        eq = [(r["tok_per_s"], rate.get((f"free@{mode}", r["rep"]))) for r in rs]
        row["x_equal"] = stat([a / b for a, b in eq if b])
        xf = [
            (full.get((mode, r["rep"])) or 0) / full[("xgrammar", r["rep"])]
            for r in rs
            if full.get(("xgrammar", r["rep"])) and full.get((mode, r["rep"]))
        ]
        row["x_xgr_full"] = stat(xf)  # type: ignore[arg-type]
        row["finished"] = [r["finished"] for r in rs]
        row["valid"] = [r["valid"] for r in rs]
        row["requests"] = rs[0]["requests"] - rs[0]["refused"]
        rows.append(row)
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    def f(v: tuple[float, float, float] | None, fmt: str, spread: bool = True) -> str:
        if v is None:
            return "-"
        return f"{v[0]:{fmt}} [{v[1]:{fmt}}-{v[2]:{fmt}}]" if spread else f"{v[0]:{fmt}}"

    head = (
        "| mode | tokens | tok/s | x free (batch) | x free@ (equal length) | full-batch tok/s "
        "| full x xgrammar | TTFT p50 s | TPOT p50 ms | proc p50 / p99 ms | valid / finished / N |"
    )
    lines = [head, "|" + "---|" * 11]
    for r in rows:
        valid = ",".join(f"{v}/{fi}" for v, fi in zip(r["valid"], r["finished"], strict=True))
        proc = "-" if r["proc_p50_ms"] is None else f"{r['proc_p50_ms'][0]:.2f} / {r['proc_p99_ms'][0]:.2f}"
        lines.append(
            f"| {r['mode']} | {f(r['tokens'], '.0f', False)} | {f(r['tok_per_s'], '.1f')} "
            f"| {f(r['x_free_batch'], '.2f')} | {f(r['x_equal'], '.3f')} | {f(r['full_tok_per_s'], '.1f')} "
            f"| {f(r['x_xgr_full'], '.3f')} | {f(r['ttft_p50_s'], '.2f', False)} "
            f"| {f(r['tpot_p50_ms'], '.1f')} | {proc} | {valid} /{r['requests']} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=16)
    ap.add_argument("--max-tokens", type=int, default=512)
    ap.add_argument("--max-model-len", type=int, default=2048)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--engines", default=",".join(ENGINES), help="structured-output backends to start")
    ap.add_argument("--quick", action="store_true", help="8 requests, 384 tokens")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.quick:
        args.requests, args.max_tokens = 8, 384
    if args.worker:
        Path(args.out).write_text(json.dumps(run_engine(args.worker, args), default=str))
        return 0
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    engines = []
    with tempfile.TemporaryDirectory() as tmp:
        for backend in args.engines.split(","):
            out = Path(tmp) / f"{backend}.json"
            cmd = [sys.executable, "-m", "benchmarks.bench_vllm", "--worker", backend, "--out", str(out)]
            cmd += ["--requests", str(args.requests), "--max-tokens", str(args.max_tokens)]
            cmd += ["--max-model-len", str(args.max_model_len), "--reps", str(args.reps)]
            tail: list[str] = []
            with subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) as proc:
                assert proc.stderr is not None
                for line in proc.stderr:  # progress lines as they come; the rest kept for errors
                    if line.startswith("["):
                        print(line, end="", file=sys.stderr, flush=True)
                    tail = (tail + [line])[-40:]
            if proc.returncode != 0 or not out.is_file():
                print(f"{backend}: failed ({proc.returncode})\n{''.join(tail)}", file=sys.stderr)
                continue
            engines.append(json.loads(out.read_text()))
    runs = [r for e in engines for r in e["runs"]]
    rows = summarize(runs)
    print(table(rows))
    from benchmarks.common import write_results

    path = write_results("vllm", {"args": vars(args), "engines": engines, "summary": rows})
    print(f"results: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
