"""Upward verdicts shared between rules whose upward charts read alike (csrc/walk.c,
``verdict_rule``; ``_core.verdict_share_enable``).

The upward filter asks whether a rule's upward chart survives a token's rest after an exit.  That
chart's first set is the closure of the rule's return states, and of it only the items that read
bytes (or tokens) or call a rule act after it; two rules whose first sets hold the same such items
give every rest the same verdict, so the second one reads and keeps the first one's.  sql.lark's
expression chain (`?expr: or_expr`, `?not_expr: NOT not_expr | predicate`, `?unary: "-" unary |
primary`) has three levels alike another.  Every state's entry with the sharing on must equal it
off (and whole walks'), the masks along bench_gbnf's sql.lark documents from cold caches the same,
and random chains of levels, some of which only end the level above, the same."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cfgmask
from cfgmask import _core

from .helpers import core_switch
from .strategies import Vocab, vocabularies
from .test_engine_differential import _vocab
from .test_entries import EXPR_PIECES, assert_switch_same_entries, expression_grammars, shipped
from .test_filter_stop_skip import sql_cold_pass_same


def assert_share_same(g: cfgmask.Grammar, vocab: cfgmask.Vocabulary, *, plain: bool = False) -> int:
    """Entries with the sharing on equal to it off (and, plain, to whole walks'); how many rules
    shared another's verdicts."""
    return assert_switch_same_entries(
        _core.verdict_share_enable, _core.verdict_shared, g, vocab, what="verdict sharing off", plain=plain
    )


@pytest.mark.parametrize("name", ["sql.lark", "c.gbnf", "json.gbnf"])
def test_shipped_grammars_same_entries(name: str) -> None:
    """Every state's entry with Llama-3; sql.lark's expression chain shares verdicts."""
    shared = assert_share_same(shipped(name), cfgmask.Vocabulary.llama3())
    if name == "sql.lark":
        assert shared >= 3, shared


def test_documents_cold_pass_same_masks() -> None:
    """The cold pass of sql.lark: every mask the same with the sharing and without."""
    sql_cold_pass_same(_core.verdict_share_enable)


# A chain of levels, loosest first: a level either only ends the next (`l1 ::= l2`, the rule
# whose upward chart is its caller's plus an item that only completes) or reads an operator
# between two of the next (`l1 ::= l2 (ws "+" ws l2)*`); the last level's atoms are names,
# numbers and a bracketed first level.
CHAIN_OPS = ("+", "*", "-", "<", "&", "|")


@st.composite
def chain_grammars(draw: st.DrawFn) -> str:
    n = draw(st.integers(min_value=2, max_value=6))
    ws = draw(st.sampled_from(("[ ]*", "[ \\t]*", '" "?')))
    lines = ['root ::= l1 (ws "," ws l1)*']
    for k in range(1, n + 1):
        nxt = f"l{k + 1}" if k < n else "atom"
        if draw(st.booleans()):
            lines.append(f"l{k} ::= {nxt}")
        else:
            op = draw(st.sampled_from(CHAIN_OPS))
            lines.append(f'l{k} ::= {nxt} (ws "{op}" ws {nxt})*')
    lines.append('atom ::= [a-c]+ | [0-9]+ | "(" ws l1 ws ")" | "-" atom')
    lines.append(f"ws ::= {ws}")
    return "\n".join(lines) + "\n"


CHAIN_PIECES = EXPR_PIECES + (b" <", b"&", b" |", b"a*", b"*b", b" a-", b"b<", b"1&", b"a|b", b"a, b")


@settings(max_examples=40, deadline=None)
@given(chain_grammars(), vocabularies(CHAIN_PIECES))
def test_chain_grammars_same_entries(text: str, v: Vocab) -> None:
    """Random chains of levels: entries on = off = whole walks'."""
    assert_share_same(cfgmask.Grammar.from_gbnf(text), _vocab(v), plain=True)


def test_pass_through_chain_shares() -> None:
    """A chain whose levels only end the one above shares its verdicts (the mechanism fires), and
    its entries are those of the sharing off and of whole walks."""
    text = (
        'root ::= l1 (ws "," ws l1)*\nl1 ::= l2\nl2 ::= l3 (ws "+" ws l3)*\nl3 ::= l4\nl4 ::= atom\n'
        'atom ::= [a-c]+ | "(" ws l1 ws ")"\nws ::= [ ]*\n'
    )
    toks = sorted({bytes([b]) for b in range(32, 127)} | set(CHAIN_PIECES))
    vocab = cfgmask.Vocabulary.from_token_bytes(toks)
    # with the kernel keys (test_kern_share.py) every rest here is keyed by its first byte's
    # kernel and no rule's own verdicts are asked, and with pass-through levels taken whole
    # (test_compose_pass.py) `l1`, `l3` and `l4` are not filtered at all: both off, so the rules'
    # classes are made
    with core_switch(_core.kern_share_enable, False), core_switch(_core.compose_pass_enable, False):
        shared = assert_share_same(cfgmask.Grammar.from_gbnf(text), vocab, plain=True)
    assert shared > 0, "no rule shared another's verdicts"


@settings(max_examples=30, deadline=None)
@given(expression_grammars(), vocabularies(EXPR_PIECES))
def test_expression_grammars_same_entries(text: str, v: Vocab) -> None:
    assert_share_same(cfgmask.Grammar.from_gbnf(text), _vocab(v))
