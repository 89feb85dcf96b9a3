"""Tail parts through an expression chain's levels, and a position's own names taken at once.

A composed entry's byte edge s -b-> y, where y calls an operand, takes the tokens b.T that go
through a callee R from R's *tail part*: b's subtree walked from (start(R), OUTER) at depth 1,
itself composed from start(R)'s parts one level down (csrc/compose.c).  Two shortcuts there:

*Pass-through levels* (``_core.tail_alias_enable``, ``tail_through``).  A start state with one call
and no byte of its own that any entry b.c... reads on (expr -> sum -> prod: each level's start
only calls the next) takes its callee's tail part as it is: the callee's accepted tokens, and
its uncertain ones left undecided for the first level above with parts of its own, or the
composed state's chart, to decide.

*Own names* (``_core.tail_names_enable``, ``own_names``).  A start whose own bytes read every
name's first byte (a label's or a declaration's name inline, beside callees that read names too)
accepts b's name entries (b, then a name) at once where every name goes on live from the states
those bytes reach (``cm_flat_names_after``), and walks its own bytes over the other entries only.

Both claim the very entries of the tail parts' checks at every level and of whole walks: every
state's entry is compared bit for bit with them off, with tail parts off and with whole walks, on
the shipped grammars with Llama-3 and on hypothesis grammars whose names are live, bounded or
missing digits, over vocabularies of a blank and names; the counters show each path was taken.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cfgmask
from cfgmask import _core
from cfgmask.compile.strategy import Strategy

from .helpers import core_switch, masks_along
from .test_entries import WALKS_ONLY, _longest_tokens, entries

ROOT = Path(__file__).resolve().parent.parent
EVERY_TAIL = Strategy(tail_parts=1)


@contextmanager
def _shortcuts(on: bool) -> Iterator[None]:
    with core_switch(_core.tail_alias_enable, on), core_switch(_core.tail_names_enable, on):
        yield


def _entries(g: cfgmask.Grammar, vocab: cfgmask.Vocabulary, strategy: Strategy, on: bool = True) -> list:
    with _shortcuts(on):
        return entries(cfgmask.compile(g, vocab, _strategy=strategy))


def _same(a: list, b: list, what: str) -> None:
    for s, (x, y) in enumerate(zip(a, b, strict=True)):
        assert np.array_equal(x[0], y[0]), f"{what}: state {s}: accepted tokens differ"
        assert np.array_equal(x[1], y[1]), f"{what}: state {s}: uncertain tokens differ"


def _counts() -> tuple[int, int]:
    return _core.tail_aliases(), _core.tail_names_taken()


def _assert_same_entries(
    g: cfgmask.Grammar, vocab: cfgmask.Vocabulary, strategy: Strategy, walks: bool
) -> tuple:
    """Every state's entry with both shortcuts equal to them off, to tail parts off and (walks)
    to whole walks; the shortcuts' counts in the first build."""
    before = _counts()
    fast = _entries(g, vocab, strategy)
    after = _counts()
    _same(fast, _entries(g, vocab, strategy, on=False), "shortcuts off")
    _same(fast, _entries(g, vocab, Strategy(tail_parts=0)), "tail parts off")
    if walks:
        _same(fast, _entries(g, vocab, WALKS_ONLY), "whole walks")
    return after[0] - before[0], after[1] - before[1]


def _shipped(name: str) -> cfgmask.Grammar:
    return cfgmask.Grammar.from_gbnf((ROOT / "grammars" / name).read_text())


@pytest.mark.parametrize("name", ["c.gbnf", "sql.gbnf", "arithmetic.gbnf"])
def test_shipped_grammars_same_entries(name: str) -> None:
    """c.gbnf: `item` holds a label's names inline, its callees read names too, and the
    expression chain below `statement` passes through seventeen levels; sql.gbnf: `select-item`
    and `primary` hold a column's names inline."""
    aliases, names = _assert_same_entries(
        _shipped(name), cfgmask.Vocabulary.llama3(), Strategy(), walks=name != "c.gbnf"
    )
    assert aliases > 0, (aliases, names)
    if name != "arithmetic.gbnf":
        assert names > 0, (aliases, names)


def _masks_along(g: cfgmask.Grammar, vocab: cfgmask.Vocabulary, tokens: list[int], on: bool) -> list:
    with _shortcuts(on):
        return masks_along(cfgmask.compile(g, vocab), tokens)


HELLO = b'#include <stdio.h>\n\nint main(void) {\n    printf("Hello, world!\\n");\n    return 0;\n}\n'


def test_c_document_masks_same_in_document_order() -> None:
    """The cold pass of bench_gbnf's first C document (its mask after `{\\n` composes item's tail
    parts from the label's names at once and the expression chain's levels passed through): the
    same masks as with both shortcuts off, entries built in the document's order."""
    vocab = cfgmask.Vocabulary.llama3()
    g = _shipped("c.gbnf")
    tokens = _longest_tokens(vocab, HELLO)
    before = _counts()
    fast = _masks_along(g, vocab, tokens, True)
    aliases, names = (a - b for a, b in zip(_counts(), before, strict=True))
    assert aliases > 0 and names > 0, (aliases, names)
    slow = _masks_along(g, vocab, tokens, False)
    for i, (a, b) in enumerate(zip(fast, slow, strict=True)):
        assert np.array_equal(a, b), f"mask {i} differs"


# A block shaped like c.gbnf's (inside it no position ends the document: a tail part's position
# completes no rule): a label's (or a declaration's) name inline in
# the statement's start, beside an expression chain whose levels each only call the next, over a
# vocabulary of a blank then a name (at least 64 of them: the names are taken at once from there)
# and of blanks, names and what follows them mixed.
STMT = """root ::= "{{" ws ( stmt ws )* "}}"
stmt ::= {stmt}
expr ::= sum
sum ::= prod ( ws "+" ws prod )*
prod ::= unary ( ws "*" ws unary )*
unary ::= "-" ws unary | atom
atom ::= {atoms}
ws ::= {ws}
"""
STMT_ALTS = (
    'expr ws ";"',
    '{name} ws ":"',
    '"if" ws "(" ws expr ws ")" ws stmt',
    '"int" ws {name} ws ";"',
    '{name} ws {name} ws ";"',
    '"{{" ws ( stmt ws )* "}}"',
)
STMT_ATOMS = ("{name}", "[0-9]+", '"(" ws expr ws ")"', '{name} ws "(" ws expr ws ")"')
# live on every name; every first byte but no digit after (` x1` dies); every first byte but
# names die past two bytes; not every first byte (no names at once)
STMT_NAMES = ("[a-zA-Z_] [a-zA-Z0-9_]*", "[a-zA-Z_] [a-zA-Z_]*", "[a-zA-Z_] [a-zA-Z0-9_]?", "[a-c] [a-c]?")
STMT_WS = ("[ ]*", "[ \\t]*", "[ \\n]*")

NAMES = [
    *"abcdefghijklmnopqrstuvwxyz",
    *("ab", "ba", "abc", "cab", "if", "iff", "in", "int", "inte", "x1", "a_1", "_a", "_", "A", "Ab"),
    *("foo", "bar", "baz", "i2", "n", "s", "t0", "zz", "abcdefghijklmno", "abcdefghijklmnopq"),
    *("ifx", "int_", "main", "printf", "return", "a9", "q_", "c_d", "Zz", "if_", "yes", "no", "ok", "kk"),
    *("v1", "v2", "w_", "xy", "yx", "ii", "nn", "ss", "tt", "uu", "B", "C", "Int", "IF", "_if", "__"),
]
PIECES = (
    b" ", b"  ", b"\t", b"\n", b" \t", b" a;", b" a:", b" a(", b" a)", b" (a", b" 1", b" 1;", b" -a",
    b" -", b" +", b" *", b" if(", b" int a;", b" a b;", b" ab+", b" a*b", b" {", b" }", b" a+b;",
    b"a;", b"1+", b"(", b")", b";", b":", b"+", b"*", b"-", b"{", b"}", b"0", b"1", b"9", b"a b",
)  # fmt: skip
BYTES = [bytes([c]) for c in sorted(set(b" \t\n;:()+*-{}0123456789_" + bytes(range(ord("a"), ord("z") + 1))))]


def _stmt_vocab(pieces: list[bytes]) -> cfgmask.Vocabulary:
    toks = list(
        dict.fromkeys(BYTES + [b" " + n.encode() for n in NAMES] + [n.encode() for n in NAMES[:20]] + pieces)
    )
    return cfgmask.Vocabulary.from_token_bytes(toks)


def _stmt_grammar(stmts: list[str], atoms: list[str], name: str, ws: str) -> cfgmask.Grammar:
    return cfgmask.Grammar.from_gbnf(
        STMT.format(
            stmt=" | ".join(s.format(name=f"( {name} )") for s in stmts),
            atoms=" | ".join(a.format(name=f"( {name} )") for a in atoms),
            ws=ws,
        )
    )


@pytest.mark.parametrize("name", STMT_NAMES)
def test_statement_grammar_same_entries(name: str) -> None:
    """Every statement and atom: the label's names after a blank taken at once where they are
    live (not where some die: no digit after the first byte, or past two bytes), the chain's
    levels passed through."""
    g = _stmt_grammar(list(STMT_ALTS), list(STMT_ATOMS), name, "[ ]*")
    aliases, names = _assert_same_entries(g, _stmt_vocab(list(PIECES)), EVERY_TAIL, walks=True)
    assert aliases > 0, (aliases, names)
    if name == STMT_NAMES[0]:
        assert names > 0, (aliases, names)


# A statement grammar and its vocabulary's pieces drawn (_stmt_grammar, _stmt_vocab); test_promote's too.
STMT_DRAWS = (
    st.lists(st.sampled_from(STMT_ALTS), min_size=1, max_size=4, unique=True),
    st.lists(st.sampled_from(STMT_ATOMS), min_size=1, max_size=3, unique=True),
    st.sampled_from(STMT_NAMES),
    st.sampled_from(STMT_WS),
    st.lists(st.sampled_from(PIECES), max_size=16, unique=True),
)


@settings(max_examples=40, deadline=None)
@given(*STMT_DRAWS)
def test_statement_grammars_same_entries(
    stmts: list[str], atoms: list[str], name: str, ws: str, pieces: list[bytes]
) -> None:
    if all("(" in a for a in atoms):
        atoms = [*atoms, "[0-9]+"]  # a base case
    if all("stmt" in s for s in stmts):
        stmts = [*stmts, 'expr ws ";"']
    _assert_same_entries(_stmt_grammar(stmts, atoms, name, ws), _stmt_vocab(pieces), EVERY_TAIL, walks=True)
