"""One door into C per compile stage.  ``compile.components`` plans the rule components in
Python and crosses into C twice: ``_core.compile_components`` builds the automata of every
component not cached, ``_core.compile_finish`` finds the runtime and productive rules, trims
them and lays them out flat.  Against ``tests/reference_pipeline.py`` (one call per component
and per rule, as the compiler did before) the flat tables must be equal, array for array, on
every shipped grammar, a sample of JSON Schemas and small grammars under tight limits, through
cached components too; a whole ``cfgmask.compile`` crosses into C at most five times (counted
by wrapping every callable of ``cfgmask._core``).
"""

from __future__ import annotations

import dataclasses
import importlib
import itertools
import json
from array import array
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import cfgmask
from cfgmask import deadline, ir
from cfgmask.compile import components
from cfgmask.compile.cache import CACHE
from cfgmask.compile.compiled import clear_caches
from cfgmask.compile.encode import Session
from cfgmask.compile.flat import Flat
from cfgmask.compile.limits import CompileLimits
from cfgmask.compile.prepare import prepare, validate
from cfgmask.errors import GrammarError, LimitError

from . import reference_pipeline

_core: Any = importlib.import_module("cfgmask._core")
ROOT = Path(__file__).resolve().parent.parent
GRAMMARS = sorted((ROOT / "grammars").glob("*.gbnf")) + sorted((ROOT / "grammars").glob("*.lark"))
SCHEMA_FILES = ["Github_easy.jsonl", "Github_medium.jsonl", "Glaiveai2K.jsonl", "Snowplow.jsonl"]


def _flat(grammar: ir.Grammar, limits: CompileLimits, build: Any, sess: Session | None = None) -> Flat:
    """The flat tables through ``build`` (with the retry of ``tables._build_tables_in``)."""
    with deadline.Deadline(limits.deadline_ms, "compile"):
        sess = prepare(grammar, limits, sess)
        validate(grammar, sess)
        try:
            return build(grammar, limits, sess)  # type: ignore[no-any-return]
        except LimitError as e:
            if e.limit != "max_dfa_states" or limits.unroll_budget == 0:
                raise
            return build(grammar, dataclasses.replace(limits, unroll_budget=0), sess)  # type: ignore[no-any-return]


def door_flat(grammar: ir.Grammar, limits: CompileLimits, cached: bool = False) -> Flat:
    """Through the two doors; ``cached``: on a session of the automaton cache."""
    return _flat(grammar, limits, components.build_rules, CACHE.session() if cached else None)


def today_flat(grammar: ir.Grammar, limits: CompileLimits) -> Flat:
    """Through one call per component and per rule."""
    return _flat(grammar, limits, reference_pipeline.reference_flat)


# ---- the tests -------------------------------------------------------------------------


def assert_same_flat(a: Flat, b: Flat) -> None:
    assert a.names == b.names
    assert a.start_of == b.start_of
    for x, y in ((a.rule_of, b.rule_of), (a.accepting, b.accepting)):
        assert x.dtype == y.dtype and np.array_equal(x, y)
    assert len(a.parts) == len(b.parts)
    for (ta, ca), (tb, cb) in zip(a.parts, b.parts, strict=True):
        assert ta.dtype == tb.dtype and ta.shape == tb.shape and np.array_equal(ta, tb)
        assert ca.dtype == cb.dtype and np.array_equal(ca, cb)
    assert a.refs == b.refs
    assert a.tokens == b.tokens
    assert a.token_sets == b.token_sets


def outcome(make: Any) -> Any:
    try:
        return make()
    except (LimitError, GrammarError) as e:
        return type(e).__name__, getattr(e, "limit", None)


def assert_same_outcome(grammar: ir.Grammar, limits: CompileLimits) -> None:
    a = outcome(lambda: door_flat(grammar, limits))
    b = outcome(lambda: today_flat(grammar, limits))
    if isinstance(a, tuple) or isinstance(b, tuple):
        assert a == b
    else:
        assert_same_flat(a, b)


def _grammar(path: Path) -> ir.Grammar:
    text = path.read_text(encoding="utf-8")
    g = cfgmask.Grammar.from_lark(text) if path.suffix == ".lark" else cfgmask.Grammar.from_gbnf(text)
    return g.ir


def _schemas(per_file: int = 6) -> list[tuple[str, Any]]:
    """The first schemas of each split that strict mode enforces exactly."""
    out = []
    for name in SCHEMA_FILES:
        with open(ROOT / "tests" / "corpora" / "jsonschemabench" / name, encoding="utf-8") as f:
            for i, line in enumerate(itertools.islice(f, per_file)):
                schema = json.loads(line)["schema"]
                try:
                    cfgmask.Grammar.from_json_schema(schema)
                except GrammarError:
                    continue
                out.append((f"{name}:{i}", schema))
    return out


@pytest.mark.parametrize("path", GRAMMARS, ids=lambda p: p.name)
def test_shipped_grammar_tables_equal(path: Path) -> None:
    assert_same_outcome(_grammar(path), CompileLimits())


@pytest.mark.parametrize("schema", [s for _, s in _schemas()], ids=[i for i, _ in _schemas()])
def test_json_schema_tables_equal(schema: Any) -> None:
    assert_same_outcome(cfgmask.Grammar.from_json_schema(schema).ir, CompileLimits())


@pytest.mark.parametrize(
    "text",
    [
        'root ::= "a" [ab]* "a" [ab]{12} "b"',  # an exploding DFA: less inlining, then helper rules
        'root ::= x x x\nx ::= "a" x | "b"',  # right-linear, shared
        'root ::= "(" root ")" | e\ne ::= "e" e | ""',  # recursion around a right-linear rule
        'root ::= r | "x"\nr ::= "a" r',  # an unproductive rule, trimmed away
        'root ::= "[" v ("," v)* "]"\nv ::= root | [0-9]+ | "\\"" [^"]* "\\""',
    ],
)
def test_small_grammar_tables_equal(text: str) -> None:
    assert_same_outcome(cfgmask.Grammar.from_gbnf(text).ir, CompileLimits())
    assert_same_outcome(
        cfgmask.Grammar.from_gbnf(text).ir, CompileLimits(inline_max_states=8, max_dfa_states=200)
    )


def test_empty_language_is_a_grammar_error() -> None:
    g = cfgmask.Grammar.from_gbnf('root ::= "a" root').ir
    assert outcome(lambda: door_flat(g, CompileLimits())) == ("GrammarError", None)
    assert outcome(lambda: today_flat(g, CompileLimits())) == ("GrammarError", None)


def test_cached_components_give_the_same_tables() -> None:
    for g in (
        _grammar(ROOT / "grammars" / "json.gbnf"),
        cfgmask.Grammar.from_json_schema(_schemas(1)[0][1]).ir,
    ):
        clear_caches()
        first = door_flat(g, CompileLimits(), cached=True)  # builds and keeps every component
        again = door_flat(g, CompileLimits(), cached=True)  # hands C the kept ones
        assert_same_flat(first, again)
        assert_same_flat(first, door_flat(g, CompileLimits()))


def test_limits_name_the_component() -> None:
    for g, limits, limit in (
        (cfgmask.Grammar.from_regex("(a?b?){30}" * 10).ir, CompileLimits(max_compile_mb=1), "max_compile_mb"),
        (
            _grammar(ROOT / "grammars" / "c.gbnf"),
            CompileLimits(max_dfa_states=20, unroll_budget=0),
            "max_dfa_states",
        ),
    ):
        with pytest.raises(LimitError) as info:
            door_flat(g, limits)
        assert info.value.limit == limit
        assert str(info.value).startswith("rule '")
    with pytest.raises(LimitError) as info:
        rank = array("I", [0])
        _core.compile_components(array("I", [7, 0]), rank, [([(0, 0, 0)], [], False, None)], 10, 10, 0, 1.0)
    assert info.value.limit == "deadline_ms" and info.value.component == 0  # type: ignore[attr-defined]


def count_crossings(monkeypatch: pytest.MonkeyPatch, calls: list[str]) -> None:
    """Record the name of every call into ``cfgmask._core`` (its functions and classes; the
    package looks them up on the module at call time)."""

    def counted(name: str, fn: Any) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            calls.append(name)
            return fn(*args, **kwargs)

        return call

    for name in dir(_core):
        fn = getattr(_core, name)
        if callable(fn) and not name.startswith("_"):
            monkeypatch.setattr(_core, name, counted(name, fn))


@pytest.mark.parametrize("name", ["json.gbnf", "c.gbnf", "sql.gbnf", "sql.lark"])
def test_at_most_five_crossings_per_compile(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """A whole cold ``cfgmask.compile``: the two doors and the compiled grammar's handle (the
    vocabulary's trie is built once per vocabulary, before)."""
    vocab = cfgmask.Vocabulary.from_token_bytes([bytes([b]) for b in range(256)])
    vocab._handle()
    grammar = _grammar(ROOT / "grammars" / name)
    calls: list[str] = []
    count_crossings(monkeypatch, calls)
    clear_caches()
    cfgmask.compile(grammar, vocab)
    print(f"{name}: {len(calls)} crossings: {calls}")
    assert calls == ["compile_components", "compile_finish", "GrammarHandle"], calls
