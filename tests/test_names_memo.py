"""A flat configuration's name proof kept (csrc/flat.c, ``flat_names_ok``).

A flat walk takes a first byte's name entries (` foo`, `\\tbar`: the byte, then a name) at once
where it proves, from the configuration c after that byte, that every name goes on live
(``flat_names_live``: the configurations c reaches on name bytes, to a name entry's greatest
length, all flat and live).  The answer depends on c and the automaton only, but each walk that
met c proved it again: sql.lark's masks after `SELECT` asked 179 proofs of a few configurations.
``_core.flat_names_memo_enable`` keeps the answer in two bits of the configuration's record; a
proof that failed stays failed, as it failed before.

Every state's entry is compared with the memo off and with whole walks (tests/test_entries.py's
reference walks) on the shipped grammars with Llama-3, the masks along a C and a SQL document in
document order (the memo's answers carried from one mask's walks to the next), and hypothesis
grammars of keywords and names over vocabularies with many blank-led names (the bulk needs 64 a
first byte), names free or held to a class (proofs that hold and proofs that fail);
``_core.flat_names_memo_hits()`` shows the memo answered, and stays still when it is off.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cfgmask
from cfgmask import _core
from cfgmask.compile.strategy import Strategy

from .helpers import core_switch, masks_along, same_entries
from .test_entries import WALKS_ONLY, _longest_tokens, entries

ROOT = Path(__file__).resolve().parent.parent


def _shipped(name: str) -> cfgmask.Grammar:
    text = (ROOT / "grammars" / name).read_text()
    return cfgmask.Grammar.from_lark(text) if name.endswith(".lark") else cfgmask.Grammar.from_gbnf(text)


def _entries(
    g: cfgmask.Grammar, vocab: cfgmask.Vocabulary, on: bool, strategy: Strategy | None = None
) -> list:
    with core_switch(_core.flat_names_memo_enable, on):
        return entries(cfgmask.compile(g, vocab, _strategy=strategy or Strategy()))


def _assert_same_entries(g: cfgmask.Grammar, vocab: cfgmask.Vocabulary, walks: bool) -> int:
    """Every state's entry with the memo equal to it off and (walks) to whole walks: the memo's
    answers in the first build."""
    before = _core.flat_names_memo_hits()
    fast = _entries(g, vocab, True)
    hits = _core.flat_names_memo_hits() - before
    before = _core.flat_names_memo_hits()
    same_entries(fast, _entries(g, vocab, False), "memo off")
    assert _core.flat_names_memo_hits() == before, "the memo answered while off"
    if walks:
        same_entries(fast, _entries(g, vocab, True, WALKS_ONLY), "whole walks")
    return hits


@pytest.mark.parametrize("name", ["c.gbnf", "sql.gbnf", "arithmetic.gbnf", "json.gbnf"])
def test_shipped_grammars_same_entries(name: str) -> None:
    """c.gbnf and sql.gbnf read names after blanks at many positions: the memo answers."""
    hits = _assert_same_entries(_shipped(name), cfgmask.Vocabulary.llama3(), walks=name != "c.gbnf")
    if name in ("c.gbnf", "sql.gbnf"):
        assert hits > 0, hits


C_DOC = (
    b'#include <stdio.h>\n\nint main(void) {\n    int x = 1;\n    printf("Hello, %d\\n", x + 2);\n'
    b"    return x;\n}\n"
)
SQL_DOC = b"SELECT id, name FROM users WHERE age > 21 AND name LIKE 'a%' ORDER BY id;"
LARK_DOC = SQL_DOC


@pytest.mark.parametrize(("name", "doc"), [("c.gbnf", C_DOC), ("sql.gbnf", SQL_DOC), ("sql.lark", LARK_DOC)])
def test_documents_masks_same_in_document_order(name: str, doc: bytes) -> None:
    """A document cold, the entries built in its order (sql.lark's masks after `SELECT` ask the
    proofs that motivated the memo): the same masks as with the memo off, and it answered."""
    vocab = cfgmask.Vocabulary.llama3()
    g = _shipped(name)
    tokens = _longest_tokens(vocab, doc)
    before = _core.flat_names_memo_hits()
    with core_switch(_core.flat_names_memo_enable, True):
        fast = masks_along(cfgmask.compile(g, vocab), tokens)
    assert _core.flat_names_memo_hits() > before
    with core_switch(_core.flat_names_memo_enable, False):
        slow = masks_along(cfgmask.compile(g, vocab), tokens)
    assert len(fast) == len(slow) == len(tokens)
    for i, (a, b) in enumerate(zip(fast, slow, strict=True)):
        assert np.array_equal(a, b), f"{name}: mask {i} differs"


# Keywords and names in statements, each position reached after a blank byte from several
# states (the keyword's end, the name's, the operator's), so that walks meet the same
# configurations; NAME free or held to a class (a proof that fails on some name byte).
GRAMMAR = """root ::= ( stmt ";" ws )+
stmt ::= {kw} sp item ( ws "," ws item )* ( sp {kw2} sp item )?
item ::= name | name ws "(" ws item ws ")" | [0-9]+
name ::= {name}
sp ::= [ \\t]+
ws ::= [ \\t]*
"""
NAMES = ("[a-z_] [a-z0-9_]*", "[a-zA-Z_] [a-zA-Z0-9_]*", "[a-m] [a-m_]*", '[a-z]+ ( "_" [a-z]+ )*')


def _vocab(pieces: list[bytes]) -> cfgmask.Vocabulary:
    """Single bytes (every text reachable), the pieces, and 107 names after each blank byte."""
    stems = ["".join(p) for p in itertools.product("abmxz_", repeat=3)][:100]
    names = [f"{lead}{s}".encode() for lead in (" ", "\t") for s in stems]
    tails = zip(stems, "qAZ09y_", strict=False)
    names += [f"{lead}{s}{t}".encode() for lead in (" ", "\t") for s, t in tails]
    toks = [bytes([b]) for b in range(256)]
    seen = set(toks)
    for t in pieces + names:
        if t not in seen:
            seen.add(t)
            toks.append(t)
    return cfgmask.Vocabulary.from_token_bytes(toks, stop_token_ids=[0])


PIECES = (
    b" a", b" ab", b"sel", b"SELECT", b" FROM", b" from", b" (", b"(", b")", b" ,",
    b", ", b";", b"; ", b"12", b" x(", b"\t\t", b"  ", b" m_", b"ab;", b" 1",
)  # fmt: skip


@settings(max_examples=30, deadline=None)
@given(
    st.sampled_from(NAMES),
    st.sampled_from(('"select"', '"SELECT"', '( "sel" | "SELECT" )')),
    st.sampled_from(('"from"', '"FROM"', '"m_x"')),
    st.lists(st.sampled_from(PIECES), max_size=12, unique=True),
)
def test_random_keyword_grammars_same_entries(name: str, kw: str, kw2: str, pieces: list[bytes]) -> None:
    g = cfgmask.Grammar.from_gbnf(GRAMMAR.format(kw=kw, kw2=kw2, name=name))
    vocab = _vocab(pieces)
    _assert_same_entries(g, vocab, walks=True)


def test_random_keyword_grammar_takes_the_memo() -> None:
    """The hypothesis test's vocabulary reaches the bulk: the memo answers there too (else that
    test would compare the memo's absence with itself)."""
    g = cfgmask.Grammar.from_gbnf(GRAMMAR.format(kw='"select"', kw2='"from"', name=NAMES[0]))
    assert _assert_same_entries(g, _vocab(list(PIECES)), walks=False) > 0
