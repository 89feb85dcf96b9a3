"""A finished DFA's rows of at most 64 classes are walked from their run starts (one pass a row,
``cm_run_starts``) where a walk pushes each run's target: ``cm_dfa_can_accept``'s full walks of a
rule not productive yet (csrc/dfa.c) and the copies of a DFA into a caller's NFA (csrc/thompson.c,
``tb_embed``).  The automata, tables and masks are those of the walks that scan at every run
(``_core.dfa_walk_starts_enable(False)``, the reference), and the core's counter shows the rows
were read that way."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager

from hypothesis import given

import cfgmask
from cfgmask import _core
from cfgmask.frontends.gbnf import parse_gbnf

from .helpers import core_switch
from .test_compile_passes import _outcome, _rule_dfas, _tables, grammars_with_tokens
from .test_dfa_runs import NUMBERS  # `num` inlined into five callers: its DFA copied into each
from .test_direct_loops import assert_corpus_masks_same

# b calls a, which the productive pass has not reached when it asks b first (it runs backwards
# over the breadth-first order): b's DFA is walked in full, its rows read from their starts
RECURSIVE = r"""
root ::= a | "{" b "}"
a ::= "x" b | "y" [0-9a-f]{1,3} | "z" [a-zA-Z_]+
b ::= "[" a ("," a)* "]" | "<" c ">"
c ::= [^<>\x00-\x1f]* a
"""


def _starts(on: bool) -> AbstractContextManager[None]:
    return core_switch(_core.dfa_walk_starts_enable, on)


def _both(fn: Callable[[], object]) -> tuple[object, object, int]:
    """fn() with the walks from run starts (and how many rows were read so), then scanning."""
    before = _core.dfa_walk_starts_rows()
    got = _outcome(fn)
    rows = _core.dfa_walk_starts_rows() - before
    with _starts(False):
        before = _core.dfa_walk_starts_rows()
        want = _outcome(fn)
        assert _core.dfa_walk_starts_rows() == before  # off: no row read that way
    return got, want, rows


def test_full_walks_read_the_starts_and_give_the_same_tables() -> None:
    g = parse_gbnf(RECURSIVE)
    got, want, rows = _both(lambda: _tables(g, True))
    assert got == want
    assert rows > 0


def test_full_walks_give_the_same_automata() -> None:
    g = parse_gbnf(RECURSIVE)
    got, want, _ = _both(lambda: _rule_dfas(g, True))  # (the rules' automata: no productive pass)
    assert got == want


def test_copies_give_the_same_tables() -> None:
    g = parse_gbnf(NUMBERS)
    got, want, _ = _both(lambda: _tables(g, True))
    assert got == want
    with core_switch(_core.dfa_runs_enable, False):  # every copy walks the rows
        got, want, _ = _both(lambda: _tables(g, True))
    assert got == want


def test_unproductive_rule_is_found_both_ways() -> None:
    """A rule that never accepts (its only way out calls itself) is dropped the same way: the
    full walk finds no accepting state from the run starts either."""
    g = parse_gbnf('root ::= "a" | "b" loop\nloop ::= "(" [a-z0-9]{2} loop ")"\n')
    got, want, rows = _both(lambda: _tables(g, True))
    assert got == want
    assert rows > 0


def test_only_way_out_through_the_first_run() -> None:
    """x accepts only through its start's first run of classes (bytes 0x00-0x01), then "c": the
    upward path takes that run and then "a" into y, not productive, so the full walk decides, and
    it must read the start row's first run."""
    g = parse_gbnf('root ::= x\nx ::= [\\x00-\\x01] ("a" y | "c") | "b" y\ny ::= "(" y ")"\n')
    got, want, rows = _both(lambda: _tables(g, True))
    assert got == want
    assert not isinstance(got, tuple)  # compiled: x is productive
    assert rows > 0


def _masks(grammar: str, on: bool) -> list[bytes]:
    with _starts(on):
        cfgmask.clear_caches()
        tokens = [bytes([b]) for b in range(32, 127)] + [b"[x", b"y0", b"],", b"<z"]
        vocab = cfgmask.Vocabulary.from_token_bytes(tokens)
        m = cfgmask.Matcher(cfgmask.compile(cfgmask.Grammar.from_gbnf(grammar), vocab))
        out = []
        for ch in "{[x[y0],za]}":
            out.append(m.allowed_tokens().tobytes())
            assert m.accept_bytes(ch.encode())
        return out


def test_recursive_masks() -> None:
    assert _masks(RECURSIVE, True) == _masks(RECURSIVE, False)


def test_corpus_masks() -> None:
    """Llama-3 masks along corpus documents: the same with the walks from run starts and without."""
    assert_corpus_masks_same(_starts)


@given(grammars_with_tokens())
def test_starts_give_the_scans_automata(g) -> None:  # type: ignore[no-untyped-def]
    got, want, _ = _both(lambda: _rule_dfas(g, True))
    assert got == want


@given(grammars_with_tokens())
def test_starts_give_the_scans_tables(g) -> None:  # type: ignore[no-untyped-def]
    got, want, _ = _both(lambda: _tables(g, True))
    assert got == want
