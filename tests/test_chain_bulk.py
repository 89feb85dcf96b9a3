"""Counted chains whose walk takes the entries of their loop bytes at once (csrc/chains.c).

A counted chain's shared walk (``x{m,n}`` unrolled, csrc/chains.c) reads the trie through the
chain's loop U.  An entry made only of the bytes X on which U's first label loops back to itself
with one shift and one delta (a class: ``^[0-9a-zA-Z_-]{1,255}$``) ends inside with a need that is
a function of its length, so the walk takes such entries from the vocabulary's byte features
(csrc/tokclass.c) by their length and walks only the others.  The reference: every state's entry
equal to the plain walks' (count_chains off), with the bulk take where it pays (the default),
wherever it applies (``_core.tokclass_enable(2)``: small random vocabularies) and off; and the
take made where it should be.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cfgmask
from cfgmask import _core, ir

from .helpers import alt, chars, grammar, lit, rep, seq
from .strategies import Vocab, vocabularies
from .test_engine_differential import _vocab
from .test_repeats import CHAIN_PIECES, assert_chain_entries, counted
from .test_tokclass import _llama3, _mode


def _object(*props: dict) -> cfgmask.Grammar:
    schema = {
        "type": "object",
        "properties": {f"p{i}": p for i, p in enumerate(props)},
        "required": [f"p{i}" for i in range(len(props))],
    }
    return cfgmask.Grammar.from_json_schema(json.dumps(schema))


# class counts (Github schemas' ids and hashes), a class with a byte of its own path (`-`), a
# minimum inside the count, a class of a few bytes, a maxLength string (the JSON string's plain
# bytes), a class with multi-byte characters (their bytes are no loop of label 0)
LLAMA_STRINGS = [
    {"type": "string", "pattern": "^[0-9a-zA-Z_-]{1,255}$"},
    {"type": "string", "pattern": "^[a-z0-9]{1,64}$"},
    {"type": "string", "pattern": "^[A-Fa-f\\d]{24}$"},
    {"type": "string", "pattern": "^[a-z0-9][a-z0-9-]{2,40}$"},
    {"type": "string", "pattern": "^[a-z]{3,12}$"},
    {"type": "string", "maxLength": 40},
    {"type": "string", "minLength": 5, "maxLength": 30},
    {"type": "string", "pattern": "^[a-z\u00e0-\u00ff]{0,20}$"},
]


@pytest.mark.parametrize("schema", LLAMA_STRINGS, ids=range(len(LLAMA_STRINGS)))
def test_llama3_class_chains_same_entries(schema: dict) -> None:
    vocab = _llama3()
    for mode in (1, 2, 0):
        with _mode(mode):
            assert_chain_entries(_object(schema, {"type": "string", "maxLength": 8}), vocab)


def _taken_in_bulk(g: cfgmask.Grammar, vocab: cfgmask.Vocabulary, prefix: bytes) -> bool:
    """Whether the first mask after ``prefix`` (on a fresh compile) took a chain's walk in bulk."""
    before = _core.chain_bulk_takes()
    m = cfgmask.Matcher(cfgmask.compile(g, vocab))
    assert m.accept_bytes(prefix)
    m.fill_bitmask(cfgmask.allocate_bitmask(1, vocab.size), 0)
    return _core.chain_bulk_takes() > before


def test_llama3_class_chain_taken_in_bulk() -> None:
    """o6193's id pattern takes its chain's walk in bulk at Llama-3's size, and not when off."""
    vocab = _llama3()
    g = _object({"type": "string", "pattern": "^[0-9a-zA-Z_-]{1,255}$"})
    for mode, taken in ((1, True), (0, False)):
        with _mode(mode):
            assert _taken_in_bulk(g, vocab, b'{"p0":"') == taken, mode


def test_llama3_blank_count_walked_not_taken() -> None:
    """arithmetic.gbnf's `[ \\t]{0,8}`: X opens the ' ' subtree (~110 k entries at Llama-3) but few
    entries are blanks alone, so at Llama-3's size the chain is walked (its features' OR would cost
    more than the take saves), taken only where the take always applies (mode 2); same entries."""
    vocab = _llama3()
    g = cfgmask.Grammar.from_gbnf('root ::= "(" [ \\t]{0,8} "x" [ \\t]{0,8} ")"')
    for mode, taken in ((1, False), (2, True)):
        with _mode(mode):
            assert _taken_in_bulk(g, vocab, b"(") == taken, mode
            assert_chain_entries(g, vocab)


# counts of classes (several bytes of one loop), of classes whose bytes lead elsewhere too, and of
# units whose first label has no loop (a pair, an escape)
SMALL_UNITS = {
    "class": chars("ac"),
    "split": alt(chars("ab"), lit("c\u00e9")),
    "escape": alt(chars("a"), lit("\\n")),
    "pair": alt(lit("ab"), chars("c")),
}


@st.composite
def class_counts(draw: st.DrawFn) -> tuple[ir.Grammar, cfgmask.CompileLimits]:
    unit = SMALL_UNITS[draw(st.sampled_from(sorted(SMALL_UNITS)))]
    lo = draw(st.sampled_from((0, 1, 3)))
    hi = lo + draw(st.integers(1, 24))
    budget = draw(st.sampled_from((3, 8, 1024)))
    limits = cfgmask.CompileLimits(unroll_budget=budget, unroll_whole=0)
    tail = draw(st.sampled_from(('"', "")))
    return grammar(root=seq(lit('"'), rep(unit, lo, hi), *([lit(tail)] if tail else []))), limits


@settings(max_examples=60, deadline=None)
@given(class_counts(), vocabularies(CHAIN_PIECES))
def test_small_vocabularies_class_counts_same_entries(
    case: tuple[ir.Grammar, cfgmask.CompileLimits], v: Vocab
) -> None:
    """Every chain walk that can take entries at once does (mode 2), on random vocabularies of
    class bytes, quotes, escapes and cut characters."""
    g, limits = case
    with _mode(2):
        assert_chain_entries(g, _vocab(v), limits)


@settings(max_examples=40, deadline=None)
@given(counted(), vocabularies(CHAIN_PIECES))
def test_small_vocabularies_counts_same_entries(
    case: tuple[ir.Grammar, cfgmask.CompileLimits], v: Vocab
) -> None:
    """test_repeats' counts (nested, in rules of their own, with what follows them inside) with
    the bulk take wherever it applies."""
    g, limits = case
    with _mode(2):
        assert_chain_entries(g, _vocab(v), limits)
