"""The upward filter's early pair stops (csrc/walk.c, ``_core.filter_pairs_early_enable``): a
filter of at least ``Strategy.filter_pairs`` uncertain tokens makes its rule's pair stops
at its first rest, where before the rule's filters counted ``filter_pairs`` rests first, each
asked through the upward chart (a JSON `ws` start's 4,300 blank-led tokens: its first 256 rests,
` -------` and ` "#` among them, asked though the rows of `-` and `"` drop them).  The pair and
triple stops are exact, so every state's entry, and every mask along a document, must be the same
with the switch on and off."""

from __future__ import annotations

import json
from contextlib import AbstractContextManager

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cfgmask
from cfgmask import _core
from cfgmask.compile.strategy import Strategy

from .helpers import core_switch
from .test_direct_loops import assert_corpus_masks_same
from .test_entries import assert_switch_same_entries, entries, shipped
from .test_filter_pairs import ANY_VALUES, OWN_RULES, _pair_vocab
from .test_filter_triples import TRIPLE_BYTES, TRIPLE_GRAMMARS

# Few enough that a random vocabulary's filters reach it, many enough that a rule's count of rests
# before it is not met by one filter's first rests alone.
SOME = Strategy(filter_pairs=24)


def _same(g: cfgmask.Grammar, vocab: cfgmask.Vocabulary, **kw: object) -> int:
    """Entries with the early pair stops on equal to off; the filters that made them early."""
    return assert_switch_same_entries(
        _core.filter_pairs_early_enable,
        _core.filter_pairs_early,
        g,
        vocab,
        what="early pair stops off",
        **kw,  # type: ignore[arg-type]
    )


def _pair_answers(g: cfgmask.Grammar, vocab: cfgmask.Vocabulary, on: bool) -> int:
    """The rests the pair stops answered in a compile with the early stops on or off."""
    with core_switch(_core.filter_pairs_early_enable, on):
        before = _core.filter_pair_hits()
        entries(cfgmask.compile(g, vocab))
        return _core.filter_pair_hits() - before


@pytest.mark.parametrize("case", ["json_schema", "json.gbnf"])
def test_early_taken_and_same_entries_llama3(case: str) -> None:
    """A JSON Schema of values of every kind after `ws` and json.gbnf with Llama-3 (its `ws`
    start filter has thousands of uncertain tokens): equal entries; on the schema made early,
    and the pair stops answer more rests with them than without."""
    g = cfgmask.Grammar.from_json_schema(json.dumps(ANY_VALUES)) if case == "json_schema" else shipped(case)
    vocab = cfgmask.Vocabulary.llama3()
    made = _same(g, vocab)
    if case == "json_schema":
        assert made > 0
        assert _pair_answers(g, vocab, True) > _pair_answers(g, vocab, False)


def _early(on: bool) -> AbstractContextManager[None]:
    return core_switch(_core.filter_pairs_early_enable, on)


def test_corpus_masks() -> None:
    """Llama-3 masks along the first valid document of corpus schemas: the same on and off."""
    assert_corpus_masks_same(_early)


@pytest.mark.parametrize("index", range(len(TRIPLE_GRAMMARS)))
@pytest.mark.parametrize("seed", range(3))
def test_early_same_entries_random_vocab(index: int, seed: int) -> None:
    """Random tokens of a number then two to six keyword-ish bytes, pair stops after 24 rests:
    on = off = whole walks, and some filter made them early."""
    g = cfgmask.Grammar.from_gbnf(TRIPLE_GRAMMARS[index])
    vocab = _pair_vocab(seed, heads=b"129", rests=TRIPLE_BYTES, longest=6)
    assert _same(g, vocab, limits=OWN_RULES, strategy=SOME, plain=True) > 0, TRIPLE_GRAMMARS[index]


# A number's head, then up to six keyword-ish bytes drawn as indices into TRIPLE_BYTES.
HEADS = st.sampled_from([b"1", b"12", b"9", b"1 ", b"2  "])
TAILS = st.binary(min_size=1, max_size=6).map(lambda b: bytes(TRIPLE_BYTES[x % len(TRIPLE_BYTES)] for x in b))


@settings(max_examples=40, deadline=None)
@given(
    st.integers(0, len(TRIPLE_GRAMMARS) - 1),
    st.integers(1, 64),
    st.lists(st.tuples(HEADS, TAILS), max_size=80),
)
def test_early_same_entries_hypothesis(index: int, pairs: int, pieces: list) -> None:
    """Hypothesis vocabularies, pair stops after 1 to 64 rests: on = off."""
    toks = {bytes([x]) for x in range(256)} | {head + rest for head, rest in pieces}
    vocab = cfgmask.Vocabulary.from_token_bytes(sorted(toks))
    _same(
        cfgmask.Grammar.from_gbnf(TRIPLE_GRAMMARS[index]),
        vocab,
        limits=OWN_RULES,
        strategy=Strategy(filter_pairs=pairs),
    )
