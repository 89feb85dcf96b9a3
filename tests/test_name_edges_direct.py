"""A Lark name run's letter edges walked where they are met (csrc/compose.c, edge_shared;
``_core.name_edges_direct_enable``).

A composed entry's byte edge s -b-> y into a run that loops on b and calls a lookahead marker
keeps the walk of b's subtree from y per (y, b) (``Strategy.share_edges``), for the blank runs of
Lark's %ignore.  A Lark name inlined (sql.lark's NAME) is such a run too, looping on its letters
before the marker that ends it; its ~20 letters each kept a small walk of their own (a bitset
made and read back into ids).  With the switch on those letters are walked into the entry
directly; the blanks are kept as before.  Every state's entry with it on must equal it off (and
whole walks'), the masks along bench_gbnf's sql.lark documents from cold caches the same, and
random vocabularies over Lark grammars with names, keywords and ignored blanks the same."""

from __future__ import annotations

import numpy as np
import pytest

import cfgmask
from cfgmask import _core
from cfgmask.compile.strategy import Strategy

from .helpers import core_switch, same_entries
from .test_entries import NAME_SKIP_GRAMMARS, SHARED_EDGE_LARK, WALKS_ONLY, entries, shipped
from .test_filter_stop_skip import sql_cold_pass_same


def _entries(g: cfgmask.Grammar, vocab: cfgmask.Vocabulary, on: bool, strategy: Strategy) -> tuple:
    """Every state's entry with the switch on or off; the edges walked directly, the walks kept."""
    with core_switch(_core.name_edges_direct_enable, on):
        before = _core.name_edges_direct()
        compiled = cfgmask.compile(g, vocab, _strategy=strategy)
        got = entries(compiled)
        return got, _core.name_edges_direct() - before, compiled.stats["tail_walks"]


def assert_direct_same(
    g: cfgmask.Grammar, vocab: cfgmask.Vocabulary, *, plain: bool = False, strategy: Strategy | None = None
) -> int:
    """Entries with the letter edges walked directly equal to them kept (and, plain, to whole
    walks'); how many edges were walked directly."""
    strategy = strategy or Strategy()
    on, direct, kept_on = _entries(g, vocab, True, strategy)
    off, none, kept_off = _entries(g, vocab, False, strategy)
    assert none == 0, "letter edges walked directly with the switch off"
    assert kept_on <= kept_off, (kept_on, kept_off)
    same_entries(on, off, "letter edges kept")
    if plain:
        same_entries(on, entries(cfgmask.compile(g, vocab, _strategy=WALKS_ONLY)), "whole walks")
    return direct


@pytest.mark.parametrize("name", ["sql.lark", "c.gbnf"])
def test_shipped_grammars_same_entries(name: str) -> None:
    """Every state's entry with Llama-3; sql.lark walks its name runs' letters directly, c.gbnf
    (no lookahead markers) never keeps an edge's walk and so has none."""
    direct = assert_direct_same(shipped(name), cfgmask.Vocabulary.llama3())
    if name == "sql.lark":
        assert direct >= 20, direct
    else:
        assert direct == 0, direct


def test_documents_cold_pass_same_masks() -> None:
    """The cold pass of sql.lark: every mask the same with the letter edges walked directly and
    kept."""
    sql_cold_pass_same(_core.name_edges_direct_enable)


def _random_vocab(seed: int) -> cfgmask.Vocabulary:
    """Names of every length (a letter, then letters, digits, `_`), alone, after a blank, a quote,
    a dot, a bracket or a dash, and running into an operator, a bracket or a non-ASCII letter
    (an alias may follow a name with no blank)."""
    rng = np.random.default_rng(seed)
    letters = np.frombuffer(b"abcsxyzSELECTelt_019", dtype=np.uint8)
    names = [letters[rng.integers(0, letters.size, int(n))].tobytes() for n in rng.integers(1, 14, 1500)]
    before = [b"", b" ", b'"', b"x", b"_", b".", b"\t", b"(", b"-"]
    after = [b"", b"", b"", b"(", b")", b",", b";", b" .", b'"', b"-", b"+", b"\xc3\xa9ab"]
    toks = {bytes([b]) for b in range(256)}
    for name in names:
        toks.add(before[int(rng.integers(len(before)))] + name + after[int(rng.integers(len(after)))])
        toks.add(name)
    return cfgmask.Vocabulary.from_token_bytes(sorted(toks))


# Lark grammars whose rules start with an inlined name (a run before its marker): an alias after
# an expression, a qualified name, a keyword that may not run into a name.
NAME_LARK = [
    NAME_SKIP_GRAMMARS[0],
    *(cfgmask.Grammar.from_lark(text) for text in SHARED_EDGE_LARK),
    cfgmask.Grammar.from_lark(
        'start: item ("," item)*\nitem: NAME "." "*" | expr (AS? NAME)?\n?expr: atom ("+" atom)*\n'
        'atom: qname | NUMBER | "(" expr ")"\nqname: NAME ("." NAME)?\nAS: /as(?!\\w)/i\n'
        "NAME: /[a-z_][a-z0-9_]*/i\nNUMBER: /[0-9]+/\n%import common.WS\n%ignore WS\n"
    ),
]


@pytest.mark.parametrize("index", range(len(NAME_LARK)))
@pytest.mark.parametrize("seed", range(3))
def test_random_vocab_same_entries(index: int, seed: int) -> None:
    """Every edge's walk kept however few tokens its byte leads (``share_edges=1``), and by
    default: on = off = whole walks."""
    g, vocab = NAME_LARK[index], _random_vocab(seed)
    direct = assert_direct_same(g, vocab, plain=True, strategy=Strategy(share_edges=1))
    if index == len(NAME_LARK) - 1:
        assert direct > 0, "no name run's letter walked directly"
    assert_direct_same(g, vocab)
