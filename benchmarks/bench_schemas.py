"""MaskBench-style JSON Schema and Lark benchmark: cfgmask beside xgrammar and llguidance.

Part 1, coverage (JSONSchemaBench, ``tests/corpora/jsonschemabench/*.jsonl``, 40 schemas a split):
for every schema and engine, compile it (caches cleared) in a worker process with a --timeout
budget (a compile past it is killed and counted as a timeout); for every schema that compiles,
feed each test instance, serialized by ``json.dumps`` with its default separators and compact
(``(",", ":")``), as Llama-3 BPE tokens to a fresh matcher and check that it is accepted whole
(every token accepted, then an accepting state).  Valid instances should be accepted, invalid
ones rejected.  cfgmask: ``Grammar.from_json_schema(strict=True)`` (a GrammarError is "not
covered"; any other exception is a bug) with its default whitespace; xgrammar:
``compile_json_schema(any_whitespace=True, strict_mode=False)`` (strict_mode=True would forbid
properties the schema does not name, which JSON Schema allows); llguidance:
``grammar_from_json_schema`` with its defaults (flexible whitespace).

Part 2, masks: three corpus schemas (Glaive function call, Github_medium with nested objects
and arrays, Snowplow), their valid instances serialized compactly, with every engine set to
compact JSON (cfgmask ``whitespace="compact"``, xgrammar ``any_whitespace=False,
separators=(",", ":")``, llguidance ``whitespace_flexible: false``) so that the languages match;
and ``grammars/sql.lark`` with SQL queries (llguidance reads Lark but not its lookaheads: see
``lark_for_llguidance``; xgrammar does not read Lark and gets ``grammars/sql.gbnf``, a related
but different grammar).  The replay is ``bench_gbnf``'s: cold compile, per-token mask times on a
fresh compile (cold) and again (warm), mask agreement with cfgmask at every step.

    python -m benchmarks.bench_schemas            # about 9 minutes on 2 busy cores
    python -m benchmarks.bench_schemas --quick    # smoke run, < 2 minutes
"""

from __future__ import annotations

import argparse
import gc
import json
import multiprocessing as mp
import os
import re
import sys
import tempfile
import time
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from . import bench_gbnf
from .bench_gbnf import Doc, Replay, bench_documents
from .common import (
    ENGINE_CLASSES,
    GRAMMARS_DIR,
    LLAMA3_STOPS,
    Engine,
    allowed_ids,
    environment,
    gbnf_for_xgrammar,
    lark_for_llguidance,
    llama3_token_bytes,
    load_engines,
    single_thread,
    tokenize,
    write_results,
)
from .documents import SQL_DOCUMENTS

CORPUS_DIR = Path(__file__).resolve().parent.parent / "tests" / "corpora" / "jsonschemabench"
SPLITS = ("Github_trivial", "Github_easy", "Github_medium", "Glaiveai2K", "Snowplow", "WashingtonPost")
ENGINES = ("cfgmask", "xgrammar", "llguidance")
SEPARATORS = {"default": None, "compact": (",", ":")}
MAX_LISTED = 12  # examples of each kind of finding kept per engine and split in the printout

# Part 2: the schemas whose masks are replayed: (split, id).  Picked for variety among those
# every engine compiles and whose valid instances every engine accepts: a Glaive function call
# (an array of objects), a Github_medium schema ($ref, oneOf, enum, format uri, pattern, nested
# objects and arrays) and a Snowplow one (length and item bounds, enum, objects in arrays).
MASK_SCHEMAS = {
    "glaive": ("Glaiveai2K", "Glaiveai2K/generate_invoice_9fce2002"),
    "gh_medium": ("Github_medium", "Github_medium/o60974"),
    "snowplow": ("Snowplow", "Snowplow/sp_13_Normalized"),
}

# SQL: benchmarks/documents.py's queries and two that use what sql.lark adds (CREATE TABLE,
# several statements, "--" comments).
SQL_EXTRA = [
    "CREATE TABLE IF NOT EXISTS users (id INT PRIMARY KEY, email VARCHAR(255) NOT NULL UNIQUE, "
    "team_id INT REFERENCES teams (id), created_at TIMESTAMP DEFAULT NULL);",
    "-- monthly totals\nSELECT customer_id, SUM(amount) AS total FROM payments GROUP BY customer_id;\n"
    "DELETE FROM payments WHERE amount = 0;",
]


# ---- compiling a schema / a Lark grammar in each engine ---------------------------------------


def clear_caches(e: Engine) -> None:
    e.clear_caches()


def compile_schema(e: Engine, schema: Any, whitespace: str = "flexible", warm: bool = False) -> Any:
    """``whitespace``: "flexible" (each engine's default for JSON with whitespace: the coverage
    run) or "compact" (no whitespace at all, every engine: the mask replay)."""
    if e.name == "cfgmask":
        import cfgmask

        g = cfgmask.Grammar.from_json_schema(
            schema, strict=True, whitespace="compact" if whitespace == "compact" else "default"
        )
        return cfgmask.compile(g, e.vocab, warm=warm)  # type: ignore[attr-defined]
    if e.name == "xgrammar":
        text = json.dumps(schema)
        if whitespace == "compact":
            return e.compiler.compile_json_schema(  # type: ignore[attr-defined]
                text, any_whitespace=False, separators=(",", ":"), strict_mode=False
            )
        return e.compiler.compile_json_schema(text, any_whitespace=True, strict_mode=False)  # type: ignore[attr-defined]
    if e.name == "llguidance":
        import llguidance

        defaults: Any = (
            {"whitespace_flexible": False, "item_separator": ",", "key_separator": ":"}
            if whitespace == "compact"
            else None
        )
        grammar = llguidance.LLMatcher.grammar_from_json_schema(schema, defaults=defaults)
        return _llg_matcher(e, grammar)
    raise ValueError(e.name)


def _llg_matcher(e: Engine, grammar: str) -> Any:
    import llguidance

    m = llguidance.LLMatcher(e.tokenizer, grammar, log_level=0)  # type: ignore[attr-defined]
    if m.is_error():
        raise RuntimeError(m.get_error())
    return m


class Bound(Engine):
    """An engine whose ``compile`` takes one case's source (a schema, a Lark or GBNF text),
    so that ``bench_gbnf``'s replay and comparison run on it unchanged."""

    def __init__(self, base: Engine, kind: str, source: Any, notes: list[str]) -> None:
        self.base, self.kind, self.source, self.notes = base, kind, source, notes
        self.name, self.version, self.setup_s = base.name, base.version, base.setup_s

    def adapt(self, _: Any) -> tuple[Any, list[str]]:
        return self.source, self.notes

    def compile(self, source: Any, warm: bool = False) -> Any:
        b = self.base
        if self.kind == "schema":
            return compile_schema(b, source, "compact", warm=warm)
        if self.kind == "lark":
            if b.name == "cfgmask":
                import cfgmask

                return cfgmask.compile(cfgmask.Grammar.from_lark(source, start="start"), b.vocab, warm=warm)  # type: ignore[attr-defined]
            if b.name == "llguidance":
                import llguidance

                return _llg_matcher(b, llguidance.grammar_from("lark", source))
            raise ValueError(f"{b.name} does not read Lark")
        if self.kind == "gbnf":
            return b.compile(source, warm=warm) if warm else b.compile(source)  # type: ignore[call-arg]
        raise ValueError(self.kind)

    def clear_caches(self) -> None:
        clear_caches(self.base)

    def matcher(self, compiled: Any) -> Any:
        return self.base.matcher(compiled)

    def new_mask(self) -> Any:
        return self.base.new_mask()

    def fill(self, m: Any, mask: Any) -> None:
        self.base.fill(m, mask)

    def accept(self, m: Any, token: int) -> bool:
        return self.base.accept(m, token)

    def is_accepting(self, m: Any) -> bool:
        return self.base.is_accepting(m)

    def mask_words(self, mask: Any) -> np.ndarray:
        return self.base.mask_words(mask)


# ---- part 1: coverage, one worker process per engine --------------------------------------------


def _classify(engine: str, ex: BaseException) -> str:
    if engine == "cfgmask":
        from cfgmask.errors import GrammarError, LimitError

        if isinstance(ex, GrammarError):
            return "unsupported"
        if isinstance(ex, LimitError):
            return "limit"
        return "bug"
    if not isinstance(ex, Exception):  # a Rust panic (pyo3 PanicException is a BaseException)
        return "crash"
    return "unsupported"


def _run_tokens(e: Engine, compiled: Any, tokens: Sequence[int]) -> int:
    """-1 if the whole token list is accepted and ends accepting; else the index of the first
    rejected token (len(tokens): all accepted but not in an accepting state)."""
    m = e.matcher(compiled)
    for i, t in enumerate(tokens):
        if not e.accept(m, t):
            return i
    return -1 if e.is_accepting(m) else len(tokens)


class _StderrLog:
    """The worker's fd 2 goes to a file, so that what a native library prints while compiling
    (xgrammar's "Warning: ... falling back to anyOf semantics") is kept with that schema."""

    def __init__(self) -> None:
        fd, path = tempfile.mkstemp(prefix="bench_schemas_stderr_")
        self.fd = os.open(path, os.O_RDWR | os.O_APPEND)
        os.close(fd)
        os.unlink(path)
        sys.stderr.flush()
        os.dup2(self.fd, 2)
        self.pos = 0

    def new_lines(self) -> list[str]:
        sys.stderr.flush()
        size = os.fstat(self.fd).st_size
        data = os.pread(self.fd, size - self.pos, self.pos)
        self.pos = size
        out = []
        for line in data.decode("utf-8", "replace").splitlines():
            line = re.sub(r"^\[[0-9:]+\] \S+: ", "", line.strip())  # "[21:28:16] file.cc:870: "
            if line and line not in out:
                out.append(line[:300])
        return out


def _worker(name: str, conn: Any) -> None:
    single_thread()
    log = _StderrLog()
    try:
        engine = ENGINE_CLASSES[name]()
    except ImportError as ex:
        conn.send(("missing", str(ex), 0.0))
        return
    log.new_lines()
    conn.send(("ready", engine.version, engine.setup_s))
    while True:
        job = conn.recv()
        if job is None:
            return
        schema, docs = job  # docs: [(text, tokens)]
        clear_caches(engine)
        gc.collect()
        t0 = time.perf_counter()
        try:
            compiled = compile_schema(engine, schema)
            status, err = "ok", None
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as ex:  # noqa: BLE001 - every failure is classified and reported
            status, err = _classify(name, ex), f"{type(ex).__name__}: {ex}"[:400]
        seconds = time.perf_counter() - t0
        warnings = log.new_lines()
        if status == "ok" and name == "llguidance":
            warnings += [str(w) for w in compiled.get_grammar_warnings()]
        conn.send(("compiled", status, seconds, err, warnings))
        if status != "ok":
            continue
        verdicts = []
        for text, tokens in docs:
            try:
                v: Any = _run_tokens(engine, compiled, tokens)
                if name == "cfgmask":  # the same text as raw bytes must get the same verdict
                    m = engine.matcher(compiled)
                    by_bytes = bool(m.accept_bytes(text.encode())) and bool(m.is_accepting())
                    if by_bytes != (v == -1):
                        v = [v, f"accept_bytes says {by_bytes}"]
            except (KeyboardInterrupt, SystemExit):
                raise
            except BaseException as ex:  # noqa: BLE001
                v = f"{type(ex).__name__}: {ex}"[:300]
            verdicts.append(v)
        conn.send(("checked", verdicts))


class Worker:
    """One engine in a child process (spawned: nothing inherited but the environment), so that a
    compile past its budget can be killed."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.restarts = -1
        self.version = "?"
        self._start()

    def _start(self) -> None:
        ctx = mp.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_worker, args=(self.name, child), daemon=True)
        self.proc.start()
        child.close()
        if not self.conn.poll(300):
            raise RuntimeError(f"{self.name} worker did not start")
        kind, self.version, self.setup_s = self.conn.recv()
        if kind == "missing":
            self.proc.join()
            raise ImportError(self.version)
        self.restarts += 1

    def _kill(self) -> None:
        self.proc.kill()
        self.proc.join()
        self.conn.close()

    def close(self) -> None:
        try:
            self.conn.send(None)
            self.proc.join(10)
        except OSError:
            pass
        if self.proc.is_alive():
            self._kill()

    def run(self, schema: Any, docs: list[tuple[str, list[int]]], timeout: float) -> dict[str, Any]:
        self.conn.send((schema, docs))
        msg = self._recv(timeout)
        if msg is None or msg == "died":
            self._kill()
            self._start()
            if msg is None:
                return {"status": "timeout", "compile_s": timeout}
            return {"status": "crash", "error": "worker died while compiling"}
        _, status, seconds, err, warnings = msg
        out: dict[str, Any] = {"status": status, "compile_s": seconds}
        if err:
            out["error"] = err
        if warnings:
            out["warnings"] = warnings
        if status == "ok":
            msg = self._recv(max(60.0, 0.05 * sum(len(t) for _, t in docs)))
            if msg is None or msg == "died":
                self._kill()
                self._start()
                out["status"] = "check_failed"
                out["error"] = "instance check timed out" if msg is None else "worker died checking instances"
            else:
                out["verdicts"] = msg[1]
        return out

    def _recv(self, timeout: float) -> Any:
        try:
            if not self.conn.poll(timeout):
                return None
            return self.conn.recv()
        except (EOFError, OSError):
            return "died"


def load_split(split: str) -> list[dict[str, Any]]:
    path = CORPUS_DIR / f"{split}.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").split("\n") if line.strip()]


def instances(record: dict[str, Any]) -> list[dict[str, Any]]:
    """Each test instance under each serialization."""
    out = []
    for k, test in enumerate(record["tests"]):
        for sep_name, sep in SEPARATORS.items():
            text = json.dumps(test["data"], separators=sep)
            out.append(
                {
                    "test": k,
                    "sep": sep_name,
                    "valid": bool(test["valid"]),
                    "text": text,
                    "tokens": tokenize(text),
                }
            )
    return out


def coverage(splits: Sequence[str], engine_names: Sequence[str], args: argparse.Namespace) -> dict[str, Any]:
    corpus = {s: load_split(s)[: args.limit] for s in splits}
    insts = {s: {r["id"]: instances(r) for r in rows} for s, rows in corpus.items()}
    raw: dict[str, dict[str, dict[str, Any]]] = {s: {} for s in splits}  # split -> id -> engine -> result
    versions = {}
    for name in engine_names:
        try:
            w = Worker(name)
        except ImportError as ex:
            _log(f"{name}: not installed ({ex})")
            continue
        versions[name] = w.version
        t0 = time.perf_counter()
        for s in splits:
            _log(f"coverage: {name} {s} ({len(corpus[s])} schemas)")
            for r in corpus[s]:
                docs = [(d["text"], d["tokens"]) for d in insts[s][r["id"]]]
                raw[s].setdefault(r["id"], {})[name] = w.run(r["schema"], docs, args.timeout)
        w.close()
        _log(f"coverage: {name} done in {time.perf_counter() - t0:.0f} s ({w.restarts} worker restarts)")
    summary = {s: summarize(s, corpus[s], insts[s], raw[s], list(versions)) for s in splits}
    return {"engines": versions, "summary": summary, "raw": raw}


def summarize(
    split: str,
    rows: list[dict[str, Any]],
    insts: dict[str, list[dict[str, Any]]],
    raw: dict[str, dict[str, Any]],
    engine_names: list[str],
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in engine_names:
        res: dict[str, Any] = {
            "schemas": len(rows),
            "compiled": 0,
            "warned": 0,
            "valid": [0, 0],
            "invalid": [0, 0],
            "correct": 0,
        }
        warned: dict[str, list[str]] = {}
        failures: dict[str, list[Any]] = {}
        times = []
        lists: dict[str, list[Any]] = {"valid_rejected": [], "invalid_accepted": [], "check_errors": []}
        for r in rows:
            x = raw[r["id"]].get(name)
            if x is None:
                continue
            if x["status"] != "ok":
                failures.setdefault(x["status"], []).append([r["id"], x.get("error", "")])
                continue
            res["compiled"] += 1
            times.append(x["compile_s"])
            if x.get("warnings"):
                res["warned"] += 1
                for w in x["warnings"]:
                    warned.setdefault(_warning_kind(w), []).append(r["id"])
            ok = True
            for d, v in zip(insts[r["id"]], x["verdicts"], strict=True):
                key = "valid" if d["valid"] else "invalid"
                res[key][1] += 1
                if isinstance(v, str):  # an exception while checking
                    lists["check_errors"].append([r["id"], d["test"], d["sep"], v])
                    ok = False
                    continue
                note = None
                if isinstance(v, list):  # cfgmask: tokens and bytes disagree
                    v, note = v
                accepted = v == -1
                res[key][0] += accepted
                if note:
                    lists["check_errors"].append([r["id"], d["test"], d["sep"], f"token verdict {v}, {note}"])
                if d["valid"] and not accepted:
                    ok = False
                    lists["valid_rejected"].append(
                        {
                            "id": r["id"],
                            "test": d["test"],
                            "sep": d["sep"],
                            "text": d["text"],
                            "where": _where(d, v),
                        }
                    )
                elif accepted and not d["valid"]:
                    ok = False
                    lists["invalid_accepted"].append(
                        {"id": r["id"], "test": d["test"], "sep": d["sep"], "text": d["text"]}
                    )
            res["correct"] += ok
        res["failures"] = failures
        res["warnings"] = warned
        res["compile_ms"] = _percentiles(times)
        res.update(lists)
        out[name] = res
    return out


def _warning_kind(w: str) -> str:
    """A warning without the parts that name one schema's places and values."""
    w = re.sub(r"\s+", " ", w)
    return re.sub(r"(['\"`]).*?\1", "…", w)[:160]


def _where(d: dict[str, Any], v: int) -> str:
    toks = llama3_token_bytes()
    if v >= len(d["tokens"]):
        return "not accepting at the end"
    before = b"".join(toks[t] for t in d["tokens"][:v]).decode("utf-8", "replace")
    return f"token {v} {toks[d['tokens'][v]]!r} after {before[-50:]!r}"


def _percentiles(seconds: list[float]) -> dict[str, Any]:
    if not seconds:
        return {"n": 0, "p50": None, "p90": None}
    a = np.asarray(seconds) * 1e3
    return {"n": len(seconds), "p50": float(np.percentile(a, 50)), "p90": float(np.percentile(a, 90))}


def jsonschema_verdict(schema: Any, text: str) -> str:
    """What the ``jsonschema`` package (formats asserted) says of an instance: the reference."""
    try:
        import jsonschema

        cls = jsonschema.validators.validator_for(schema)
        v = cls(schema, format_checker=cls.FORMAT_CHECKER)
        errs = list(v.iter_errors(json.loads(text)))
        return "valid" if not errs else f"invalid ({errs[0].message[:120]})"
    except Exception as ex:  # noqa: BLE001
        return f"cannot tell ({type(ex).__name__}: {str(ex)[:80]})"


def coverage_table(cov: dict[str, Any]) -> str:
    head = (
        f"{'split':<15}{'engine':<11}{'compiled':>9}{'warn':>5}{'unsup':>6}{'t/o':>4}{'other':>6}"
        f"{'valid acc':>13}{'invalid acc':>13}{'correct':>8}{'p50 ms':>9}{'p90 ms':>9}"
    )
    lines = [
        "coverage: schemas compiled within the budget; instances (each test, json.dumps default and compact)",
        "accepted whole; correct = compiled, every valid instance accepted and every invalid one rejected;",
        "warn = compiled with a warning (the engine relaxed something); compile time over the schemas",
        "the engine compiled",
        head,
        "-" * len(head),
    ]
    totals: dict[str, dict[str, Any]] = {}
    for s, per in cov["summary"].items():
        for e, r in per.items():
            t = totals.setdefault(
                e,
                {
                    "schemas": 0,
                    "compiled": 0,
                    "warned": 0,
                    "valid": [0, 0],
                    "invalid": [0, 0],
                    "correct": 0,
                    "f": {},
                    "times": [],
                },
            )
            t["schemas"] += r["schemas"]
            t["compiled"] += r["compiled"]
            t["warned"] += r["warned"]
            t["correct"] += r["correct"]
            for k in ("valid", "invalid"):
                t[k][0] += r[k][0]
                t[k][1] += r[k][1]
            for k, v in r["failures"].items():
                t["f"][k] = t["f"].get(k, 0) + len(v)
            t["times"] += [
                x[e]["compile_s"] for x in cov["raw"][s].values() if x.get(e, {}).get("status") == "ok"
            ]
            f = {k: len(v) for k, v in r["failures"].items()}
            lines.append(
                _cov_row(
                    s,
                    e,
                    r["schemas"],
                    r["compiled"],
                    r["warned"],
                    f,
                    r["valid"],
                    r["invalid"],
                    r["correct"],
                    r["compile_ms"],
                )
            )
    for e, t in totals.items():
        ms = _percentiles(t["times"])
        lines.append(
            _cov_row(
                "all",
                e,
                t["schemas"],
                t["compiled"],
                t["warned"],
                t["f"],
                t["valid"],
                t["invalid"],
                t["correct"],
                ms,
            )
        )
    lines += ["", "cfgmask / peer compile time, over the schemas both compiled (< 1: cfgmask faster)"]
    lines.append(f"{'split':<15}{'peer':<11}{'schemas':>8}{'p50':>8}{'p90':>8}")
    peers = [e for e in cov["engines"] if e != "cfgmask"]
    if "cfgmask" in cov["engines"]:
        for s in [*cov["summary"], "all"]:
            for p in peers:
                a, b = [], []
                for split, per_id in cov["raw"].items():
                    if s not in ("all", split):
                        continue
                    for x in per_id.values():
                        if x.get("cfgmask", {}).get("status") == "ok" and x.get(p, {}).get("status") == "ok":
                            a.append(x["cfgmask"]["compile_s"])
                            b.append(x[p]["compile_s"])
                if a:
                    pa: Any = _percentiles(a)
                    pb: Any = _percentiles(b)
                    lines.append(
                        f"{s:<15}{p:<11}{len(a):>8}{bench_gbnf._ratio(pa['p50'] / pb['p50'])[1:]:>8}"
                        f"{bench_gbnf._ratio(pa['p90'] / pb['p90'])[1:]:>8}"
                    )
    return "\n".join(lines)


def _cov_row(s, e, n, compiled, warned, failures, valid, invalid, correct, ms) -> str:  # noqa: ANN001
    other = sum(v for k, v in failures.items() if k not in ("unsupported", "timeout"))
    return (
        f"{s:<15}{e:<11}{f'{compiled}/{n}':>9}{warned:>5}"
        f"{failures.get('unsupported', 0):>6}{failures.get('timeout', 0):>4}{other:>6}"
        f"{f'{valid[0]}/{valid[1]}':>13}{f'{invalid[0]}/{invalid[1]}':>13}{correct:>8}"
        f"{bench_gbnf.fmt(ms['p50'], 9)}{bench_gbnf.fmt(ms['p90'], 9)}"
    )


def coverage_findings(cov: dict[str, Any], schemas: dict[str, Any]) -> str:
    """Every cfgmask problem in full; for the peers the counts and a few examples."""
    lines: list[str] = []
    for s, per in cov["summary"].items():
        for e, r in per.items():
            full = e == "cfgmask"
            cap = None if full else 3
            for kind, items in r["failures"].items():
                if kind != "timeout" and not full:
                    lines.append(
                        f"{s}: {e} {kind}: {len(items)}, e.g. "
                        + "; ".join(f"{sid}: {err[:100]}" for sid, err in items[:2])
                    )
                    continue
                for sid, err in items[:cap]:
                    lines.append(f"{s}: {e} {kind}: {sid}: {(err or 'over the --timeout budget')[:200]}")
            for w, ids in r["warnings"].items():
                more = ", …" if len(ids) > 2 else ""
                lines.append(f"{s}: {e} warns on {len(ids)} schemas: {w} ({', '.join(ids[:2])}{more})")
            for kind in ("invalid_accepted", "valid_rejected"):
                items = r[kind]
                if not items:
                    continue
                lines.append(f"{s}: {e} {kind.replace('_', ' ')}: {len(items)}")
                for x in items[: (MAX_LISTED if full else 3)]:
                    ref = jsonschema_verdict(schemas[x["id"]], x["text"]) if full else ""
                    where = f" at {x['where']}" if "where" in x else ""
                    lines.append(
                        f"    {x['id']} test {x['test']} ({x['sep']}){where}: {x['text'][:160]}"
                        + (f"  [jsonschema: {ref}]" if ref else "")
                    )
            for x in r["check_errors"][: None if full else 3]:
                lines.append(f"{s}: {e} check error: {x}")
    return "\n".join(lines)


# ---- part 2: mask replay --------------------------------------------------------------------


def replay_keep(
    engine: Engine, compiled: Any, docs: Sequence[Doc], stride: int = 1, offset: int = 0, keep: bool = False
) -> dict[int, Replay]:
    """``bench_gbnf.replay`` that, with ``keep``, stores a copy of each mask (after the clock
    stops) instead of a digest, so that disagreements can be split by direction."""
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
                if step % stride == offset:
                    t0 = clock()
                    fill()
                    r.fill_ns.append(clock() - t0)
                    if keep:
                        r.digests[i] = words.copy()  # type: ignore[assignment]
                step += 1
                if i == len(d.tokens):
                    break
                t0 = clock()
                ok = accept(d.tokens[i])
                r.accept_ns.append(clock() - t0)
                if not ok:
                    break
    finally:
        gc.enable()
    return out


def compare_masks(
    ref: str, peer: str, docs: Sequence[Doc], ref_pass: dict[int, Replay], peer_pass: dict[int, Replay]
) -> dict[str, Any]:
    """At every step both engines masked: equal, or which one allows tokens the other does not.
    Examples: the first step of each document where each direction happens (up to MAX_EXAMPLES)."""
    toks = llama3_token_bytes()
    n = {"compared": 0, "equal": 0, f"only_{ref}": 0, f"only_{peer}": 0}
    examples: dict[str, list[dict[str, Any]]] = {f"only_{ref}": [], f"only_{peer}": []}
    for d in docs:
        a, b = ref_pass.get(d.index), peer_pass.get(d.index)
        if a is None or b is None:
            continue
        seen: set[str] = set()
        for step, wb in b.digests.items():
            wa = a.digests.get(step)
            if wa is None:
                continue
            n["compared"] += 1
            if np.array_equal(wa, wb):  # type: ignore[arg-type]
                n["equal"] += 1
                continue
            ia, ib = allowed_ids(wa), allowed_ids(wb)  # type: ignore[arg-type]
            oa, ob = np.setdiff1d(ia, ib), np.setdiff1d(ib, ia)
            for key, only in ((f"only_{ref}", oa), (f"only_{peer}", ob)):
                if not only.size:
                    continue
                n[key] += 1
                if key not in seen and len(examples[key]) < bench_gbnf.MAX_EXAMPLES:
                    seen.add(key)
                    examples[key].append(
                        {
                            "doc": d.index,
                            "step": step,
                            "prefix": bench_gbnf._prefix(d.tokens, step, 70),
                            "next_token": repr(toks[d.tokens[step]]) if step < len(d.tokens) else "<end>",
                            f"{ref}_allowed": int(ia.size),
                            f"{peer}_allowed": int(ib.size),
                            "n_only": int(only.size),
                            "only": [repr(toks[t]) for t in only[:8]],
                        }
                    )
    return {"steps": n, "examples": examples}


def bench_case(
    name: str,
    sources: dict[str, tuple[str, Any, list[str]]],
    texts: list[str],
    base: Sequence[Engine],
    args: argparse.Namespace,
) -> dict[str, Any]:
    """``bench_gbnf.bench_documents`` for one case: ``sources`` maps an engine to (kind, source,
    notes); an engine without a source is skipped.  Masks of the first pass are kept whole, so
    that disagreements are split by direction."""
    engines = [Bound(e, *sources[e.name]) for e in base if e.name in sources]
    docs = [Doc(i, s, tokenize(s)) for i, s in enumerate(texts)]

    def first_pass(
        e: Engine, cg: Any, ds: Sequence[Doc], stride: int, offset: int, first: bool
    ) -> dict[int, Replay]:
        return replay_keep(e, cg, ds, stride, offset, keep=first)

    def agree(
        ref: Engine,
        peer: Engine,
        _: dict[str, Any],
        ds: Sequence[Doc],
        a: dict[int, Replay],
        b: dict[int, Replay],
    ) -> dict[str, Any]:
        return compare_masks(ref.name, peer.name, ds, a, b)

    result = bench_documents(name, None, engines, docs, args, first_pass, agree)
    for e in engines:
        result["engines"][e.name]["source"] = e.kind
    return result


def masks(base: Sequence[Engine], args: argparse.Namespace) -> dict[str, Any]:
    results: dict[str, Any] = {}
    cases = list(MASK_SCHEMAS.items())[: 1 if args.quick else None]
    wanted = set(args.cases.split(",")) if args.cases else None
    for case, (split, sid) in cases:
        if wanted is not None and case not in wanted:
            continue
        rec = next(r for r in load_split(split) if r["id"] == sid)
        texts = [json.dumps(t["data"], separators=(",", ":")) for t in rec["tests"] if t["valid"]]
        if args.quick:
            texts = texts[:1]
        _log(f"masks: {case} = {sid} ({len(texts)} documents)")
        sources: dict[str, tuple[str, Any, list[str]]] = {e.name: ("schema", rec["schema"], []) for e in base}
        results[case] = bench_case(case, sources, texts, base, args)
        results[case]["schema_id"] = sid
    if wanted is not None and "sql" not in wanted:
        return results
    lark = (GRAMMARS_DIR / "sql.lark").read_text()
    gbnf = (GRAMMARS_DIR / "sql.gbnf").read_text()
    texts = list(SQL_DOCUMENTS) + SQL_EXTRA
    if args.quick:
        texts = [SQL_DOCUMENTS[6]]  # DELETE: its cold masks take seconds, not a minute (see README)
    _log(f"masks: sql ({len(texts)} documents)")
    xg_text, xg_notes = gbnf_for_xgrammar(gbnf)
    sources = {
        "cfgmask": ("lark", lark, []),
        "llguidance": ("lark", *lark_for_llguidance(lark)),
        "xgrammar": (
            "gbnf",
            xg_text,
            ["grammars/sql.gbnf (xgrammar reads no Lark): a different grammar", *xg_notes],
        ),
    }
    # cfgmask's cold masks on sql.lark build their cache entries as they go (up to 0.2 s a mask):
    # fewer cold passes than the schemas get
    sql_args = argparse.Namespace(**{**vars(args), "reps": min(args.reps, args.sql_reps)})
    results["sql"] = bench_case("sql", sources, texts, base, sql_args)
    return results


def check_sql_documents() -> list[str]:
    """Every SQL document must parse with Lark's own Earley parser (the reference for sql.lark)."""
    problems = []
    try:
        import lark
    except ImportError:
        return ["lark is not installed: the SQL documents were not checked against Lark"]
    parser = lark.Lark((GRAMMARS_DIR / "sql.lark").read_text(), parser="earley", lexer="dynamic")
    for i, q in enumerate(list(SQL_DOCUMENTS) + SQL_EXTRA):
        try:
            parser.parse(q)
        except lark.exceptions.LarkError as ex:
            problems.append(f"sql doc {i} does not parse with Lark: {str(ex)[:120]}")
    return problems


def mask_table(results: dict[str, Any]) -> str:
    """``bench_gbnf.table`` with room for the seconds-long masks of cfgmask on sql.lark."""
    return bench_gbnf.table(results, label="case", lw=10, w=11)


def mask_findings(res: dict[str, Any]) -> str:
    lines = []
    for case, r in res.items():
        if r.get("dropped"):
            lines.append(f"{case}: cfgmask rejects documents {r['dropped']} (dropped)")
        for e, info in r["engines"].items():
            if info.get("error"):
                lines.append(f"{case}: {e} cannot compile: {info['error'][:200]}")
            for i, why in info.get("rejected", {}).items():
                lines.append(f"{case}: {e} rejects doc {i}: {why}")
            if info.get("rewrites"):
                lines.append(f"{case}: {e} got: {'; '.join(info['rewrites'])}")
        for peer, a in r["agreement"].items():
            n = a["steps"]
            lines.append(
                f"{case}: masks cfgmask vs {peer}: {n['compared'] - n['equal']} of {n['compared']} steps "
                "differ; "
                f"cfgmask allows tokens {peer} forbids at {n['only_cfgmask']}, {peer} allows tokens cfgmask "
                f"forbids at {n['only_' + peer]}"
            )
            for key, exs in a["examples"].items():
                for x in exs[:3]:
                    lines.append(
                        f"    {key}: doc {x['doc']} step {x['step']} after {x['prefix']!r} "
                        f"(next {x['next_token']}): {x['n_only']} tokens, e.g. {', '.join(x['only'][:5])}"
                    )
    return "\n".join(lines)


# ---- main --------------------------------------------------------------------------------------


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="smoke run: 3 schemas a split, one mask case + SQL")
    p.add_argument("--splits", default=",".join(SPLITS))
    p.add_argument("--engines", default=",".join(ENGINES), help="the first one is the reference")
    p.add_argument("--limit", type=int, default=None, help="schemas a split (default: all)")
    p.add_argument("--timeout", type=float, default=10.0, help="seconds one schema compile may take")
    p.add_argument("--reps", type=int, default=2, help="cold mask passes, each on a fresh compile")
    p.add_argument("--sql-reps", type=int, default=1, help="cold mask passes for SQL (cfgmask's are slow)")
    p.add_argument(
        "--budget", type=float, default=6.0, help="seconds of masking one pass may take (xgrammar)"
    )
    p.add_argument(
        "--cases",
        default="",
        help=f"mask cases to run, comma-separated, of {', '.join([*MASK_SCHEMAS, 'sql'])} (default: all)",
    )
    p.add_argument("--no-coverage", dest="coverage", action="store_false")
    p.add_argument("--no-masks", dest="masks", action="store_false")
    p.add_argument("--no-warm-compile", dest="warm_compile", action="store_false")
    p.add_argument("--out", default="bench_schemas")
    args = p.parse_args(argv)
    if args.quick:
        args.limit = args.limit or 3
        args.reps, args.budget, args.warm_compile = 1, 1.5, False
        args.out += "_quick"
    single_thread()
    t0 = time.perf_counter()
    engine_names = args.engines.split(",")
    unknown = [n for n in engine_names if n not in ENGINE_CLASSES]
    if unknown:
        p.error(f"unknown engines {unknown}; known: {', '.join(ENGINE_CLASSES)}")
    payload: dict[str, Any] = {}
    out_text: list[str] = []
    if args.coverage:
        splits = args.splits.split(",")
        cov = coverage(splits, engine_names, args)
        schemas = {r["id"]: r["schema"] for s in splits for r in load_split(s)}
        out_text += [coverage_table(cov), "", coverage_findings(cov, schemas), ""]
        payload["coverage"] = {k: v for k, v in cov.items()}
        print("\n".join(out_text), flush=True)
    if args.masks:
        engines, missing = load_engines(engine_names)
        for name, why in missing.items():
            _log(f"{name}: {why}")
        sql_problems = check_sql_documents()
        for x in sql_problems:
            _log(x)
        res = masks(engines, args)
        text = mask_table(res)
        fnd = mask_findings(res)
        print(text + "\n\n" + fnd)
        for r in res.values():
            for info in r["engines"].values():
                info.pop("_per_doc_cold", None)
        payload["masks"] = res
        payload["sql_lark_check"] = sql_problems or "every SQL document parses with lark (earley, dynamic)"
    env = environment(engines if args.masks else [])
    if args.coverage:
        env["coverage_engines"] = payload["coverage"]["engines"]
    env["args"] = vars(args)
    env["wall_s"] = round(time.perf_counter() - t0, 1)
    env["stop_tokens"] = list(LLAMA3_STOPS)
    path = write_results(args.out, {"environment": env, **payload})
    print(f"\nwrote {path} ({env['wall_s']} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
