"""Upward verdicts keyed by kernels in more rules (csrc/verdict.c, ``cm_kern_near_key``;
``_core.kern_wide_enable``).

gx46's kernel keys (test_kern_share.py) share a rest's upward verdict between rules whose
upward first sets make the same kernel from the rest's first byte, where only items of origin
CM_OUTER read that byte and the grammar owes no lookahead debts.  Wide keys also key a grammar
with debts (a kernel's items keep the debts they owed) and a byte that a callee predicted in the
first set reads (keyed with the items of the first set the chart can read again: the waiters of
such callees, closed).  Every state's entry with them on must equal them off (and whole walks'),
the masks along bench_gbnf's documents from cold caches the same, and random ladders the same."""

from __future__ import annotations

import pytest
from hypothesis import given, settings

import cfgmask
from cfgmask import _core

from .helpers import core_switch, masks_along, same_document_masks
from .strategies import Vocab, vocabularies
from .test_engine_differential import _vocab
from .test_entries import _longest_tokens, assert_switch_same_entries, shipped
from .test_kern_share import LADDER, LADDER_PIECES
from .test_verdict_share import CHAIN_PIECES


def assert_wide_same(
    g: cfgmask.Grammar, vocab: cfgmask.Vocabulary, *, plain: bool = False
) -> tuple[int, int]:
    """Entries with wide keys on equal to them off (and, plain, to whole walks'); how many keys
    they made (near, with debts)."""
    before = _core.kern_wide_counts()
    counter = lambda: sum(_core.kern_wide_counts())  # noqa: E731
    assert_switch_same_entries(_core.kern_wide_enable, counter, g, vocab, what="wide keys off", plain=plain)
    after = _core.kern_wide_counts()
    return after[0] - before[0], after[1] - before[1]


@pytest.mark.parametrize("name", ["sql.lark", "c.gbnf", "sql.gbnf"])
def test_shipped_grammars_same_entries(name: str) -> None:
    """Every state's entry with Llama-3; sql.lark (debts) keys its expression chain's rests."""
    near, debts = assert_wide_same(shipped(name), cfgmask.Vocabulary.llama3())
    if name == "sql.lark":
        assert near > 0 and debts > 0, (near, debts)


@pytest.mark.parametrize("name", ["sql.lark", "c"])
def test_documents_cold_pass_same_masks(name: str) -> None:
    """bench_gbnf's cold pass of a grammar: compiled once, its documents in order from cold
    caches; every mask the same with wide keys and without."""
    from benchmarks.documents import DOCUMENTS

    vocab = cfgmask.Vocabulary.llama3()
    g = shipped(name if name.endswith(".lark") else f"{name}.gbnf")
    docs = [_longest_tokens(vocab, d.encode()) for d in DOCUMENTS[name.removesuffix(".lark")]()]
    out = {}
    for on in (True, False):
        with core_switch(_core.kern_wide_enable, on):
            compiled = cfgmask.compile(g, vocab)
            out[on] = [masks_along(compiled, doc) for doc in docs]
    same_document_masks(out[True], out[False], docs)


# The ladder of test_kern_share.py with a list around it: `root` reads its items' `,` through a
# repetition that each level's upward first set predicts (origin 0), so `,`-led rests are near.
LIST_LADDER = LADDER.replace('root ::= l0 (ws "," ws l0)*\n', 'root ::= l0 more*\nmore ::= ws "," ws l0\n')

# A Lark ladder: keywords that may not run into a name owe lookahead debts.
LARK_LADDER = """
start: expr (";" expr)*
?expr: or_expr
?or_expr: and_expr (OR and_expr)*
?and_expr: sum (AND sum)*
?sum: product ("+" product)*
?product: atom ("*" atom)*
?atom: NAME | "(" expr ")" | NAME "(" expr ("," expr)* ")"
NAME: /[a-z_][a-z0-9_]*/i
OR: /or(?!\\w)/i
AND: /and(?!\\w)/i
%ignore " "
"""
_LARK_TEXTS = "a)|a),|a);|b or|or|and|ab|a b|) and|(a|a+|*b|b)*|),(|;a|a;|x)|x),|or(|and("
LARK_PIECES = tuple(p.encode() for p in _LARK_TEXTS.split("|"))


@pytest.mark.parametrize("which", ["list", "lark"])
def test_ladders_share(which: str) -> None:
    """The ladders key rests by near kernels (list) and in a grammar with debts (lark); entries
    on = off = whole walks'."""
    toks = sorted({bytes([b]) for b in range(32, 127)} | set(LADDER_PIECES + CHAIN_PIECES + LARK_PIECES))
    vocab = cfgmask.Vocabulary.from_token_bytes(toks)
    if which == "list":
        near, _ = assert_wide_same(cfgmask.Grammar.from_gbnf(LIST_LADDER), vocab, plain=True)
        assert near > 0
    else:
        _, debts = assert_wide_same(cfgmask.Grammar.from_lark(LARK_LADDER), vocab, plain=True)
        assert debts > 0


@settings(max_examples=25, deadline=None)
@given(vocabularies(LADDER_PIECES + CHAIN_PIECES))
def test_list_ladder_random_vocab_same_entries(v: Vocab) -> None:
    assert_wide_same(cfgmask.Grammar.from_gbnf(LIST_LADDER), _vocab(v), plain=True)


@settings(max_examples=25, deadline=None)
@given(vocabularies(LARK_PIECES + LADDER_PIECES))
def test_lark_ladder_random_vocab_same_entries(v: Vocab) -> None:
    assert_wide_same(cfgmask.Grammar.from_lark(LARK_LADDER), _vocab(v), plain=True)


# A deeper list ladder with a bracket inside its atoms around a list of level 12: levels 12-15
# wait for `more` there too, levels 10-11 (the shallowest keyed: CM_KERN_MIN_OUTER) do not, while
# every level predicts `more` (origin 0) on `,`: the near keys of `,` differ by those waiters
# (`,a}` lives after level 13 and dies after level 11).
_DEEP = "|&^=<>+*/%-~?:@#"
BRACKET_LADDER = (
    'root ::= l0 more*\nmore ::= ws "," ws l0\n'
    + "".join(f'l{i} ::= l{i + 1} (ws "{op}" ws l{i + 1})*\n' for i, op in enumerate(_DEEP))
    + f"l{len(_DEEP)} ::= atom\n"
    + 'atom ::= [a-c]+ | [0-9]+ | "(" ws l0 ws ")" | "{" ws l12 more* ws "}"\nws ::= [ ]*\n'
)
BRACKET_PIECES = tuple(p.encode() for p in ",a}|a,a}|{a|a}|a,b}|b),a}|{a,b}|a},|,b}}|1,a}".split("|"))


def test_bracket_ladder_waiters_differ() -> None:
    toks = sorted({bytes([b]) for b in range(32, 127)} | set(BRACKET_PIECES) | set(LADDER_PIECES))
    vocab = cfgmask.Vocabulary.from_token_bytes(toks)
    near, _ = assert_wide_same(cfgmask.Grammar.from_gbnf(BRACKET_LADDER), vocab, plain=True)
    assert near > 0


@settings(max_examples=25, deadline=None)
@given(vocabularies(BRACKET_PIECES + LADDER_PIECES))
def test_bracket_ladder_random_vocab_same_entries(v: Vocab) -> None:
    assert_wide_same(cfgmask.Grammar.from_gbnf(BRACKET_LADDER), _vocab(v), plain=True)
