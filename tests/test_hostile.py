# ruff: noqa: E501  (the cases are code strings, kept one statement a line)
"""Hostile inputs: every one ends in a result or a typed error within its budget.

Each case runs in its own interpreter, so a crash, a hang or runaway memory is
seen as such (signal, timeout, peak RSS) instead of taking the test run down.
Allowed endings: a result, a ``CfgmaskError`` (``GrammarError``, ``LimitError``,
``VocabularyError``, ...), or a documented ``ValueError``.  The table of
outcome, time and peak memory per case is printed (``pytest -s``) and written to
``<tmp>/hostile.json``.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

DEADLINE_MS = 3000  # CompileLimits.deadline_ms used by the cases
MAX_RSS_MB = 2048  # "no runaway memory": peak RSS of one case
ADDRESS_SPACE = 6 << 30  # RLIMIT_AS of a case: runaway memory fails fast instead of swapping
ROOT = Path(__file__).resolve().parent.parent
# Under tests/sanitize.sh the runtime is preloaded: its shadow memory needs a huge address
# space, and the instrumented C core runs a few times slower.
SANITIZED = "san.so" in os.environ.get("LD_PRELOAD", "")
SLOWDOWN = 4 if SANITIZED else 1

PRELUDE = f"""
import functools, json, random, sys
import cfgmask
from cfgmask import CompileLimits, ir
LIM = CompileLimits(deadline_ms={DEADLINE_MS})
BYTES = cfgmask.Vocabulary.from_token_bytes([bytes([i]) for i in range(256)])

def walk(grammar, vocab=BYTES, text=b"", steps=3):
    '''Compile, then along `text` (fed byte by byte) fill a few masks.'''
    c = cfgmask.compile(grammar, vocab, limits=LIM)
    m = cfgmask.Matcher(c)
    mask = cfgmask.allocate_bitmask(1, vocab.size)
    allowed = []
    for i in range(steps):
        m.fill_bitmask(mask)
        allowed.append(len(m.allowed_tokens()))
        chunk = text[i * len(text) // steps:(i + 1) * len(text) // steps]
        if chunk and not m.accept_bytes(chunk):
            raise AssertionError(f"rejected {{chunk!r}}")
    return f"{{c.stats['states']}} states; allowed {{allowed}}; accepting={{m.is_accepting()}}"

def gbnf(text):
    return cfgmask.Grammar.from_gbnf(text, limits=LIM)

def schema(s, **kw):
    return cfgmask.Grammar.from_json_schema(s, limits=LIM, **kw)

def nest(depth, wrap, inner):
    return functools.reduce(lambda e, _: wrap(e), range(depth), inner)
"""

# name -> (code whose last expression statement `RESULT = ...` is the outcome, budget seconds)
CASES: dict[str, tuple[str, float]] = {
    "gbnf: parentheses 10,000 deep": (
        """RESULT = walk(gbnf("root ::= " + "(" * 10_000 + '"a"' + ")" * 10_000))""",
        10,
    ),
    "regex: groups 10,000 deep": (
        """RESULT = walk(cfgmask.Grammar.from_regex("(" * 10_000 + "a" + ")" * 10_000, limits=LIM))""",
        10,
    ),
    "lark: parentheses 10,000 deep": (
        """RESULT = walk(cfgmask.Grammar.from_lark("start: " + "(" * 10_000 + '"a"' + ")" * 10_000, limits=LIM))""",
        10,
    ),
    "IR: expressions 10,000 deep": (
        """RESULT = walk(ir.Grammar({"root": nest(10_000, lambda e: ir.Seq((e, ir.Literal(b"a"))), ir.Literal(b"a"))}, "root"))""",
        10,
    ),
    "JSON Schema: objects 10,000 deep": (
        """RESULT = walk(schema(nest(10_000, lambda s: {"type": "object", "properties": {"a": s}, "required": ["a"]}, {"type": "integer"})))""",
        10,
    ),
    'gbnf: root ::= "a"{1,1000000}': (
        """RESULT = walk(gbnf('root ::= "a"{1,1000000}'), text=b"a" * 5000)""",
        15,
    ),
    'gbnf: x ::= x x | "a" (ambiguous), 300 bytes': (
        """RESULT = walk(gbnf('root ::= x\\nx ::= x x | "a"'), text=b"a" * 300, steps=30)""",
        20,
    ),
    "gbnf: one rule of 10,000 alternatives": (
        """rng = random.Random(0)
words = sorted({"".join(rng.choice("abcdefghij") for _ in range(6)) for _ in range(10_000)})
RESULT = walk(gbnf("root ::= " + " | ".join(f'"{w}"' for w in words)), text=words[7].encode())""",
        15,
    ),
    "gbnf: a 1 MB literal": (
        """RESULT = walk(gbnf('root ::= "' + "ab" * 500_000 + '"'))""",
        10,
    ),
    "gbnf: invalid UTF-8 text (surrogateescape)": (
        """RESULT = walk(gbnf(b'root ::= "a\\xff\\xfe" [\\x80-\\xff]'.decode("utf-8", "surrogateescape")))""",
        10,
    ),
    "gbnf: \\xff escapes in literals and classes": (
        """c = cfgmask.compile(gbnf('root ::= "\\\\xff" [\\\\x80-\\\\xff]'), BYTES, limits=LIM)
m = cfgmask.Matcher(c)
assert not m.can_accept_bytes(b"\\xff")  # U+00FF is C3 BF in UTF-8, never a raw byte
assert m.accept_bytes("\\u00ff\\u0080".encode()) and m.is_accepting()
RESULT = "U+00FF accepted as UTF-8, raw 0xFF rejected\"""",
        10,
    ),
    "regex: invalid UTF-8 text (surrogateescape)": (
        """RESULT = walk(cfgmask.Grammar.from_regex(b"a\\xff+".decode("utf-8", "surrogateescape"), limits=LIM))""",
        10,
    ),
    "JSON Schema: lone surrogates in const and pattern": (
        """RESULT = walk(schema({"properties": {"a": {"const": "x\\udc80"}, "b": {"pattern": "^\\udcff$"}}}), text=b"{")""",
        10,
    ),
    "vocab: invalid UTF-8 token bytes": (
        """toks = [b"\\xff", b"\\xc3", b"\\xa9", b"\\x80\\x80", b"\\xed\\xa0\\x80", b"\\xf4\\x90\\x80\\x80", b"\\xc0\\xaf",
        b'"', b"{", b"}", b":", b"a", b'"\\xc3']
V = cfgmask.Vocabulary.from_token_bytes(toks)
c = cfgmask.compile(cfgmask.Grammar.json(), V, limits=LIM)
m = cfgmask.Matcher(c)
assert m.accept_bytes(b'{"')
ok = [toks[t] for t in m.allowed_tokens()]
assert b"\\xc3" in ok and b"\\xff" not in ok and b"\\xed\\xa0\\x80" not in ok and b"\\xc0\\xaf" not in ok, ok
assert b"\\xf4\\x90\\x80\\x80" not in ok, ok
RESULT = f"after '{{\\"': allowed {ok}\"""",
        10,
    ),
    "vocab: empty": (
        """RESULT = cfgmask.Vocabulary.from_token_bytes([])""",
        10,
    ),
    "vocab: only special and empty tokens": (
        """V = cfgmask.Vocabulary.from_token_bytes([None, b"", None], stop_token_ids=[0])
RESULT = walk(cfgmask.Grammar.json(), V)""",
        10,
    ),
    "vocab: duplicate tokens": (
        """V = cfgmask.Vocabulary.from_token_bytes([b"a", b"a", b"b", b"a"])
m = cfgmask.Matcher(cfgmask.compile(gbnf('root ::= "a"+'), V, limits=LIM))
assert list(m.allowed_tokens()) == [0, 1, 3]
assert m.accept_token(1) and m.accept_token(3) and m.is_accepting()
RESULT = "every duplicate allowed\"""",
        10,
    ),
    "vocab: 1,000,000 random tokens": (
        """rng = random.Random(0)
toks = [rng.randbytes(rng.randint(1, 8)) for _ in range(1_000_000)] + [bytes([i]) for i in range(256)]
V = cfgmask.Vocabulary.from_token_bytes(toks)
RESULT = walk(cfgmask.Grammar.json(), V, text=b'{"a": [1, 2]}', steps=5)""",
        60,
    ),
    "vocab: 100,000 tokens and one of 1 MB": (
        """rng = random.Random(0)
toks = [rng.randbytes(rng.randint(1, 8)) for _ in range(100_000)] + [b"1" * 1_000_000]
RESULT = walk(cfgmask.Grammar.json(), cfgmask.Vocabulary.from_token_bytes(toks), text=b"[1, 2]")""",
        30,
    ),
    "JSON Schema: oneOf nested 16 deep, one branch nesting": (
        """s = nest(16, lambda s: {"oneOf": [{"type": "array", "items": s}, {"type": "string"}]}, {"type": "integer"})
RESULT = walk(schema(s), text=b'[["x"]]')""",
        20,
    ),
    "JSON Schema: oneOf nested 16 deep, both branches nesting": (
        """s = nest(16, lambda s: {"oneOf": [s, {"type": "array", "items": s}]}, {"type": "integer"})
RESULT = walk(schema(s, strict=False), text=b"[[1]]")""",
        20,
    ),
    "JSON Schema: $ref cycle, no base case": (
        """RESULT = walk(schema({"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}))""",
        10,
    ),
    "JSON Schema: required self-$ref, no base case": (
        """s = {"$defs": {"a": {"type": "object", "properties": {"x": {"$ref": "#/$defs/a"}}, "required": ["x"]}}, "$ref": "#/$defs/a"}
RESULT = walk(schema(s))""",
        10,
    ),
    "JSON Schema: enum of 100,000 strings": (
        """RESULT = walk(schema({"enum": [f"v{i}" for i in range(100_000)]}))""",
        20,
    ),
    "JSON Schema: enum of 100,000 integers": (
        """RESULT = walk(schema({"enum": list(range(100_000))}))""",
        20,
    ),
}

CHILD = """
import json, sys, traceback
{prelude}
try:
{body}
    out = {{"outcome": "result", "detail": str(RESULT)[:160]}}
except cfgmask.CfgmaskError as e:
    out = {{"outcome": type(e).__name__, "limit": getattr(e, "limit", None),
           "detail": str(e).splitlines()[0][:160]}}
except ValueError as e:
    out = {{"outcome": "ValueError", "detail": str(e).splitlines()[0][:160]}}
print("HOSTILE-RESULT " + json.dumps(out), flush=True)
"""


def _limit_memory() -> None:
    if not SANITIZED:
        resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))


def run_case(code: str, budget: float) -> dict:
    """Run one case in a fresh interpreter; time it, and read its peak RSS from wait4."""
    src = CHILD.format(prelude=PRELUDE, body=textwrap.indent(code, "    "))
    env = dict(os.environ, PYTHONPATH=str(ROOT), OPENBLAS_NUM_THREADS="1")
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t = time.perf_counter()
        p = subprocess.Popen(
            [sys.executable, "-c", src], stdout=out, stderr=err, env=env, cwd=ROOT, preexec_fn=_limit_memory
        )
        timed_out = False
        while True:
            pid, status, usage = os.wait4(p.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() - t > budget:
                timed_out = True
                os.kill(p.pid, signal.SIGKILL)
                _, status, usage = os.wait4(p.pid, 0)
                break
            time.sleep(0.01)
        elapsed = time.perf_counter() - t
        p.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(errors="replace"), err.read().decode(errors="replace")
    rec: dict[str, Any] = {
        "time_s": round(elapsed, 2),
        "peak_rss_mb": round(usage.ru_maxrss / 1024),
        "budget_s": budget,
    }
    line = next((x for x in stdout.splitlines() if x.startswith("HOSTILE-RESULT ")), None)
    if timed_out:
        rec.update(outcome="TIMEOUT", detail=f"killed after {budget} s")
    elif line is None:
        why = f"signal {-p.returncode}" if p.returncode < 0 else f"exit {p.returncode}"
        rec.update(outcome="CRASH", detail=f"{why}: {stderr.strip().splitlines()[-1:] or ''}")
    else:
        rec.update(json.loads(line[len("HOSTILE-RESULT ") :]))
    return rec


_RESULTS: dict[str, dict] = {}


@pytest.fixture(scope="module", autouse=True)
def report(tmp_path_factory: pytest.TempPathFactory):
    yield
    if not _RESULTS:
        return
    rows = [
        (name, r["outcome"], f"{r['time_s']:.2f}", str(r["peak_rss_mb"]), r.get("detail", ""))
        for name, r in _RESULTS.items()
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    head = ("case", "outcome", "time s", "peak MB")
    widths = [max(w, len(h)) for w, h in zip(widths, head, strict=True)]
    print("\n" + "  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)) + "  detail")
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row[:4], widths, strict=True)) + "  " + row[4][:90])
    path = tmp_path_factory.mktemp("hostile") / "hostile.json"
    path.write_text(json.dumps(_RESULTS, indent=1))
    print(f"table written to {path}")


@pytest.mark.parametrize("name", list(CASES))
def test_hostile_input_ends_in_result_or_typed_error(name: str) -> None:
    code, budget = CASES[name]
    rec = run_case(code, budget * SLOWDOWN)
    _RESULTS[name] = rec
    assert rec["outcome"] not in ("TIMEOUT", "CRASH"), rec
    assert SANITIZED or rec["peak_rss_mb"] < MAX_RSS_MB, rec
    if rec["outcome"] == "LimitError":
        assert rec["limit"], rec  # names the limit
