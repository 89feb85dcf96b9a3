"""Loop stops of chart walks (csrc/walk.c, loop_subtree) against the pure-Python reference.

Where a chart walk's set grows along a trie path and holds a loop item (owing no debt, its state
going to itself on the next byte: sql.lark's `--` comment body), the subtree below is settled from
that item: entries whose remaining bytes all keep the loop are accepted without scans
(`_core.walk_loop_stops()` counts the subtrees), entries that leave the loop are scanned from a
reduced chart holding the loop item's closure alone (`_core.walk_loop_reduced()` counts those it
accepted), and the rest (the reduced chart died, or the loop was left at once) are scanned from the
loop's set as before, exits and FOLLOW checks included.  sql.lark after `SELECT` is the case: each
dash may start a negation or a comment, so the sets grow by an item set a dash.  Masks and
acceptance along token walks must equal the reference's, and equal the masks with the stops off.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

import cfgmask
from cfgmask import _core
from cfgmask.compile.strategy import Strategy

from .helpers import core_switch, mask_bools, stop_vocab
from .reference import ReferenceMatcher

SQL = (Path(__file__).resolve().parents[1] / "grammars" / "sql.lark").read_text()

DASH = b"-"
PIECES = (
    b"SELECT", b" FROM", b" t", b" ", b"\n", b"1", b" 1", b")", b"(", b";", b" *", b"a",
    b" " + DASH * 7, b" " + DASH * 8, b" " + DASH * 12, b" " + DASH * 30, b" " + DASH * 41,
    b" " + DASH * 8 + b"\n", b" " + DASH * 30 + b"\n", b" " + DASH * 33 + b"\n",
    DASH * 9, DASH * 9 + b"\n", DASH * 9 + b"\n\n", DASH * 10 + b"\r\n", DASH * 11 + b"*/\n",
    DASH * 10 + b"</", DASH * 16 + b"\n",
    b" " + DASH * 20 + b"\n)", b" " + DASH * 20 + b"\n1", b" " + DASH * 20 + b"\n FROM",
    b" " + DASH * 18 + b"\n\n;", b" " + DASH * 14 + b"\nx-", b" " + DASH * 9 + b"\n-1",
    b" " + DASH * 2 + b"x" * 12, b" --" + b" " * 10 + b"\n)",
    b" " + DASH * 20 + b"\n FROM t)", b" " + DASH * 22 + b"\n FROM t WHERE", b" " + DASH * 24 + b"\n) FROM",
)  # fmt: skip


def _masks(grammar: cfgmask.Grammar, walk: list[int], vocab: cfgmask.Vocabulary) -> list[list[bool]]:
    """The masks and acceptance verdicts along the walk, on a fresh compile (caches cleared)."""
    cfgmask.clear_caches()
    m = cfgmask.Matcher(cfgmask.compile(grammar, vocab))
    out = []
    for t in [*walk, None]:
        out.append([*mask_bools(m, vocab.size), m.is_accepting()])
        if t is None:
            break
        assert m.accept_token(t)
    return out


def _expected(ref: ReferenceMatcher, walk: list[int], tokens: list[bytes]) -> list[list[bool]]:
    stop, prefix, out = len(tokens) - 1, b"", []
    for t in [*walk, None]:
        out.append([*ref.mask(prefix, tokens, (stop,), ()), ref.accepts(prefix)])
        if t is None:
            break
        prefix += tokens[t]
    return out


def _walk(ref: ReferenceMatcher, tokens: list[bytes], rng: random.Random, steps: int) -> list[int]:
    """A random viable walk starting with SELECT, favouring tokens with dashes."""
    prefix, out = b"", []
    for _ in range(steps):
        ok = [i for i, t in enumerate(tokens) if t and ref.is_prefix(prefix + t)]
        if not ok:
            break
        dashy = [i for i in ok if DASH in tokens[i]]
        if not out and tokens.index(b"SELECT") in ok:
            i = tokens.index(b"SELECT")
        else:
            i = rng.choice(dashy if dashy and rng.random() < 0.6 else ok)
        out.append(i)
        prefix += tokens[i]
    return out


def _check(pieces: tuple[bytes, ...], seed: int = 0, steps: int = 1) -> tuple[int, int]:
    """Masks along a walk equal the reference's and the masks with loop stops off; returns how many
    subtrees the stops settled and how many entries reduced charts accepted, stops on."""
    grammar = cfgmask.Grammar.from_lark(SQL)
    ref = ReferenceMatcher(grammar.ir)
    vocab, tokens = stop_vocab(pieces)
    walk = _walk(ref, tokens, random.Random(seed), steps)
    stops, reduced = _core.walk_loop_stops(), _core.walk_loop_reduced()
    got = _masks(grammar, walk, vocab)
    stops, reduced = _core.walk_loop_stops() - stops, _core.walk_loop_reduced() - reduced
    assert got == _expected(ref, walk, tokens)
    with core_switch(_core.walk_loop_stop_enable, False):
        before = _core.walk_loop_stops()
        assert _masks(grammar, walk, vocab) == got
        assert _core.walk_loop_stops() == before
    return stops, reduced


def test_after_select_loop_stops_match_reference() -> None:
    """The mask after SELECT: the dash runs' subtree is settled by loop stops, some entries through
    the reduced chart (a newline ends the comment and the query goes on), dead ones (`)` after the
    newline) through the scans from the loop's set."""
    stops, reduced = _check(PIECES)
    assert stops > 0
    assert reduced > 0


@pytest.mark.parametrize("seed", range(4))
def test_sql_walks_match_reference(seed: int) -> None:
    stops, _ = _check(PIECES, seed=seed, steps=6)
    assert stops > 0


def test_only_deferred_entries() -> None:
    """Every dash run leaves the comment on a newline followed by what cannot go on: the reduced
    charts die, and the scans from the loop's set decide (rejected or uncertain as before)."""
    pieces = (b"SELECT", b" ", b"1", b")", b" " + DASH * 7,
              b" " + DASH * 20 + b"\n)", b" " + DASH * 25 + b"\n))", b" " + DASH * 30 + b"\n)(")  # fmt: skip
    stops, reduced = _check(pieces)
    assert stops > 0
    assert reduced == 0


@pytest.mark.parametrize("seed", range(3))
def test_random_vocabularies(seed: int) -> None:
    rng = random.Random(1000 + seed)
    pieces = (b"SELECT", *rng.sample(PIECES[1:], k=rng.randint(12, len(PIECES) - 1)))
    _check(pieces, seed=seed, steps=4)


def _entries(
    grammar: cfgmask.Grammar, vocab: cfgmask.Vocabulary, **strategy: bool
) -> list[tuple[list, list]]:
    """Every state's entry (accepted words, uncertain ids) of a fresh compile."""
    cfgmask.clear_caches()
    compiled = cfgmask.compile(grammar, vocab, _strategy=Strategy(**strategy))
    handle = compiled._handle
    return [(a.tolist(), b.tolist()) for a, b in (handle.entry(s) for s in range(compiled.tables.n_states))]


CHART_WALKS = {"compose_entries": False, "flat_walks": False, "share_loop_walks": False}


@pytest.mark.parametrize("strategy", [{}, CHART_WALKS])
def test_every_entry_as_without_stops(strategy: dict[str, bool]) -> None:
    """Every state's entry, accepted and uncertain tokens, equal with loop stops on and off (the
    uncertain ones are what the scans from the loop's set add back: a comment, a newline, then a
    `)` is an exit of the walk's rule where a caller reads on); with flat walks off every entry
    is a chart walk from its state."""
    grammar = cfgmask.Grammar.from_lark(SQL)
    vocab, _ = stop_vocab(PIECES)
    stops = _core.walk_loop_stops()
    on = _entries(grammar, vocab, **strategy)
    assert _core.walk_loop_stops() > stops
    with core_switch(_core.walk_loop_stop_enable, False):
        off = _entries(grammar, vocab, **strategy)
    assert any(unc for _, unc in off)
    assert on == off
