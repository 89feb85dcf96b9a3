"""One point of ``bench_scaling`` in its own process: build the input and the engine, then, under a
timer that kills the process, compile cold and replay the document.  What is known so far is
written to the state file at each stage, so that a killed worker still reports its compile time
and how far it got."""

from __future__ import annotations

import gc
import json
import resource
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from .common import ENGINE_CLASSES, Engine, gbnf_for_llguidance, gbnf_for_xgrammar, single_thread
from .scaling_inputs import SWEEPS, Case, token_set

SAVE_EVERY_S = 1.0  # how often the replay writes its progress

# Compiled and replayed once before the caches are cleared and the clock starts, so that the
# point's compile does not pay for first imports and first-use set-up of the engine's code (60 ms
# of cfgmask's first JSON Schema compile is that) -- what a server has paid before its first
# request.  Nothing of it is kept: cfgmask.clear_caches() drops tables, automata and loop walks,
# xgrammar's compiler cache is off and cleared, llguidance keeps nothing between matchers.
# The schema has a pattern and a format so that the regex front end's first import (17 ms
# without bytecode) is not charged to the first schema with a pattern either.
WARM_UP = {
    "schema": (
        '{"type": "object", "properties": {"w": {"type": "array", "items": {"type": "integer"}, '
        '"maxItems": 2}, "s": {"type": "string", "maxLength": 3}, "e": {"enum": ["x", "y"]}, '
        '"b": {"type": "boolean"}, "f": {"type": "number"}, "o": {"type": "object", "properties": '
        '{"i": {"type": "integer"}}, "required": ["i"]}, "p": {"type": "string", "pattern": "^[a-z]+$"}, '
        '"d": {"type": "string", "format": "date"}}, "required": ["w"]}',
        '{"w": [1, 2], "s": "ab", "e": "x", "b": true, "f": 1.5, "o": {"i": 3}, "p": "ab", '
        '"d": "2024-01-31"}',
    ),
    "gbnf": ('root ::= "(" w " " w ")"\nw ::= [a-z]+ | [0-9]+\n', "(ab 12)"),
}


class State:
    def __init__(self, path: Path, rec: dict[str, Any]) -> None:
        self.path, self.rec, self.saved = path, rec, time.perf_counter()

    def save(self, **fields: Any) -> None:
        self.rec.update(fields)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.rec))
        tmp.replace(self.path)
        self.saved = time.perf_counter()


def work(job: dict[str, Any], path: Path) -> int:
    single_thread()
    sys.setrecursionlimit(100_000)  # the nesting sweep's schemas are ~2N dicts deep
    limit = int(job["mem_gb"] * 2**30)
    resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
    state = State(path, {})
    case = SWEEPS[job["sweep"]].make(job["point"])
    tokens = token_set(case.vocab)
    doc = tokens.encode(case.document)
    try:
        engine = ENGINE_CLASSES[job["engine"]](tokens)  # type: ignore[call-arg]
    except ImportError as ex:
        state.save(status="missing", reason=f"not installed ({ex})")
        return 0
    state.save(n=case.n, n_tokens=len(doc), version=engine.version, vocab_setup_s=round(engine.setup_s, 3))
    if engine.name == "cfgmask":
        state.save(cfgmask=_cfgmask_source())
    source = _prepare(engine, case)
    _warm_up(engine, case.kind, tokens.encode)

    signal.signal(signal.SIGALRM, signal.SIG_DFL)  # the timer ends the process, even inside C
    signal.setitimer(signal.ITIMER_REAL, job["timeout"])
    gc.collect()
    engine.clear_caches()
    rss0 = _status_kb("VmRSS")
    peak_reset = _reset_peak()
    peak0 = _status_kb("VmHWM")
    t0, c0 = time.perf_counter(), time.process_time()
    try:
        compiled = _compile(engine, case, source)
    except BaseException as ex:  # noqa: BLE001 - every failure is recorded with its reason
        if isinstance(ex, KeyboardInterrupt | SystemExit):
            raise
        state.save(
            status=_classify(engine.name, ex),
            reason=f"{type(ex).__name__}: {ex}"[:400],
            failed_after_s=time.perf_counter() - t0,
        )
        return 0
    state.save(compile_s=time.perf_counter() - t0, compile_cpu_s=time.process_time() - c0)
    try:
        _replay(engine, compiled, doc, (t0, c0), state)
    except BaseException as ex:  # noqa: BLE001
        if isinstance(ex, KeyboardInterrupt | SystemExit):
            raise
        state.rec.update(status=_classify(engine.name, ex), reason=f"{type(ex).__name__}: {ex}"[:400])
    signal.setitimer(signal.ITIMER_REAL, 0)
    peak = _status_kb("VmHWM")
    growth = peak - rss0 if peak_reset else peak - peak0
    state.save(
        rss_before_mb=rss0 / 1024,
        rss_after_mb=_status_kb("VmRSS") / 1024,
        rss_growth_mb=max(growth, 0) / 1024,
        rss_method="peak reset (clear_refs)" if peak_reset else "peak before/after",
    )
    return 0


def _warm_up(engine: Engine, kind: str, encode: Any) -> None:
    text, doc = WARM_UP[kind]
    case = Case("warm-up", 0, kind, text, doc)
    compiled = _compile(engine, case, _prepare(engine, case))
    m = compiled if engine.name == "llguidance" else engine.matcher(compiled)
    mask = engine.new_mask()
    for tok in encode(doc):
        engine.fill(m, mask)
        if not engine.accept(m, tok):
            raise RuntimeError(f"{engine.name} rejects the warm-up document {doc!r}")
    engine.fill(m, mask)


def _prepare(engine: Engine, case: Case) -> Any:
    """What the engine's compile takes, made before the clock starts."""
    if case.kind == "gbnf":
        if engine.name == "xgrammar":
            return gbnf_for_xgrammar(case.source)[0]
        if engine.name == "llguidance":
            return gbnf_for_llguidance(case.source)[0]
    return case.source


def _compile(engine: Engine, case: Case, source: str) -> Any:
    """Each engine's default options; schemas as JSON text."""
    if case.kind == "gbnf":
        return engine.compile(source)
    if engine.name == "cfgmask":
        import cfgmask

        return cfgmask.compile(cfgmask.Grammar.from_json_schema(source), engine.vocab)  # type: ignore[attr-defined]
    if engine.name == "xgrammar":
        return engine.compiler.compile_json_schema(source)  # type: ignore[attr-defined]
    import llguidance

    grammar = llguidance.LLMatcher.grammar_from_json_schema(source)
    m = llguidance.LLMatcher(engine.tokenizer, grammar, log_level=0)  # type: ignore[attr-defined]
    if m.is_error():
        raise ValueError(m.get_error())
    return m


def _replay(engine: Engine, compiled: Any, doc: list[int], start: tuple[float, float], state: State) -> None:
    """A mask before every token and after the last; every token accepted.  llguidance's compiled
    grammar is its matcher (no copy: the copy is not part of its cost)."""
    m = compiled if engine.name == "llguidance" else engine.matcher(compiled)
    mask = engine.new_mask()
    masks: list[int] = []
    clock = time.perf_counter_ns
    status, reason = "ok", None
    for i, tok in enumerate(doc):
        a = clock()
        engine.fill(m, mask)
        b = clock()
        masks.append(b - a)
        if not engine.accept(m, tok):
            status = "rejected"
            text = b"".join(engine.tokens.token_bytes[t] for t in doc[:i])[-60:]  # type: ignore[attr-defined]
            reason = f"token {i} of {len(doc)} ({engine.tokens.token_bytes[tok]!r}) rejected after {text!r}"  # type: ignore[attr-defined]
            break
        if i % 256 == 0 and time.perf_counter() - state.saved > SAVE_EVERY_S:
            state.save(steps=i)
    else:
        a = clock()
        engine.fill(m, mask)
        masks.append(clock() - a)
        if not engine.is_accepting(m):
            status, reason = "rejected", "every token accepted, but the matcher is not in an accepting state"
    end, end_cpu = time.perf_counter() - start[0], time.process_time() - start[1]
    us = [x / 1e3 for x in masks]
    state.rec.update(
        status=status,
        steps=len(masks),
        mask_p50_us=statistics.median(us),
        mask_max_us=max(us),
        mask_total_s=sum(masks) / 1e9,
    )
    if status == "ok":
        state.rec.update(end_s=end, end_cpu_s=end_cpu)
    else:
        state.rec.update(reason=reason, until_rejection_s=end)


def _classify(engine: str, ex: BaseException) -> str:
    if isinstance(ex, MemoryError):
        return "memory"
    if engine == "cfgmask":
        from cfgmask.errors import GrammarError, LimitError, MatcherError

        if isinstance(ex, GrammarError):
            return "refused"
        if isinstance(ex, LimitError | MatcherError):
            return "limit"
    return "error"


def _status_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def _reset_peak() -> bool:
    """Peak RSS back to the current RSS (Linux: ``5`` to clear_refs), so that the peak after the
    run is the run's own, not the vocabulary setup's."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def _cfgmask_source() -> str:
    """Where the worker's cfgmask comes from, with its checkout's commit."""
    import cfgmask

    where = Path(cfgmask.__file__).resolve().parent.parent
    try:
        head = subprocess.run(
            ["git", "-C", str(where), "describe", "--always", "--dirty=+dirty"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        head = "?"
    return f"{where} @ {head}"
