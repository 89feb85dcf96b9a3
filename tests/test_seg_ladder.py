"""The entries of states outside counted segments on the build ladder (docs/design.md §7, "The
entries outside segments back on the ladder").

On a segment grammar (``CompileLimits.counters``) a state outside segments keeps its entry by
state; its walk enters every segment afresh at count 0.  Two rungs that read no count build it
instead of the plain counted walk of the whole trie (csrc/cache.c, seg_outside_walk): a donor
state's entry, both outside segments, the first bytes where the two part walked through the
counted chart (csrc/donor.c); and the shared walk of a loop whose states are all outside
segments (an unbounded string beside bounded ones), each exit's subtree walked on through the
counted chart, which enters a later segment at count 0 (csrc/loops.c, cm_seg_loop_entry).  Every
such entry must equal the plain walk's (``_core.seg_ladder_enable(False)``): on hypothesis
units, bounds and contexts with free strings and keys before a bounded string, random
vocabularies whose tokens run from one string into the next, and a JSON Schema with Llama-3.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import cfgmask
from cfgmask import _core, ir
from cfgmask.compile.segments import c_tables, segment_form
from cfgmask.errors import LimitError

from .helpers import alt, chars, grammar, lit, rep, seq
from .test_far_entries import _vocabulary
from .test_segment_masks import _STRUCT, _compare_walks, _handle
from .test_segments import ON, _samples, _string, bounds, units


@pytest.fixture(autouse=True)
def ladder_on() -> Iterator[None]:
    yield
    _core.seg_ladder_enable(True)


def _free(y: ir.Expr) -> ir.Expr:
    """A string of any length: its inside a loop outside segments (letters and digits besides y:
    a one-byte run is a narrow loop, which the shared walk declines)."""
    return seq(lit('"'), rep(alt(y, chars("az", "09")), 0), lit('"'))


CONTEXTS = ["free_then_bounded", "keys", "free_array", "bounded_then_free", "adjacent", "bounded_array"]


def _grammar(context: str, x: ir.Expr, lo: int, hi: int, y: ir.Expr) -> ir.Grammar:
    s = _string(x, lo, hi)
    if context == "free_then_bounded":  # a free key, then a bounded value
        return grammar(root=seq(lit("{"), _free(y), lit(":"), s, lit("}")))
    if context == "keys":  # known keys beside a free one: their prefixes' states take a donor's
        key = alt(lit('"ab"'), lit('"xy"'), lit('"a0"'), _free(y))
        return grammar(root=seq(lit("{"), key, lit(":"), s, rep(seq(lit(","), key, lit(":"), s)), lit("}")))
    if context == "free_array":  # free strings in a loop through the comma, then a bounded one
        return grammar(root=seq(lit("["), _free(y), rep(seq(lit(","), _free(y))), lit("]"), s))
    if context == "bounded_then_free":
        return grammar(root=seq(lit("{"), s, lit(":"), _free(y), lit(","), s, lit("}")))
    if context == "adjacent":  # the free loop's exit lands on the segment's head itself
        free = rep(alt(y, chars("az", "09")), 0)
        return grammar(root=seq(lit("<"), free, lit("|"), rep(x, lo, hi), lit(">")))
    # bounded strings on a cycle through the comma: the states outside segments on it (after a
    # comma) are in a loop through the segment's states, which the shared walk must decline
    assert context == "bounded_array"
    return grammar(root=seq(lit("["), s, rep(seq(lit(","), s)), lit("]"), _free(y)))


def _entries(g: ir.Grammar, vocab: cfgmask.Vocabulary, on: bool) -> dict[int, tuple[bytes, list[int]]]:
    """Every state outside segments' entry, built with the ladder on or off (a fresh grammar
    handle: its cache holds only what this builds)."""
    form = segment_form(g, ON)
    tables = c_tables(form)
    _core.seg_ladder_enable(on)
    gh = _handle(form, vocab)
    out = {}
    for s, sid in enumerate(tables.state_seg.tolist()):
        if sid == 0xFFFFFFFF:
            words, unc = gh.seg_entry(s, 0)
            out[s] = (words.tobytes(), sorted(unc.tolist()))
    return out


def _check(g: ir.Grammar, vocab: cfgmask.Vocabulary) -> tuple[int, int]:
    """The entries with the ladder on equal those of the plain walks; returns how many were
    built from a donor and from a loop's shared walk."""
    plain = _entries(g, vocab, False)
    before = _core.seg_ladder_builds()
    fast = _entries(g, vocab, True)
    built = tuple(a - b for a, b in zip(_core.seg_ladder_builds(), before, strict=True))
    assert fast.keys() == plain.keys()
    for s, e in plain.items():
        assert fast[s][1] == e[1], f"uncertain tokens differ at state {s}"
        if fast[s][0] != e[0]:
            a = np.unpackbits(np.frombuffer(fast[s][0], np.uint8), bitorder="little")
            b = np.unpackbits(np.frombuffer(e[0], np.uint8), bitorder="little")
            ta, tb = set(np.nonzero(a)[0].tolist()), set(np.nonzero(b)[0].tolist())
            raise AssertionError(
                f"state {s}: ladder only {[vocab.decode([t]) for t in sorted(ta - tb)[:8]]}, "
                f"plain only {[vocab.decode([t]) for t in sorted(tb - ta)[:8]]}"
            )
    return built[0], built[1]


@given(units(), st.sampled_from(CONTEXTS), units(), bounds(), st.integers(0, 2**16))
def test_outside_entries_equal_plain_walks(
    x: ir.Expr, context: str, y: ir.Expr, b: tuple[int, int], seed: int
) -> None:
    rng = random.Random(seed)
    words = [_samples(x, rng) for _ in range(6)] + [_samples(y, rng) for _ in range(4)]
    vocab = _vocabulary(rng, words * 3 + _STRUCT + [b'":"', b'","', b'"ab"', b'"a', b"|", b">"], 100)
    g = _grammar(context, x, *b, y)
    try:
        if not segment_form(g, ON).segments:
            return
    except LimitError:  # "adjacent" with a free part that overlaps the unit: too many DFA states
        return
    donated, looped = _check(g, vocab)
    assert looped > 0  # the free string's inside
    if context == "keys":
        assert donated > 0


def test_a_loop_through_a_segment_is_declined() -> None:
    """An array of bounded strings: the state after `[` or `,` lies on a cycle through the
    segment, whose shared walk would read `"ab","` (2 units, lo = 4) without the count and
    take it; the rung declines there (the plain walk refuses it), and takes the free string."""
    g = _grammar("bounded_array", chars("ab"), 4, 8, chars("xy"))
    extra = [b'"ab","', b'ab","a', b'","ab"', b'a","', b'abab","ab', b'",""', b'"],"', b'"xy"']
    tokens: list[bytes | None] = [bytes([c]) for c in range(256)] + extra + [None]
    vocab = cfgmask.Vocabulary.from_token_bytes(tokens, stop_token_ids=[len(tokens) - 1])
    assert _check(g, vocab)[1] > 0


@pytest.fixture(scope="module")
def llama3() -> cfgmask.Vocabulary:
    return cfgmask.Vocabulary.llama3()


SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "code": {"type": "string", "minLength": 2, "maxLength": 40},
        "tags": {"type": "array", "items": {"type": "string"}},
    },
    "additionalProperties": {"type": "string", "maxLength": 30},
}


def test_json_schema_with_llama3(llama3: cfgmask.Vocabulary) -> None:
    """Free strings (a property's, an array's items, the keys beside the schema's own) and bounded
    ones, Llama-3: every entry outside segments from the ladder equals the plain walk's, donors
    and loops both taken; and the masks along random walks equal the unrolled compile's."""
    g = cfgmask.Grammar.from_json_schema(json.dumps(SCHEMA)).ir
    assert segment_form(g, ON).segments
    donated, looped = _check(g, llama3)
    assert donated > 0 and looped > 0
    words = [b'"name"', b'"code"', b'"tags"', b'":"', b'","', b"abc", b" world", b'"', b'",', b"x"]
    assert _compare_walks(g, llama3, 5, n_walks=3, length=40, prefer=words) > 0
