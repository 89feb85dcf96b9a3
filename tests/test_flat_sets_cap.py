"""Flat configurations held to a number of chart sets (csrc/flat.c ``flat_suffix``).

A flat walk interns the configuration after each byte: its chart's suffix of sets (those the
last set's items and their waiters point back to), encoded, sorted and hashed, so that the next
walk meeting it steps by table.  A right-recursive rule read again and again (arithmetic's unary
minus, ``unary ::= "-" ws unary | primary``, along Llama-3's runs of up to 96 dashes) nests one
set deeper at each byte: every step a new configuration, larger each time, met once.
``_core.flat_sets_cap(n)`` leaves a configuration of more than n sets to a chart, the way one of
more than CM_FLAT_MAX_ITEMS items always was (``flat_leave``); ``flat_sets_capped()`` counts them.

Every state's entry is compared with the cap off (0) and with whole walks on the shipped
grammars with Llama-3, and on hypothesis grammars of nested prefix operators and parentheses
under small caps (1-4 sets: most configurations past the cap) over random vocabularies, where
the masks along random walks are compared with the reference matcher's too.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cfgmask
from cfgmask import _core

from .helpers import core_switch, same_entries, walk_agrees
from .reference import ReferenceMatcher
from .strategies import Vocab, token_walks, vocabularies
from .test_engine_differential import _vocab
from .test_entries import WALKS_ONLY, entries, shipped

DEFAULT_CAP = 16


@contextlib.contextmanager
def capped(n: int) -> Iterator[None]:
    with core_switch(_core.flat_sets_cap, n, DEFAULT_CAP):
        yield


def _entries(g: cfgmask.Grammar, vocab: cfgmask.Vocabulary, cap: int) -> list:
    with capped(cap):
        return entries(cfgmask.compile(g, vocab))


def assert_same_entries(g: cfgmask.Grammar, vocab: cfgmask.Vocabulary, cap: int, walks: bool = True) -> int:
    """Every state's entry under the cap equal to the uncapped ones and (walks) whole walks; how
    many configurations the cap refused."""
    before = _core.flat_sets_capped()
    on = _entries(g, vocab, cap)
    refused = _core.flat_sets_capped() - before
    before = _core.flat_sets_capped()
    same_entries(on, _entries(g, vocab, 0), "no cap")
    assert _core.flat_sets_capped() == before, "the cap refused while off"
    if walks:
        with capped(cap):
            same_entries(on, entries(cfgmask.compile(g, vocab, _strategy=WALKS_ONLY)), "whole walks")
    return refused


@pytest.mark.parametrize("name", ["arithmetic.gbnf", "c.gbnf", "json.gbnf"])
def test_shipped_grammars_same_entries(name: str) -> None:
    """arithmetic's dashes (nested unary minus) pass the default cap."""
    refused = assert_same_entries(
        shipped(name), cfgmask.Vocabulary.llama3(), DEFAULT_CAP, walks=name != "c.gbnf"
    )
    if name == "arithmetic.gbnf":
        assert refused > 0, refused


# Prefix operators nesting to the right and parentheses nesting inside, the operator read with
# or without blanks; `neg` and `not` are prefixes of each other's tokens in the vocabularies.
GRAMMAR = """root ::= expr
expr ::= unary ( ws {op} ws unary )*
unary ::= {pre} ws unary | atom
atom ::= [0-9]+ | [a-z]+ | "(" ws expr ws ")"
ws ::= {ws}
"""
PRE = ('"-"', '"!"', '( "-" | "!" )', '"--"', '"-" "-"?')
OPS = ("[-+]", '"+"', "[*/]", '"-"')
WS = ("[ ]?", "[ \\t]{0,2}", '" "*')
PIECES = (
    b"-", b"--", b"---", b"----", b"-----", b"- -", b"!-", b"!", b"!!", b"(", b"((", b"(-",
    b"-(", b")", b"))", b"1", b"12", b"a", b"ab", b" ", b"  ", b" -", b"+", b" +", b"-1",
)  # fmt: skip


@settings(max_examples=40, deadline=None)
@given(
    st.sampled_from(PRE), st.sampled_from(OPS), st.sampled_from(WS), st.integers(1, 4), vocabularies(PIECES)
)
def test_random_prefix_grammars_same_entries(pre: str, op: str, ws: str, cap: int, v: Vocab) -> None:
    g = cfgmask.Grammar.from_gbnf(GRAMMAR.format(pre=pre, op=op, ws=ws))
    assert_same_entries(g, _vocab(v), cap)


def test_nested_dashes_refused() -> None:
    """The random grammars' deep configurations pass a small cap (else the test above would
    compare the cap's absence with itself)."""
    g = cfgmask.Grammar.from_gbnf(GRAMMAR.format(pre=PRE[0], op=OPS[0], ws=WS[0]))
    v = Vocab(tokens=[None, *PIECES, b"-" * 12, b"-" * 30], stop_ids=(0,))
    assert assert_same_entries(g, _vocab(v), 2) > 0


@settings(max_examples=30, deadline=None)
@given(
    st.sampled_from(PRE),
    st.sampled_from(OPS),
    st.sampled_from(WS),
    st.integers(1, 4),
    vocabularies(PIECES),
    st.data(),
)
def test_random_prefix_grammars_masks_equal_reference(
    pre: str, op: str, ws: str, cap: int, v: Vocab, data: st.DataObject
) -> None:
    """The masks along random walks under a small cap: the reference matcher's, and those of
    whole walks."""
    g = cfgmask.Grammar.from_gbnf(GRAMMAR.format(pre=pre, op=op, ws=ws))
    ref_m = ReferenceMatcher(g.ir)
    vocab = _vocab(v)
    walk = data.draw(token_walks(ref_m, v, max_steps=12))
    with capped(cap):
        flat = cfgmask.Matcher(cfgmask.compile(g, vocab))
        whole = cfgmask.Matcher(cfgmask.compile(g, vocab, _strategy=WALKS_ONLY))
        walk_agrees(ref_m, v.tokens, v.stop_ids, v.special_ids, walk.token_ids, flat=flat, whole=whole)
