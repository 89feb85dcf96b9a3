"""Run walks (csrc/loops.c, ``cm_run_walk``) give the very entries of plain walks.

A name -- a state that calls nothing and loops to itself on a set of bytes, its run -- is
walked once per (run bytes, trie range) and kept by the vocabulary; every state that enters
the name after a loop's exit or a byte edge takes the tokens that end inside the run from that
walk and walks on only the subtrees that leave it.  Here every state's entry is compared bit for
bit with the whole walks (``tests/test_entries.py``'s ``WALKS_ONLY``) and with run walks off, on
the shipped grammars with Llama-3 and on random grammars and vocabularies, with the states asked
for forward, backward and in a random order (a run walk kept by the vocabulary is found by a
later state, of this grammar or another).
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import cfgmask
from cfgmask import ir
from cfgmask.compile.strategy import Strategy

from .strategies import Vocab, grammars, vocabularies
from .test_engine_differential import _vocab
from .test_entries import WALKS_ONLY, entries, shipped

EVERY_RUN = Strategy(run_walks=1)  # every range that enters a name, however few entries it holds
RUNS_OFF = Strategy(run_walks=0)


def _entries_in(
    compiled: cfgmask.CompiledGrammar, order: list[int]
) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    return {s: compiled._handle.entry(s) for s in order}


def assert_run_entries(
    g: cfgmask.Grammar | ir.Grammar, vocab: cfgmask.Vocabulary, strategy: Strategy, seed: int
) -> dict:
    """Every state's entry with `strategy`, asked forward, backward and shuffled (each in a fresh
    grammar; the vocabulary keeps its run walks between them), equal to the whole walks' and to
    the entries with run walks off; the forward build's stats."""
    cfgmask.clear_caches()
    slow = entries(cfgmask.compile(g, vocab, _strategy=WALKS_ONLY))
    off = entries(cfgmask.compile(g, vocab, _strategy=RUNS_OFF))
    n = len(slow)
    shuffled = list(range(n))
    random.Random(seed).shuffle(shuffled)
    stats: dict = {}
    for label, order in (
        ("forward", list(range(n))),
        ("backward", list(reversed(range(n)))),
        ("shuffled", shuffled),
    ):
        compiled = cfgmask.compile(g, vocab, _strategy=strategy)
        fast = _entries_in(compiled, order)
        for s in range(n):
            for ref, name in ((slow[s], "whole walk"), (off[s], "run walks off")):
                assert np.array_equal(fast[s][0], ref[0]), (
                    f"{label} state {s}: accepted tokens differ from {name}"
                )
                assert np.array_equal(fast[s][1], ref[1]), (
                    f"{label} state {s}: uncertain tokens differ from {name}"
                )
        stats = stats or compiled.stats
    return stats


@pytest.mark.parametrize("name", ["c.gbnf", "sql.gbnf", "arithmetic.gbnf", "json.gbnf", "sql.lark"])
def test_shipped_grammars_run_walks_same_entries(name: str) -> None:
    stats = assert_run_entries(shipped(name), cfgmask.Vocabulary.llama3(), Strategy(), seed=len(name))
    if name in ("c.gbnf", "sql.gbnf"):  # identifiers after blanks and keywords: names entered by the thousand
        assert stats["run_walks"] > 0, stats


def test_run_walks_found_by_another_grammar() -> None:
    """The vocabulary keeps the walks: a second grammar with the same names walks none of them
    again, and its entries are still whole walks'."""
    vocab = cfgmask.Vocabulary.llama3()
    a = 'root ::= "int" [ ]+ [a-z_] [a-z0-9_]* ";"'
    b = 'root ::= "let" [ ]+ [a-z_] [a-z0-9_]* "=" [0-9]+'
    cfgmask.clear_caches()
    first = cfgmask.compile(cfgmask.Grammar.from_gbnf(a), vocab)
    entries(first)
    assert first.stats["run_walks"] > 0, first.stats
    second = cfgmask.compile(cfgmask.Grammar.from_gbnf(a.replace("int", "var")), vocab)
    entries(second)
    assert second.stats["vocab_run_walks"] > 0 and second.stats["run_walks"] == 0, second.stats
    for text in (a, b):
        assert_run_entries(cfgmask.Grammar.from_gbnf(text), vocab, Strategy(), seed=1)


# Names after blanks, keywords and punctuation, some ending the rule (their run may be followed
# by what the caller reads next), some not; blanks that are runs themselves; a run whose bytes
# may follow its rule (a name then a digit) so that the exit flag is raised inside it and the
# state is walked the plain way.
NAMES = """root ::= ws item ( ws {sep} ws item )* ws
item ::= {items}
ws ::= {ws}
"""
NAME_ITEMS = (
    "[a-c_] [a-c0-9_]*",
    '"k" [ ]+ [a-c]+',
    '[a-c]+ ws "(" ws ")"',
    '"(" ws item ws ")"',
    "[0-9]+ [a-c]?",
    '[a-c]+ "." [a-c]+',
    "name [0-9]",
)
NAME_WS = ("[ ]*", "[ \\t]*", '" "?', "[ ]{0,2}", "[ ]+")
NAME_PIECES = (
    b" ", b"  ", b"a", b"ab", b"abc", b" a", b" ab", b"a(", b"ab(", b" a(", b"()", b"(",
    b")", b",", b", ", b"a,", b" k", b"k ", b"k a", b"1", b"12", b"a1", b"_a", b"a.b", b"a.",
    b".b", b"\t", b" \ta", b"ab ", b"a b", b"k", b"1a", b"a )", b";",
)  # fmt: skip


@st.composite
def name_grammars(draw: st.DrawFn) -> str:
    items = draw(st.lists(st.sampled_from(NAME_ITEMS), min_size=1, max_size=4, unique=True))
    if all("item" in i or "name" in i for i in items):
        items.append("[a-c]+")  # a base case
    text = NAMES.format(
        sep=draw(st.sampled_from(('","', '";"', "[,;]"))),
        items=" | ".join(items),
        ws=draw(st.sampled_from(NAME_WS)),
    )
    return text + "name ::= [a-c0-9]+\n" if any("name" in i for i in items) else text


@given(name_grammars(), vocabularies(NAME_PIECES), st.integers(0, 2**16))
def test_name_grammars_run_walks_same_entries(text: str, v: Vocab, seed: int) -> None:
    g = cfgmask.Grammar.from_gbnf(text)
    assert_run_entries(g, _vocab(v), EVERY_RUN, seed)


@given(grammars(), vocabularies(), st.integers(0, 2**16))
def test_random_grammars_run_walks_same_entries(g: ir.Grammar, v: Vocab, seed: int) -> None:
    vocab = _vocab(v)
    try:
        cfgmask.compile(g, vocab)
    except cfgmask.GrammarError:
        return  # an empty language (test_engine_differential checks when)
    assert_run_entries(g, vocab, EVERY_RUN, seed)


def test_run_walks_off_same_masks() -> None:
    """The knob off gives the same masks at every step of a C document (fed byte by byte, so
    that names are entered after blanks, keywords and punctuation alike)."""
    g = shipped("c.gbnf")
    vocab = cfgmask.Vocabulary.llama3()
    text = b"int main(void) {\n    int count_2 = 0;\n    return count_2 + x1;\n}\n"
    tokens = [vocab.token_id(bytes([b])) for b in text]
    masks = []
    for strategy in (Strategy(), RUNS_OFF):
        cfgmask.clear_caches()
        compiled = cfgmask.compile(g, vocab, _strategy=strategy)
        m = cfgmask.Matcher(compiled)
        bitmask = cfgmask.allocate_bitmask(1, len(vocab))
        rows = []
        for t in tokens:
            m.fill_bitmask(bitmask, 0)
            rows.append(bitmask[0].copy())
            assert m.accept_token(t)
        masks.append(rows)
        if strategy.run_walks:
            assert compiled.stats["run_walks"] > 0, compiled.stats
    for i, (a, b) in enumerate(zip(*masks, strict=True)):
        assert np.array_equal(a, b), f"step {i}: masks differ"
