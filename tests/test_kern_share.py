"""Upward verdicts keyed by the kernel of the rest's first byte (csrc/walk.c, ``kern_key``;
``_core.kern_share_enable``).

The upward filter asks whether a rule's upward chart survives a token's rest after an exit.  When
every item of that chart's first set that reads the rest's first byte has origin CM_OUTER (no
callee predicted there reads it), the chart after that byte is a function of the kernel the byte
makes, so rules whose kernels agree share the verdict, and an empty kernel drops the rest at once.
c.gbnf's precedence ladder asks the same rests (`)`, `);\\n`, `,`) at each of its levels, whose
kernels on those bytes are one kernel.  Every state's entry with the keys on must equal them off
(and whole walks'), the masks along bench_gbnf's c and arithmetic documents from cold caches the
same, and random chains of levels the same."""

from __future__ import annotations

import pytest
from hypothesis import given, settings

import cfgmask
from cfgmask import _core

from .helpers import core_switch, masks_along, same_document_masks
from .strategies import Vocab, vocabularies
from .test_engine_differential import _vocab
from .test_entries import (
    EXPR_PIECES,
    _longest_tokens,
    assert_switch_same_entries,
    expression_grammars,
    shipped,
)
from .test_verdict_share import CHAIN_PIECES, chain_grammars


def assert_kern_same(g: cfgmask.Grammar, vocab: cfgmask.Vocabulary, *, plain: bool = False) -> int:
    """Entries with the keys on equal to them off (and, plain, to whole walks'); how many rests the
    keys answered (from a kernel's verdicts or dropped by an empty one)."""
    return assert_switch_same_entries(
        _core.kern_share_enable,
        lambda: sum(_core.kern_counts()),
        g,
        vocab,
        what="kernel keys off",
        plain=plain,
    )


@pytest.mark.parametrize("name", ["c.gbnf", "json.gbnf", "arithmetic.gbnf", "sql.gbnf"])
def test_shipped_grammars_same_entries(name: str) -> None:
    """Every state's entry with Llama-3; c.gbnf's ladder answers rests from its kernels."""
    used = assert_kern_same(shipped(name), cfgmask.Vocabulary.llama3())
    if name == "c.gbnf":
        assert used >= 100, used


@pytest.mark.parametrize("name", ["c", "arithmetic"])
def test_documents_cold_pass_same_masks(name: str) -> None:
    """bench_gbnf's cold pass of a grammar: compiled once, its documents in order from cold
    caches; every mask the same with the keys and without."""
    from benchmarks.documents import DOCUMENTS

    vocab = cfgmask.Vocabulary.llama3()
    g = shipped(f"{name}.gbnf")
    docs = [_longest_tokens(vocab, d.encode()) for d in DOCUMENTS[name]()]
    out = {}
    for on in (True, False):
        with core_switch(_core.kern_share_enable, on):
            compiled = cfgmask.compile(g, vocab)
            out[on] = [masks_along(compiled, doc) for doc in docs]
    same_document_masks(out[True], out[False], docs)


@settings(max_examples=40, deadline=None)
@given(chain_grammars(), vocabularies(CHAIN_PIECES))
def test_chain_grammars_same_entries(text: str, v: Vocab) -> None:
    """Random chains of levels: entries on = off = whole walks'."""
    assert_kern_same(cfgmask.Grammar.from_gbnf(text), _vocab(v), plain=True)


# A ladder whose levels each read their own operator: a level's upward first set is the one
# above's plus its operator's items, so on `)` and `,` (read by no level, and by no callee
# predicted there) every level's kernel is one kernel.  After an atom a call's `post` is
# predicted in the first set (origin 0): a rest led by `(` or `[` is read by that callee, each
# rule's own verdict (taken by the kernel of the CM_OUTER items alone, no item reads it and every
# such rest would die).  Ten levels: only rules whose upward first set reads at least
# CM_KERN_MIN_OUTER (10) bytes by items of origin CM_OUTER are keyed.
_OPS = "|&^=<>+*/%"
LADDER = (
    'root ::= l0 (ws "," ws l0)*\n'
    + "".join(f'l{i} ::= l{i + 1} (ws "{op}" ws l{i + 1})*\n' for i, op in enumerate(_OPS[:-1]))
    + f'l{len(_OPS) - 1} ::= call (ws "{_OPS[-1]}" ws call)*\ncall ::= atom post*\n'
    'post ::= "(" ws l0 ws ")" | "[" ws l0 ws "]"\n'
    'atom ::= [a-c]+ | [0-9]+ | "(" ws l0 ws ")" | "-" atom\nws ::= [ ]*\n'
)
_LADDER_TEXTS = "a)|a),|1)|b),(|a,|a, b|1+|a )| )|a)*|a-|(a|a*b)|a(|a(b)|b)(|a)[|1(|(a)(|a[1]|](|a)%|1)/|b)<"
LADDER_PIECES = tuple(p.encode() for p in _LADDER_TEXTS.split("|"))


def test_ladder_shares() -> None:
    """The ladder's levels answer rests from each other's kernels (the mechanism fires), and its
    entries are those of the keys off and of whole walks."""
    toks = sorted({bytes([b]) for b in range(32, 127)} | set(LADDER_PIECES) | set(CHAIN_PIECES))
    vocab = cfgmask.Vocabulary.from_token_bytes(toks)
    used = assert_kern_same(cfgmask.Grammar.from_gbnf(LADDER), vocab, plain=True)
    assert used > 0, "no rest answered from a kernel"


@settings(max_examples=30, deadline=None)
@given(vocabularies(LADDER_PIECES + CHAIN_PIECES))
def test_ladder_random_vocab_same_entries(v: Vocab) -> None:
    """The ladder over random vocabularies: entries on = off = whole walks'."""
    assert_kern_same(cfgmask.Grammar.from_gbnf(LADDER), _vocab(v), plain=True)


@settings(max_examples=30, deadline=None)
@given(expression_grammars(), vocabularies(EXPR_PIECES))
def test_expression_grammars_same_entries(text: str, v: Vocab) -> None:
    assert_kern_same(cfgmask.Grammar.from_gbnf(text), _vocab(v))
