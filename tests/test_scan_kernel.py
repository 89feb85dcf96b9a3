"""The Earley scan's kernel (csrc/earley.c, scan_kernel) against the pure-Python reference.

A scan adds the items of the last set that read the byte without add_item's checks (room and
limits proven once a scan), keeps a kernel of a few items distinct by comparing it with the items
added so far, and goes on in the set's dedup table past them (`_core.chart_scans_hashed()` counts
those scans).  A closure taken from the chart's memo never needs the table; one computed does, and
gets the kernel put there first.  Lookahead debts are paid with the bytes a state reads
(debt_payable).  sql.lark makes kernels wide: after `SELECT` a run of `-` reads as nested
negations or as the start of a `--` comment in every rule that allows one there, so each dash adds
items, one per origin, and the entry walks of dash-run tokens leave the flat automaton for a
chart; its keywords may not run into a following letter (lookahead debts).  Masks and acceptance
along token walks, on small vocabularies, must equal the reference's.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cfgmask
from cfgmask import _core

from .helpers import mask_bools, stop_vocab
from .reference import ReferenceMatcher

SQL = (Path(__file__).resolve().parents[1] / "grammars" / "sql.lark").read_text()

PIECES = (
    b"SELECT", b"SEL", b"ECT", b"select", b"FROM", b" FROM", b" WHERE", b" t", b" ", b"\n", b"-", b"--",
    b"---", b" -", b" --", b" -------", b" " + b"-" * 30, b"-" * 8, b"-" * 16, b"-" * 16 + b"\n", b"--\n",
    b"-a", b"a", b" a", b"ab", b"a1", b"1", b" 1", b";", b"(", b")", b" (", b" *", b"*", b" *---", b",",
    b" +", b"-1", b" AS", b"ASx", b"x",
)  # fmt: skip


def _walk(ref: ReferenceMatcher, tokens: list[bytes], rng: random.Random, steps: int) -> list[int]:
    """A random viable token walk (the reference decides viability), starting with SELECT and
    favouring tokens with dashes."""
    prefix, out = b"", []
    for _ in range(steps):
        ok = [i for i, t in enumerate(tokens) if t and ref.is_prefix(prefix + t)]
        if not ok:
            break
        first = [i for i in ok if tokens[i] == b"SELECT"]
        dashy = [i for i in ok if b"-" in tokens[i]]
        i = first[0] if first and not out else rng.choice(dashy if dashy and rng.random() < 0.5 else ok)
        out.append(i)
        prefix += tokens[i]
    return out


def _replay(
    grammar: cfgmask.Grammar, walk: list[int], tokens: list[bytes], vocab: cfgmask.Vocabulary
) -> None:
    ref = ReferenceMatcher(grammar.ir)
    compiled = cfgmask.compile(grammar, vocab)
    m = cfgmask.Matcher(compiled)
    stop = len(tokens) - 1
    prefix = b""
    for t in [*walk, None]:
        expected = ref.mask(prefix, tokens, (stop,), ())
        assert mask_bools(m, vocab.size) == expected, f"prefix {prefix!r}"
        assert m.is_accepting() == ref.accepts(prefix)
        if t is None:
            break
        assert m.accept_token(t)
        prefix += tokens[t]


def test_after_select_hashed_kernels_match_reference() -> None:
    """The mask after SELECT walks the dash runs through a chart whose kernels grow an item set per
    dash: past the compared few they go on in the dedup table; the masks equal the reference's."""
    grammar = cfgmask.Grammar.from_lark(SQL)
    vocab, tokens = stop_vocab(PIECES)
    cfgmask.clear_caches()
    before = _core.chart_scans_hashed()
    _replay(grammar, [tokens.index(b"SELECT")], tokens, vocab)
    assert _core.chart_scans_hashed() > before


@pytest.mark.parametrize("seed", range(5))
def test_sql_walks_match_reference(seed: int) -> None:
    grammar = cfgmask.Grammar.from_lark(SQL)
    ref = ReferenceMatcher(grammar.ir)
    vocab, tokens = stop_vocab(PIECES)
    walk = _walk(ref, tokens, random.Random(seed), 8)
    cfgmask.clear_caches()
    before = _core.chart_scans_hashed()
    _replay(grammar, walk, tokens, vocab)
    assert _core.chart_scans_hashed() > before


def test_keyword_debts_match_reference() -> None:
    """Keywords that may not run into a letter owe a lookahead debt across their last byte;
    debt_payable tries only the bytes a state reads."""
    text = r"""
start: (KW | NAME | " ")*
KW: /(select|sel)(?!\w)/i
NAME: /[0-9]+/
"""
    pieces = (b"sel", b"select", b"s", b"e", b"l", b"ect", b"ec", b"t", b" ", b"1", b"12", b"sel1", b"selx",
              b"select ", b" sel", b"SEL", b"Sel", b"x")  # fmt: skip
    grammar = cfgmask.Grammar.from_lark(text)
    ref = ReferenceMatcher(grammar.ir)
    vocab, tokens = stop_vocab(pieces)
    for seed in range(4):
        walk = _walk(ref, tokens, random.Random(seed), 10)
        cfgmask.clear_caches()
        _replay(grammar, walk, tokens, vocab)


@settings(max_examples=12, deadline=None)
@given(st.integers(0, 2**16))
def test_sql_random_vocabularies(seed: int) -> None:
    grammar = cfgmask.Grammar.from_lark(SQL)
    ref = ReferenceMatcher(grammar.ir)
    rng = random.Random(seed)
    pieces = tuple(rng.sample(PIECES, k=rng.randint(10, len(PIECES))))
    vocab, tokens = stop_vocab(pieces)
    walk = _walk(ref, tokens, rng, 6)
    cfgmask.clear_caches()
    _replay(grammar, walk, tokens, vocab)
