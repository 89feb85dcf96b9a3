"""The entries of states outside segments in no loop (docs/design.md §7, "States in no loop on
the ladder").

On a segment grammar (``CompileLimits.counters``) a plain state outside segments that the loop
rung declines -- a short bounded string left unrolled (an ISO code's ``maxLength: 3``, its
``\\u`` escapes), a key's prefix, a state on a cycle through a segment -- is walked as the DFA
walk of the plain states outside segments it leads through (a loop walk of a set with no cycle,
kept by signature), each subtree that leaves them through the counted chart from the edge's
target (csrc/loops.c, cm_seg_chain_entry).  Every such entry must equal the plain counted walk's
(``_core.seg_ladder_enable(False)``): on hypothesis units and bounds with short bounded strings
beside a segment, random vocabularies, and a JSON Schema with Llama-3.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

import cfgmask
from cfgmask import _core, ir
from cfgmask.compile.segments import segment_form

from .helpers import alt, chars, grammar, lit, rep, seq
from .test_far_entries import _vocabulary
from .test_seg_ladder import CONTEXTS, _check
from .test_seg_ladder import _grammar as _ladder_grammar
from .test_segment_masks import _STRUCT, _compare_walks
from .test_segments import ON, _samples, _string, bounds, units


@pytest.fixture(autouse=True)
def chain_on() -> Iterator[None]:
    yield
    _core.seg_chain_enable(True)
    _core.seg_ladder_enable(True)


def _short(y: ir.Expr, n: int) -> ir.Expr:
    """A string of at most n units of y, letters or digits: unrolled (no segment), its states in
    no loop, wide (a narrow first state, a key's prefix, is declined)."""
    return seq(lit('"'), rep(alt(y, chars("az", "09")), 0, n), lit('"'))


def _grammar(context: str, x: ir.Expr, lo: int, hi: int, y: ir.Expr, n: int) -> ir.Grammar:
    s = _string(x, lo, hi)
    if context == "short_then_bounded":  # a short key, then a bounded value
        return grammar(root=seq(lit("{"), _short(y, n), lit(":"), s, lit("}")))
    if context == "bounded_then_short":  # the short string's exit lands outside, then a segment
        return grammar(root=seq(lit("{"), s, lit(":"), _short(y, n), lit(","), s, lit("}")))
    if context == "short_array":  # short strings in an array (a cycle through the comma), a segment
        return grammar(root=seq(lit("["), _short(y, n), rep(seq(lit(","), _short(y, n))), lit("]"), s))
    return _ladder_grammar(context, x, lo, hi, y)


def _built(g: ir.Grammar, vocab: cfgmask.Vocabulary) -> int:
    """The entries with the chain rung on equal the plain walks' (test_seg_ladder's _check: the
    ladder off is the plain walk); returns how many the chain rung built."""
    before = _core.seg_chain_builds()
    _check(g, vocab)
    return _core.seg_chain_builds() - before


@given(
    units(),
    st.sampled_from(["short_then_bounded", "bounded_then_short", "short_array", *CONTEXTS]),
    units(),
    bounds(),
    st.integers(1, 4),
    st.integers(0, 2**16),
)
def test_chain_entries_equal_plain_walks(
    x: ir.Expr, context: str, y: ir.Expr, b: tuple[int, int], n: int, seed: int
) -> None:
    rng = random.Random(seed)
    words = [_samples(x, rng) for _ in range(6)] + [_samples(y, rng) for _ in range(4)]
    vocab = _vocabulary(rng, words * 3 + _STRUCT + [b'":"', b'","', b'"ab"', b'"a', b"|", b">"], 100)
    g = _grammar(context, x, *b, y, n)
    try:
        if not segment_form(g, ON).segments:
            return
    except cfgmask.errors.LimitError:  # too many DFA states
        return
    # no count of chain builds asserted here: another rung may take a short string's state (a
    # multibyte unit's, in an array, under ASan's examples); the tests below require them
    _built(g, vocab)


def test_chain_off_builds_none() -> None:
    """The switch: off, no entry comes from the chain rung (and they still equal the plain walks)."""
    g = _grammar("short_then_bounded", chars("ab"), 2, 9, chars("xy"), 3)
    extra = [b'"xy"', b'"x', b'xy":"', b'"ab', b"ab"]
    tokens: list[bytes | None] = [bytes([c]) for c in range(256)] + extra + [None]
    vocab = cfgmask.Vocabulary.from_token_bytes(tokens, stop_token_ids=[len(tokens) - 1])
    assert _built(g, vocab) > 0
    _core.seg_chain_enable(False)
    assert _built(g, vocab) == 0


SCHEMA = {
    "type": "object",
    "properties": {
        "currency": {"type": "string", "maxLength": 3},
        "code": {"type": "string", "minLength": 2, "maxLength": 40},
        "pair": {"type": "array", "items": {"type": "string", "maxLength": 2}},
    },
    "required": ["currency", "code"],
}


def test_json_schema_with_llama3() -> None:
    """Short bounded strings (an ISO code's, an array's items) beside a segment, Llama-3: every
    entry outside segments equals the plain walk's, the chain rung taken; and the masks along
    random walks equal the unrolled compile's."""
    llama3 = cfgmask.Vocabulary.llama3()
    g = cfgmask.Grammar.from_json_schema(json.dumps(SCHEMA)).ir
    assert segment_form(g, ON).segments
    assert _built(g, llama3) > 0
    words = [b'"currency"', b'"code"', b'"pair"', b'":"', b'","', b"EUR", b"abc", b'"', b'",', b"x"]
    assert _compare_walks(g, llama3, 5, n_walks=3, length=40, prefer=words) > 0
