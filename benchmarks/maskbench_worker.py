"""One engine of ``bench_maskbench`` in its own process: for each schema the parent sends, clear the
engine's caches, compile the schema cold, replay its valid instances (a mask before every token and
after the last, every token accepted) and, untimed, check its invalid instances and, for cfgmask,
what the whole language (``canonical=False``) says of a valid instance the canonical form rejected.

The worker answers each schema with messages ``(stage, fields)``: ``compiled``, ``measured``,
``checked``, then ``("end", None)``; the parent keeps what came before a timeout, kills the
worker and starts a new one.
"""

from __future__ import annotations

import gc
import resource
import time
from collections.abc import Callable, Sequence
from typing import Any

from .bench_schemas import _StderrLog
from .common import ENGINE_CLASSES, Engine, single_thread
from .scaling_worker import WARM_UP

Send = Callable[[str, Any], None]
CLOCK = time.perf_counter_ns


class Runtime:
    """An engine with JSON Schema text as its input, each with its default options: cfgmask
    ``Grammar.from_json_schema(text)`` (canonical, strict) + ``compile``; xgrammar
    ``compile_json_schema(text)`` (flexible whitespace, ``strict_mode=True``); llguidance
    ``grammar_from_json_schema(text)`` + ``LLMatcher``."""

    def __init__(self, name: str, keep: str = "none") -> None:
        self.name = name
        self.keep = keep  # cfgmask: "none", "vocab-walks" or "steady" (see ``clear``)
        self.engine: Engine = ENGINE_CLASSES[name]()
        self.mask = self.engine.new_mask()  # one buffer, reused, as a server would

    def clear(self) -> None:
        """A cold start.  cfgmask: tables, automaton fragments and (unless ``keep`` is
        ``"vocab-walks"``) the loop walks its vocabulary keeps; with ``"steady"`` only the tables of
        whole grammars go (a server that has compiled the earlier schemas: their shared rules'
        automata and walks stay, but no schema finds its own tables); xgrammar: its compiler cache
        (also off)."""
        if self.name == "cfgmask" and self.keep != "none":
            from cfgmask.compile import compiled as cc

            with cc._TABLE_LOCK:
                cc._TABLE_CACHE.clear()
            if self.keep == "vocab-walks":
                cc.CACHE.clear()
        else:
            self.engine.clear_caches()

    def compile(self, text: str, canonical: bool = True, strict: bool = True) -> Any:
        e = self.engine
        if self.name == "cfgmask":
            import cfgmask

            g = cfgmask.Grammar.from_json_schema(text, canonical=canonical, strict=strict)
            return cfgmask.compile(g, e.vocab)  # type: ignore[attr-defined]
        if self.name == "xgrammar":
            return e.compiler.compile_json_schema(text)  # type: ignore[attr-defined]
        import llguidance

        grammar = llguidance.LLMatcher.grammar_from_json_schema(text)
        m = llguidance.LLMatcher(e.tokenizer, grammar, log_level=0)  # type: ignore[attr-defined]
        if m.is_error():
            raise ValueError(m.get_error())
        return m

    def spare(self, compiled: Any) -> Any:
        """What later matchers are made from.  llguidance's compiled grammar is a ready matcher,
        used as is for the first instance; later ones are copies of an untouched copy."""
        return compiled.deep_copy() if self.name == "llguidance" else compiled

    def first_matcher(self, compiled: Any) -> Any:
        return compiled if self.name == "llguidance" else self.engine.matcher(compiled)

    def classify(self, ex: BaseException) -> str:
        if isinstance(ex, MemoryError):
            return "memory"
        if self.name == "cfgmask":
            from cfgmask.errors import GrammarError, LimitError

            if isinstance(ex, GrammarError):
                return "refused"
            if isinstance(ex, LimitError):
                return "limit"
            return "error"
        if not isinstance(ex, Exception):  # a Rust panic (pyo3's PanicException)
            return "crash"
        return "refused"


def replay(rt: Runtime, m: Any, tokens: Sequence[int]) -> dict[str, Any]:
    """Masks and accepts along one instance; ``span_ns`` runs from before the matcher was made
    (the caller's ``t0``) to after the last mask."""
    e, mask = rt.engine, rt.mask
    masks: list[int] = []
    accepts: list[int] = []
    status, at = "ok", None
    try:
        for i, t in enumerate(tokens):
            a = CLOCK()
            e.fill(m, mask)
            b = CLOCK()
            ok = e.accept(m, t)
            c = CLOCK()
            masks.append(b - a)
            accepts.append(c - b)
            if not ok:
                status, at = "rejected", i
                break
        else:
            a = CLOCK()
            e.fill(m, mask)
            masks.append(CLOCK() - a)
            if not e.is_accepting(m):
                status, at = "not_accepting", len(tokens)
    except Exception as ex:  # noqa: BLE001 - recorded, the run goes on
        status, at = f"error: {type(ex).__name__}: {ex}"[:300], len(masks)
    return {"status": status, "at": at, "masks": masks, "accepts": accepts}


def accepts_whole(rt: Runtime, m: Any, tokens: Sequence[int]) -> bool:
    e = rt.engine
    try:
        return all(e.accept(m, t) for t in tokens) and e.is_accepting(m)
    except Exception:  # noqa: BLE001 - an exception is not an acceptance
        return False


def measure(rt: Runtime, job: dict[str, Any], send: Send) -> None:
    """One schema: compile, replay every valid instance, then the untimed checks."""
    rt.clear()
    gc.collect()
    t0 = CLOCK()
    try:
        compiled = rt.compile(job["text"])
    except BaseException as ex:  # noqa: BLE001 - every failure is classified and reported
        if isinstance(ex, KeyboardInterrupt | SystemExit):
            raise
        failed = (CLOCK() - t0) / 1e9
        send(
            "compiled",
            {"status": rt.classify(ex), "error": f"{type(ex).__name__}: {ex}"[:400], "failed_s": failed},
        )
        return
    compile_ns = CLOCK() - t0
    send("compiled", {"status": "ok", "compile_s": compile_ns / 1e9})

    spare = rt.spare(compiled)
    runs = []
    for k, tokens in enumerate(job["valid"]):
        t1 = CLOCK()
        m = rt.first_matcher(compiled) if k == 0 else rt.engine.matcher(spare)
        made = CLOCK() - t1
        r = replay(rt, m, tokens)
        r["span_ns"] = CLOCK() - t1
        r["matcher_ns"] = made
        runs.append(r)
    out: dict[str, Any] = {"runs": runs}
    if runs and runs[0]["status"] == "ok":
        out["ttfd_s"] = (compile_ns + runs[0]["span_ns"]) / 1e9
    if runs and runs[0]["masks"]:
        out["ttfm_s"] = (compile_ns + runs[0]["matcher_ns"] + runs[0]["masks"][0]) / 1e9
    send("measured", out)

    checked: dict[str, Any] = {
        "invalid_accepted": [
            k for k, toks in enumerate(job["invalid"]) if accepts_whole(rt, rt.engine.matcher(spare), toks)
        ]
    }
    rejected = [k for k, r in enumerate(runs) if r["status"] != "ok"]
    if rt.name == "cfgmask" and rejected:
        checked["full_language"] = full_language(rt, job, rejected)
    send("checked", checked)


def full_language(rt: Runtime, job: dict[str, Any], rejected: list[int]) -> dict[str, Any]:
    """Does ``canonical=False`` (every key order, every JSON spelling) accept the valid instances
    the canonical form rejected?  ``strict=True`` first; a schema it refuses there (a keyword
    narrowed, which strict mode does not allow in the whole language) again with ``strict=False``."""
    out: dict[str, Any] = {"strict": True}
    try:
        try:
            full = rt.compile(job["text"], canonical=False)
        except Exception as ex:  # noqa: BLE001
            out.update(strict=False, strict_refused=f"{type(ex).__name__}: {ex}"[:200])
            full = rt.compile(job["text"], canonical=False, strict=False)
    except Exception as ex:  # noqa: BLE001
        out["error"] = f"{type(ex).__name__}: {ex}"[:300]
        return out
    out["accepted"] = [k for k in rejected if accepts_whole(rt, rt.engine.matcher(full), job["valid"][k])]
    return out


def warm_up(rt: Runtime) -> None:
    """First imports and first-use set-up are not charged to the first schema (a server has paid
    them before its first request); nothing of it is kept (``clear`` comes before each schema)."""
    from .common import tokenize

    schema, doc = WARM_UP["schema"]
    compiled = rt.compile(schema)
    r = replay(rt, rt.first_matcher(compiled), tokenize(doc))
    if r["status"] != "ok":
        raise RuntimeError(f"{rt.name} rejects the warm-up document: {r['status']}")


def serve(name: str, keep: str, mem_gb: float, conn: Any) -> None:
    """The worker's loop: a job per schema until ``None``."""
    single_thread()
    limit = int(mem_gb * 2**30)
    resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
    log = _StderrLog()  # what a native library prints goes with its schema, not to the progress
    try:
        rt = Runtime(name, keep)
    except ImportError as ex:
        conn.send(("missing", str(ex)))
        return
    warm_up(rt)
    log.new_lines()
    conn.send(("ready", {"version": rt.engine.version, "setup_s": rt.engine.setup_s}))
    while True:
        job = conn.recv()
        if job is None:
            return

        def send(stage: str, fields: Any) -> None:
            conn.send((stage, fields))

        measure(rt, job, send)
        lines = log.new_lines()
        if lines:
            send("log", {"stderr": lines[:5]})
        send("end", None)
