"""A level that only passes its callee on takes that callee's entry whole (csrc/compose.c,
pass_through; ``_core.compose_pass_enable``).

A state that calls one rule R and nothing else, returning to a final state that does nothing
either (sql.lark's ``?expr: or_expr``: rule 10's start calls rule 22 and ends), is R under another
name: where R returns to that state alone and shares its rule's FOLLOW, the state's entry is R's,
accepted tokens and filtered uncertain list alike, instead of R's uncertain tokens listed through
its own chart and filtered again.  Every state's entry with the switch on must equal it off (and
whole walks'), the masks along bench_gbnf's sql.lark documents from cold caches the same, and
expression chains of pass-through levels over random vocabularies the same."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cfgmask
from cfgmask import _core
from cfgmask.compile.strategy import Strategy

from .test_entries import assert_switch_same_entries, shipped
from .test_filter_stop_skip import sql_cold_pass_same


def assert_pass_same(
    g: cfgmask.Grammar,
    vocab: cfgmask.Vocabulary,
    *,
    plain: bool = False,
    strategy: Strategy | None = None,
    limits: cfgmask.CompileLimits | None = None,
) -> int:
    """Entries with pass-through levels taken whole equal to them walked (and, plain, to whole
    walks'); how many were taken."""
    return assert_switch_same_entries(
        _core.compose_pass_enable,
        _core.compose_pass_taken,
        g,
        vocab,
        what="pass-through levels walked",
        plain=plain,
        limits=limits,
        strategy=strategy,
    )


@pytest.mark.parametrize("name", ["sql.lark", "c.gbnf", "json.gbnf", "arithmetic.gbnf", "sql.gbnf"])
def test_shipped_grammars_same_entries(name: str) -> None:
    """Every state's entry with Llama-3; sql.lark has such a level (`?expr: or_expr`)."""
    taken = assert_pass_same(shipped(name), cfgmask.Vocabulary.llama3())
    if name == "sql.lark":
        assert taken >= 1, taken


def test_documents_cold_pass_same_masks() -> None:
    """The cold pass of sql.lark: every mask the same with the levels taken whole and walked."""
    sql_cold_pass_same(_core.compose_pass_enable)


def _random_vocab(seed: int) -> cfgmask.Vocabulary:
    """Operands, operators, brackets and blanks run together, so that a level's callee completes
    inside tokens that go on in the levels above (or in no level)."""
    rng = np.random.default_rng(seed)
    parts = [
        b"a",
        b"b1",
        b"12",
        b"x",
        b"(",
        b")",
        b"+",
        b"-",
        b"*",
        b" ",
        b"  ",
        b",",
        b";",
        b"not ",
        b"or",
        b"and",
    ]
    toks = {bytes([b]) for b in range(256)}
    for n in rng.integers(1, 6, 1500):
        toks.add(b"".join(parts[int(i)] for i in rng.integers(0, len(parts), int(n))))
    return cfgmask.Vocabulary.from_token_bytes(sorted(toks))


# Expression chains whose levels only pass on (`?expr: or_expr`), each level too big to inline
# or not, in Lark (with ignored blanks and a keyword's lookahead) and in GBNF.
PASS_LARK = [
    'start: expr (";" expr)*\n?expr: or_expr\n?or_expr: and_expr ("or" and_expr)*\n'
    '?and_expr: not_expr ("and" not_expr)*\n?not_expr: NOT not_expr | sum\n?sum: atom (("+"|"-") atom)*\n'
    'atom: NAME | NUMBER | "(" expr ")" | NAME "(" expr ("," expr)* ")"\nNOT: /not(?!\\w)/i\n'
    "NAME: /[a-z_][a-z0-9_]*/i\nNUMBER: /[0-9]+/\n%import common.WS\n%ignore WS\n",
    'start: top ("," top)*\ntop: outer\n?outer: inner\n?inner: sum\n?sum: atom ("+" atom)*\n'
    'atom: NAME | "(" top ")"\nNAME: /[a-z][a-z0-9]*/\n%import common.WS\n%ignore WS\n',
]
PASS_GBNF = [
    'root ::= expr (";" expr)*\nexpr ::= orx\norx ::= andx (" or " andx)*\nandx ::= sum ("and" sum)*\n'
    'sum ::= atom (("+" | "-" | " ") atom)*\natom ::= [a-z] [a-z0-9]* | [0-9]+ | "(" expr ")"\n',
]
# every rule an automaton of its own: each level a state that calls the next
NO_INLINE = cfgmask.CompileLimits(inline_max_states=0, inline_shared_states=0)
PASS_GRAMMARS = [cfgmask.Grammar.from_lark(t) for t in PASS_LARK] + [
    cfgmask.Grammar.from_gbnf(t) for t in PASS_GBNF
]


@pytest.mark.parametrize("index", range(len(PASS_GRAMMARS)))
@pytest.mark.parametrize("seed", range(3))
def test_random_vocab_same_entries(index: int, seed: int) -> None:
    """Every state's entry over random vocabularies: on = off = whole walks, with nothing inlined
    (every level a rule of its own) and by default."""
    g, vocab = PASS_GRAMMARS[index], _random_vocab(seed)
    taken = assert_pass_same(g, vocab, plain=True, limits=NO_INLINE)
    assert taken >= 1 or index == 2, taken
    assert_pass_same(g, vocab, plain=True)


@settings(max_examples=25, deadline=None)
@given(
    depth=st.integers(1, 4),
    ops=st.lists(st.sampled_from(["+", "-", "*", ",", "and"]), min_size=1, max_size=4),
    seed=st.integers(0, 2**16),
)
def test_hypothesis_chains(depth: int, ops: list[str], seed: int) -> None:
    """Chains of 1-4 pass-through levels over an operator level, random vocabularies: on = off.
    (Not against whole walks: on main, with the switch off, `?l1: atom ("and" atom)*` over seed 111
    gives a composed entry whose uncertain list differs from the whole walk's.)"""
    levels = "".join(f"?l{i}: l{i + 1}\n" for i in range(depth))
    alts = " | ".join(f'"{o}"' for o in dict.fromkeys(ops))
    text = (
        f'start: l0 (";" l0)*\n{levels}?l{depth}: atom (({alts}) atom)*\n'
        f'atom: NAME | "(" l0 ")"\nNAME: /[a-z][a-z0-9]*/\n%import common.WS\n%ignore WS\n'
    )
    g = cfgmask.Grammar.from_lark(text)
    assert_pass_same(g, _random_vocab(seed), limits=NO_INLINE)
