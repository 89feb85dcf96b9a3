"""Compile memory: grammars whose automata explode stop at ``CompileLimits.max_compile_mb``.

Each case is a grammar whose automaton build explodes: nested optional repetitions
whose subset construction holds huge sets of NFA states per DFA state, or so many
unrolled repetitions that the NFA alone takes gigabytes.  Each is compiled with the
default limits in a fresh interpreter, so the peak RSS (``getrusage`` in the child)
is the case's own.  A case must end in a typed ``LimitError`` (which limit is
printed with ``pytest -s``) and peak under the RSS of a child that compiles a
trivial grammar + ``max_compile_mb`` + ``MARGIN_MB``.

Before the budget (commit bc3eff8) the NFA cases peaked at 3.7-3.8 GB and ended
after 29-35 s (deadline, max_rules); the subset cases ran into the 30 s deadline at
0.7-0.9 GB.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from cfgmask import CompileLimits

ROOT = Path(__file__).resolve().parent.parent
SANITIZED = "san.so" in os.environ.get("LD_PRELOAD", "")  # tests/sanitize.sh: RSS means nothing
MARGIN_MB = 192  # the IR and Python objects of a large grammar, allocator slack
ADDRESS_SPACE = 6 << 30  # RLIMIT_AS of a child: a regression fails fast instead of taking the machine
BUDGET_MB = CompileLimits().max_compile_mb
LIMITS = {"max_compile_mb", "max_dfa_states", "max_total_states", "deadline_ms"}

# id -> grammar expression (front end call on generated text)
CASES = {
    # subset construction: every DFA state is a set of a large part of a 100k-state NFA
    "regex (a?b?){300} x100, subset sets": "cfgmask.Grammar.from_regex('(a?b?){300}' * 100)",
    'gbnf ("a"? "b"?){300} x100, subset sets': (
        """cfgmask.Grammar.from_gbnf('root ::= ' + '("a"? "b"?){300} ' * 100)"""
    ),
    'lark terminal ("a"? "b"?)~300 x100, subset sets': (
        """cfgmask.Grammar.from_lark('start: X\\nX: ' + '("a"? "b"?)~300 ' * 100 + '"x"')"""
    ),
    # Thompson construction: 100,000 unrolled repetitions of 1,000 bytes, one NFA
    'gbnf "a"{1000} x100000, NFA size': """cfgmask.Grammar.from_gbnf('root ::= ' + '"a"{1000} ' * 100_000)""",
}

CHILD = """
import json, resource, time
import cfgmask
vocab = cfgmask.Vocabulary.from_token_bytes([bytes([i]) for i in range(256)])
t = time.perf_counter()
try:
    cfgmask.compile({grammar}, vocab)
    out = {{"outcome": "compiled"}}
except cfgmask.LimitError as e:
    out = {{"outcome": "LimitError", "limit": e.limit}}
except cfgmask.CfgmaskError as e:
    out = {{"outcome": type(e).__name__, "detail": str(e)[:200]}}
out["seconds"] = round(time.perf_counter() - t, 2)
out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
print("CASE-RESULT " + json.dumps(out))
"""


def _limit_memory() -> None:
    if not SANITIZED:
        resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))


def run_child(grammar: str) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT), OPENBLAS_NUM_THREADS="1")
    p = subprocess.run(
        [sys.executable, "-c", CHILD.format(grammar=grammar)],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=120,
        preexec_fn=_limit_memory,
    )
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("CASE-RESULT ")]
    assert p.returncode == 0 and lines, (p.returncode, p.stdout[-2000:], p.stderr[-2000:])
    return json.loads(lines[-1].split(" ", 1)[1])


@pytest.fixture(scope="module")
def baseline_mb() -> int:
    rec = run_child("""cfgmask.Grammar.from_gbnf('root ::= "a"')""")
    assert rec["outcome"] == "compiled", rec
    return int(rec["peak_rss_mb"])


@pytest.mark.parametrize("grammar", list(CASES.values()), ids=list(CASES))
def test_explosion_ends_in_a_limit_within_the_budget(grammar: str, baseline_mb: int) -> None:
    rec = run_child(grammar)
    cap = baseline_mb + BUDGET_MB + MARGIN_MB
    print(
        f"\n  -> {rec['outcome']} {rec.get('limit', '')}: peak {rec['peak_rss_mb']} MB "
        f"(cap {cap} MB: baseline {baseline_mb} MB), compile {rec['seconds']} s"
    )
    assert rec["outcome"] == "LimitError" and rec["limit"] in LIMITS, rec
    assert SANITIZED or rec["peak_rss_mb"] < cap, rec
