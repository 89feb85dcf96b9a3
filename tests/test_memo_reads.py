"""A chart's memoized closure kept by the sets it read (csrc/earley.c, ``close_memoized_k``;
``_core.chart_memo_reads_enable``).

A closure reads an older set only where one of its items completes there (or a lookahead debt
reads a set's byte), so it holds while the newest set it so read is unchanged, though the set its
kernel's newest origin names was rebuilt since; a closure that reads no older set holds in any
chart state.  A trie walk rebuilds the set a terminal began in for every token that reaches it,
and the closures inside the terminal mostly complete nothing there.  Every state's entry, and the
masks and accepts along documents, must be the same with the switch on and off; on, the counter
of closures the old rule missed must move, and stay still off."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import cfgmask
from cfgmask import _core

from .helpers import masks_along
from .test_entries import _longest_tokens, assert_switch_same_entries, shipped


def _switch(on: bool) -> None:
    cfgmask.clear_caches()  # every entry built afresh on each side
    _core.chart_memo_reads_enable(on)


def _same(g: cfgmask.Grammar, vocab: cfgmask.Vocabulary, plain: bool = False) -> int:
    return assert_switch_same_entries(
        _switch, _core.chart_memo_reads_hits, g, vocab, what="the memo by origins", plain=plain
    )


SHIPPED = ["arithmetic.gbnf", "c.gbnf", "json.gbnf", "sql.gbnf", "sql.lark"]
TAKEN = {"c.gbnf", "sql.gbnf", "sql.lark"}  # where Llama-3's entries take such closures


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_grammars_same_entries(name: str) -> None:
    hits = _same(shipped(name), cfgmask.Vocabulary.llama3())
    if name in TAKEN:
        assert hits > 0, name


DOCS = {
    "c.gbnf": b"int main(int argc, char **argv) {\n  int total = 0;\n  for (int i = 0; i < argc; i++) {\n"
    b"    total += strlen(argv[i]) * 2 + count_items(list, i);\n  }\n  return total;\n}\n",
    "sql.gbnf": b"SELECT name, COUNT(*) FROM users WHERE age > 21 AND city = 'Paris' GROUP BY name;",
    "sql.lark": b"SELECT name, COUNT(*) FROM users WHERE age > 21 AND city = 'Paris' GROUP BY name",
    "json.gbnf": b'{"name": "widget", "tags": ["a", "b"], "size": {"w": 10, "h": 2.5}, "ok": true}',
    "arithmetic.gbnf": b"(12 + x1) * 3 - foo / (4 - 2)",
}


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_document_masks_same(name: str) -> None:
    """Every mask and accept along a document, caches cleared, on and off."""
    vocab = cfgmask.Vocabulary.llama3()
    g = shipped(name)
    got, hits = [], []
    for on in (True, False):
        _switch(on)
        try:
            n0 = _core.chart_memo_reads_hits()
            compiled = cfgmask.compile(g, vocab)
            text = DOCS[name]
            assert cfgmask.Matcher(compiled).accept_bytes(text), "document outside the grammar"
            got.append(masks_along(compiled, _longest_tokens(vocab, text), final=True))
            hits.append(_core.chart_memo_reads_hits() - n0)
        finally:
            _core.chart_memo_reads_enable(True)
    assert hits[1] == 0
    if name in TAKEN:
        assert hits[0] > 0, name
    for i, (a, b) in enumerate(zip(*got, strict=True)):
        assert np.array_equal(a, b), f"{name}: mask {i} differs"


# Identifiers and numbers in an expression grammar: the closure inside an identifier completes
# the expression rules in the set the identifier began in; inside a word of keywords it does not.
EXPR = r"""
root ::= stmt ( ";" ws stmt )*
stmt ::= "let " ident ws "=" ws expr | expr
expr ::= term ( ws [-+] ws term )*
term ::= atom ( ws [*/] ws atom )*
atom ::= ident | num | "(" ws expr ws ")" | ident "(" ws expr ws ")"
ident ::= [a-z_] [a-z0-9_]*
num ::= [0-9]+ ( "." [0-9]+ )?
ws ::= " "?
"""

PIECES = [*b"abx_19.(); +-*/=", *b"let "]


@given(
    st.lists(st.lists(st.sampled_from(PIECES), min_size=1, max_size=8).map(bytes), min_size=1, max_size=60)
)
def test_hypothesis_same_entries(pieces: list) -> None:
    toks = {bytes([x]) for x in range(256)} | set(pieces)
    _same(cfgmask.Grammar.from_gbnf(EXPR), cfgmask.Vocabulary.from_token_bytes(sorted(toks)), plain=True)


def test_expr_vocab_takes_closures() -> None:
    """Words that run on inside identifiers: the counter moves."""
    toks = {bytes([x]) for x in range(256)}
    for w in (b"abc", b"ab_1", b"x1x", b"ba", b"let a", b"a*b", b"(ab", b"19", b"1.9", b"ab)"):
        toks |= {w, w + b" ", b" " + w}
    hits = _same(
        cfgmask.Grammar.from_gbnf(EXPR), cfgmask.Vocabulary.from_token_bytes(sorted(toks)), plain=True
    )
    assert hits > 0
