"""The upward filter's triple stops (csrc/walk.c, pair_third, ``_core.filter_triples_enable``):
after a first byte whose second bytes are few (a keyword's: `f` `a` of `false` after a JSON value's
`ws`), the bytes the rule's upward chart reads third after each such pair are made from the chart,
and a rest whose third byte is not among them dies without being asked (` fabrication` leaves
`fabrication`, which dies on `b`), its token's prefix skipping the rest of its trie subtree.  Every
state's entry must be the same as with such rests asked through the upward chart, and as a plain
walk's."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cfgmask
from cfgmask import _core

from .test_entries import assert_switch_same_entries, shipped
from .test_filter_pairs import ANY_VALUES, EVERY, OWN_RULES, _pair_vocab


def _same(g: cfgmask.Grammar, vocab: cfgmask.Vocabulary, **kw: object) -> int:
    """Entries with the triple stops on equal to off (pair stops made at a rule's first rest);
    the rests they answered."""
    return assert_switch_same_entries(
        _core.filter_triples_enable,
        _core.filter_triple_hits,
        g,
        vocab,
        what="triple stops off",
        strategy=EVERY,
        **kw,  # type: ignore[arg-type]
    )


@pytest.mark.parametrize("case", ["json_schema", "json.gbnf", "c.gbnf"])
def test_triples_taken_and_same_entries_llama3(case: str) -> None:
    """A JSON Schema of values of every kind after `ws` (Llama-3's ` fa..`, ` nu..`, ` tr..`
    tokens: they fire), json.gbnf and c.gbnf (equal entries)."""
    g = cfgmask.Grammar.from_json_schema(json.dumps(ANY_VALUES)) if case == "json_schema" else shipped(case)
    hits = _same(g, cfgmask.Vocabulary.llama3())
    if case == "json_schema":
        assert hits > 100, hits


# Keywords after a number, so that a few pairs lead on to a third byte the callers read or not.
TRIPLE_GRAMMARS = [
    'root ::= item ( "," item )*\nitem ::= num ( "true" | "false" | "null" | "-" num )?\nnum ::= [0-9]+',
    'root ::= item+\nitem ::= num " "{0,2} ( "tr" [a-c] num | "fa" "l" | ";" )?\nnum ::= [0-9] [0-9]*',
]
TRIPLE_BYTES = [*b"truefalsnbc -;,1"]


@pytest.mark.parametrize("index", range(len(TRIPLE_GRAMMARS)))
@pytest.mark.parametrize("seed", range(3))
def test_triples_same_entries_random_vocab(index: int, seed: int) -> None:
    """Random tokens of a number then two to six keyword-ish bytes (their rests are pairs and
    triples the callers read, or not): on = off = whole walks, and they fire."""
    g = cfgmask.Grammar.from_gbnf(TRIPLE_GRAMMARS[index])
    vocab = _pair_vocab(seed, heads=b"129", rests=TRIPLE_BYTES, longest=6)
    assert _same(g, vocab, limits=OWN_RULES, plain=True) > 0, TRIPLE_GRAMMARS[index]


@settings(max_examples=40, deadline=None)
@given(
    st.integers(0, len(TRIPLE_GRAMMARS) - 1),
    st.lists(
        st.tuples(
            st.sampled_from([b"1", b"12", b"9", b"1 ", b"2  "]),
            st.lists(st.sampled_from(TRIPLE_BYTES), min_size=1, max_size=6).map(bytes),
        ),
        min_size=1,
        max_size=80,
    ),
)
def test_triples_same_entries_hypothesis(index: int, pieces: list) -> None:
    toks = {bytes([x]) for x in range(256)} | {head + rest for head, rest in pieces}
    g = cfgmask.Grammar.from_gbnf(TRIPLE_GRAMMARS[index])
    _same(g, cfgmask.Vocabulary.from_token_bytes(sorted(toks)), limits=OWN_RULES)
