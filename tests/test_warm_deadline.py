"""``compile(warm=True)`` stays within ``CompileLimits.deadline_ms``.

Filling the whole mask cache of sql.lark takes about half a second, so it runs under the
compile's deadline: ``CompiledGrammar.warm`` hands the C core (``cm_grammar_warm``) the time
left as an absolute ``time.monotonic()`` deadline, checked between entries, and a timeout
becomes ``LimitError(limit="deadline_ms")``.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

import cfgmask
from cfgmask import deadline
from cfgmask.errors import LimitError

pytest.importorskip("lark")

SQL = (Path(__file__).resolve().parent.parent / "grammars" / "sql.lark").read_text()


@pytest.fixture(scope="module")
def vocab() -> cfgmask.Vocabulary:
    return cfgmask.Vocabulary.llama3()


def test_tiny_deadline_stops_a_warm_compile(vocab: cfgmask.Vocabulary) -> None:
    tiny = cfgmask.CompileLimits(deadline_ms=1)
    with pytest.raises(LimitError) as err:
        cfgmask.compile(cfgmask.Grammar.from_lark(SQL), vocab, limits=tiny, warm=True)
    assert err.value.limit == "deadline_ms"


def test_warm_itself_honours_the_deadline(vocab: cfgmask.Vocabulary, monkeypatch: pytest.MonkeyPatch) -> None:
    """With the tables cached, only warming is left to run out of time."""
    grammar = cfgmask.Grammar.from_lark(SQL)
    cfgmask.compile(grammar, vocab)  # the tables, cached for the compile below
    monkeypatch.setattr(deadline, "remaining", lambda: 0.0)
    with pytest.raises(LimitError) as err:
        cfgmask.compile(grammar, vocab, warm=True)
    assert err.value.limit == "deadline_ms" and "warm" in str(err.value)


def test_a_timed_out_warm_leaves_a_working_grammar(vocab: cfgmask.Vocabulary) -> None:
    warmed = cfgmask.compile(cfgmask.Grammar.from_lark(SQL), vocab)
    with pytest.raises(LimitError):
        warmed._handle.warm(time.monotonic())
    warmed._handle.warm()  # no deadline: finishes
    assert warmed.stats["cache_entries"] > 0
    fresh = cfgmask.compile(cfgmask.Grammar.from_lark(SQL), vocab)
    for prefix in (b"", b"SELECT a FROM t WHERE ", b"SELECT count(*) FROM t GROUP BY a"):
        masks = []
        for g in (warmed, fresh):
            m = cfgmask.Matcher(g)
            assert m.accept_bytes(prefix)
            masks.append(m.allowed_tokens())
        assert np.array_equal(masks[0], masks[1]), prefix
