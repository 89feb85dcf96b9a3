"""The cycle collector paused while ``components.build_rules`` builds the automata (docs/design.md
§7, helper ``glue47``; ``components.PAUSE_GC``): it is off inside, on again after a compile that
returns and after one that raises, left off when it was off, and the tables are the same with the
pause and without it (shipped grammars and JSON schemas of the corpus)."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import cfgmask
from cfgmask import ir
from cfgmask.compile import components
from cfgmask.compile.compiled import clear_caches
from cfgmask.compile.limits import CompileLimits
from cfgmask.compile.tables import build_tables
from cfgmask.errors import LimitError

from .test_compile_tables import GRAMMARS, SCHEMAS, _ir, assert_same

# a grammar whose automaton passes max_dfa_states=5 (its literals are shorter: prepare lets it by)
BIG = 'root ::= ("ab" | "cd") ("ef" | "gh") ("ij" | "kl")'


@pytest.fixture
def collector_on() -> Iterator[None]:
    """The collector on for the test (as it was after)."""
    was = gc.isenabled()
    gc.enable()
    try:
        yield
    finally:
        if not was:
            gc.disable()


def _seen_inside(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Whether the collector was on, at each ``rule_dfas`` call (inside ``build_rules``)."""
    seen: list[bool] = []
    real = components.rule_dfas

    def spy(*args: Any) -> Any:
        seen.append(gc.isenabled())
        return real(*args)

    monkeypatch.setattr(components, "rule_dfas", spy)
    return seen


def test_paused_inside_and_on_after(collector_on: None, monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _seen_inside(monkeypatch)
    clear_caches()
    build_tables(cfgmask.Grammar.from_gbnf('root ::= "a" root | "b"').ir)
    assert seen == [False]
    assert gc.isenabled()


def test_on_again_after_an_error(collector_on: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """A limit passed inside ``build_rules`` (both tries: unrolled, then with helper rules)."""
    seen = _seen_inside(monkeypatch)
    clear_caches()
    with pytest.raises(LimitError):
        build_tables(cfgmask.Grammar.from_gbnf(BIG).ir, CompileLimits(max_dfa_states=5))
    assert seen and not any(seen)
    assert gc.isenabled()


def test_on_again_after_an_error_raised_inside(collector_on: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """Any error, raised from the middle of the build."""

    def broken(*args: Any) -> Any:
        assert not gc.isenabled()
        raise KeyError("inside")

    monkeypatch.setattr(components, "finish", broken)
    clear_caches()
    with pytest.raises(KeyError, match="inside"):
        build_tables(cfgmask.Grammar.from_gbnf('root ::= "x"').ir)
    assert gc.isenabled()


def test_left_off_when_off(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _seen_inside(monkeypatch)
    was = gc.isenabled()
    gc.disable()
    try:
        clear_caches()
        build_tables(cfgmask.Grammar.from_gbnf('root ::= "a"+').ir)
        assert seen == [False]
        assert not gc.isenabled()
    finally:
        if was:
            gc.enable()


def _both(g: ir.Grammar) -> tuple[Any, Any]:
    out = []
    for pause in (True, False):
        clear_caches()
        components.PAUSE_GC = pause
        try:
            out.append(build_tables(g))
        finally:
            components.PAUSE_GC = True
    return out[0], out[1]


@pytest.mark.parametrize("path", GRAMMARS, ids=lambda p: p.name)
def test_same_tables_shipped_grammars(collector_on: None, path: Path) -> None:
    assert_same(*_both(_ir(path)))


@pytest.mark.parametrize("schema", [s for _, s in SCHEMAS[::3]], ids=[i for i, _ in SCHEMAS[::3]])
def test_same_tables_json_schemas(collector_on: None, schema: Any) -> None:
    assert_same(*_both(cfgmask.Grammar.from_json_schema(schema).ir))
