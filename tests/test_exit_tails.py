"""Loop exits into an operand split into the position's parts (csrc/compose.c, exit_split).

A shared loop walk (a blank position after an operand: `multiplicative ::= unary ( ws [*/%] ws
unary )*`) or a name's run walk leaves each subtree whose byte leaves the loop to the chart of
the state z that byte leads to, from the depth after it.  Where z is a position before an operand
(after the operator: blanks, comments, then the next operand), that chart predicts the operand's
whole chain; ``_core.exit_tails_enable`` splits it into z's byte edges (walked from where they
lead, split again) and the walks of the starts z's calls stand for (a level whose start reads no
byte of its own stands for its callees: every level of an expression chain for its bottom),
their uncertain tokens decided by z's real chart.  The entries must be those of the walk from z.

Every state's entry is compared with the split off and with whole walks (the reference walks of
tests/test_entries.py) on the shipped grammars with Llama-3, the masks along a C document in
document order, and hypothesis grammars of operator chains (one or two calls at a level's start,
blanks with or without comments, operators that are prefixes of one another) over vocabularies of
blank-led operator tokens; ``_core.exit_tails()`` shows the split ran.
"""

from __future__ import annotations

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
# small vocabularies: every run walk and tail part taken, as the shipped ones take them at V = 128k
SMALL = Strategy(tail_parts=1, run_walks=1)


def _entries(g: cfgmask.Grammar, vocab: cfgmask.Vocabulary, strategy: Strategy, on: bool) -> list:
    with core_switch(_core.exit_tails_enable, on):
        return entries(cfgmask.compile(g, vocab, _strategy=strategy))


def _same(a: list, b: list, what: str) -> None:
    for s, (x, y) in enumerate(zip(a, b, strict=True)):
        assert np.array_equal(x[0], y[0]), f"{what}: state {s}: accepted tokens differ"
        assert np.array_equal(x[1], y[1]), f"{what}: state {s}: uncertain tokens differ"


def _assert_same_entries(
    g: cfgmask.Grammar, vocab: cfgmask.Vocabulary, strategy: Strategy, walks: bool
) -> int:
    """Every state's entry with the split equal to it off and (walks) to whole walks: the
    number of exits split in the first build."""
    before = _core.exit_tails()
    fast = _entries(g, vocab, strategy, True)
    split = _core.exit_tails() - before
    _same(fast, _entries(g, vocab, strategy, False), "split off")
    if walks:
        _same(fast, _entries(g, vocab, WALKS_ONLY, True), "whole walks")
    return split


def _shipped(name: str) -> cfgmask.Grammar:
    return cfgmask.Grammar.from_gbnf((ROOT / "grammars" / name).read_text())


@pytest.mark.parametrize("name", ["c.gbnf", "sql.gbnf", "arithmetic.gbnf"])
def test_shipped_grammars_same_entries(name: str) -> None:
    """c.gbnf: seventeen operator levels whose blank positions' exits lead to `ws` and the next
    level; sql.gbnf: the name runs' exits into `(` and the operand chain."""
    split = _assert_same_entries(
        _shipped(name), cfgmask.Vocabulary.llama3(), Strategy(), walks=name != "c.gbnf"
    )
    if name != "arithmetic.gbnf":
        assert split > 0, split


HELLO = b'#include <stdio.h>\n\nint main(void) {\n    printf("Hello, world!\\n");\n    return 0;\n}\n'


def _masks_along(g: cfgmask.Grammar, vocab: cfgmask.Vocabulary, tokens: list[int], on: bool) -> list:
    with core_switch(_core.exit_tails_enable, on):
        return masks_along(cfgmask.compile(g, vocab), tokens)


def test_c_document_masks_same_in_document_order() -> None:
    """bench_gbnf's first C document cold, entries built in its order (the mask after ` printf`
    splits the operator levels' exits): the same masks as with the split off."""
    vocab = cfgmask.Vocabulary.llama3()
    g = _shipped("c.gbnf")
    tokens = _longest_tokens(vocab, HELLO)
    before = _core.exit_tails()
    fast = _masks_along(g, vocab, tokens, True)
    assert _core.exit_tails() > before
    slow = _masks_along(g, vocab, tokens, False)
    for i, (a, b) in enumerate(zip(fast, slow, strict=True)):
        assert np.array_equal(a, b), f"mask {i} differs"


# An operator chain: levels loosest first, each `L{i} ::= L{i+1} ( ws OP ws L{i+1} )*` (or a
# level whose start calls two rules, as c.gbnf's assign), a prefix unary, atoms; in a block of
# statements so that the blank positions sit in loops.
CHAIN = """root ::= "{{" ws ( stmt ws )* "}}"
stmt ::= expr ws ";" | name ws ":"
expr ::= {top}
{levels}
unary ::= "-" ws unary | "!" unary | atom
atom ::= name | [0-9]+ | "(" ws expr ws ")" | name ws "(" ws expr ws ")"
name ::= [a-z_] [a-z0-9_]*
ws ::= {ws}
"""
OPS = ('"+"', '"*"', "[-+]", "[*/%]", '"/"', '"=="', '( "==" | "!=" )', '"&&"', '"&"', '","', '"<" | "<="')
WS = ("[ ]*", "[ \\t]*", '[ \\t]* ( "/*" [a-z ]* "*/" [ \\t]* )*', '[ \\n]* ( "//" [a-z ]* "\\n" [ \\n]* )*')
TAILS = (
    b"", b" ", b"  ", b"\t", b"a", b" a", b"b", b" b", b"(", b" (", b"1", b" 1", b" a)", b"a;", b" -a",
    b"-", b" a ", b" /*", b"/", b"=", b" =", b"!a", b" !", b" a;", b"ab", b" ab", b" (a", b"1)", b")",
    b" //", b"\n", b" \n a", b"a b", b"x1",
)  # fmt: skip
OP_BYTES = (b"+", b"*", b"-", b"/", b"%", b"==", b"!=", b"&&", b"&", b",", b"<", b"<=", b"=")
BYTES = [
    bytes([c])
    for c in sorted(set(b" \t\n;:()+*-/%=!&<,{}0123456789_" + bytes(range(ord("a"), ord("z") + 1))))
]


def _chain_vocab(tails: list[bytes]) -> cfgmask.Vocabulary:
    toks = [*BYTES]
    for op in OP_BYTES:
        for t in tails:
            toks += [b" " + op + t, op + t]
    toks += [b" a", b" b", b" ab", b"ab", b" 1", b"12", b" {", b" }", b" ;", b";"]
    return cfgmask.Vocabulary.from_token_bytes(list(dict.fromkeys(toks)))


def _chain_grammar(ops: list[str], pair: int | None, ws: str) -> cfgmask.Grammar:
    levels, n = [], len(ops)
    for i, op in enumerate(ops):
        below = f"l{i + 1}" if i + 1 < n else "unary"
        levels.append(f"l{i} ::= {below} ( ws ( {op} ) ws {below} )*")
    top = "l0"
    if pair is not None:  # a start with two calls: unary, and the chain from level `pair`
        levels.append(f'asg ::= unary ws "=" ws asg | l{pair}')
        top = "asg"
    return cfgmask.Grammar.from_gbnf(CHAIN.format(top=top, levels="\n".join(levels), ws=ws))


@pytest.mark.parametrize("ws", WS)
def test_chain_grammar_same_entries(ws: str) -> None:
    """Four levels, an assignment above them, every tail: exits split at every level."""
    g = _chain_grammar(['"+"', "[*/%]", '"=="', '","'], 0, ws)
    split = _assert_same_entries(g, _chain_vocab(list(TAILS)), SMALL, walks=True)
    assert split > 0, split


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.sampled_from(OPS), min_size=1, max_size=5),
    st.one_of(st.none(), st.integers(0, 4)),
    st.sampled_from(WS),
    st.lists(st.sampled_from(TAILS), min_size=1, max_size=20, unique=True),
)
def test_chain_grammars_same_entries(ops: list[str], pair: int | None, ws: str, tails: list[bytes]) -> None:
    if pair is not None:
        pair = min(pair, len(ops) - 1)
    _assert_same_entries(_chain_grammar(ops, pair, ws), _chain_vocab(tails), SMALL, walks=True)
