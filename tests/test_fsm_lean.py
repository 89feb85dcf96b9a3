"""Subset construction's lean bookkeeping (csrc/fsm.c, ``_core.fsm_lean_enable``).

With the switch on (the default) a DFA state's acceptance is found by bisecting its set of NFA
states (sorted as interned) for the final state, and the table of the sets is sized from the NFA
at the start; off, every set is scanned and the table grows from 64 a doubling (and a rehash) at a
time: the reference.  Neither may change a DFA: the tables must be the same, array for array, with
the direct build off (every rule through Thompson's NFA and subset construction) and on, on GBNF
shapes (shared right-linear components, labels, copied callees), JSON schemas and random grammars,
the limits included; and the Llama-3 masks of corpus schemas along their documents.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, ExitStack

import pytest
from hypothesis import HealthCheck, given, settings

import cfgmask
from cfgmask import _core, ir
from cfgmask.compile.limits import CompileLimits

from .helpers import core_switch
from .strategies import SMALL, grammars
from .test_direct_build import tables_outcome
from .test_direct_loops import assert_corpus_masks_same_taken


def _lean(on: bool) -> AbstractContextManager[None]:
    return core_switch(_core.fsm_lean_enable, on)


def _outcome(g: ir.Grammar, limits: CompileLimits | None, lean: bool, direct: bool) -> str:
    with ExitStack() as stack:
        stack.enter_context(core_switch(_core.direct_build_enable, direct))
        stack.enter_context(_lean(lean))
        return tables_outcome(g, limits)


def _same(g: ir.Grammar, limits: CompileLimits | None = None) -> int:
    """Tables on == off (the direct build off and on); how many builds the switch on ran."""
    moved = 0
    for direct in (False, True):
        ref = _outcome(g, limits, False, direct)
        before = _core.fsm_lean_builds()
        assert _outcome(g, limits, True, direct) == ref
        moved += _core.fsm_lean_builds() - before
    return moved


def _gbnf(text: str) -> ir.Grammar:
    return cfgmask.Grammar.from_gbnf(text).ir


GBNF = [
    'root ::= "a" root "b" | "c"',  # labels: a call
    'root ::= ( [a-z] | "é" )* "." [0-9]{2,5}',
    'root ::= x x y\nx ::= "ab" | "a" [0-9]*\ny ::= x? "z"',
    'root ::= a\na ::= "x" b | "y"\nb ::= "z" a | "w"',  # a right-linear component (shared NFA)
    'root ::= "\\"" ( [^"\\\\] | "\\\\" ["\\\\/bfnrt] )* "\\""',
    'root ::= ( "ab" | "ac" | "cd" ){2,9} "." | [a-c]+ "-"',
    'root ::= s ( "," s )*\ns ::= "\\"" [a-z]{0,12} "\\""',
]


@pytest.mark.parametrize("text", GBNF, ids=range(len(GBNF)))
def test_shapes(text: str) -> None:
    assert _same(_gbnf(text)) > 0


BIG = 1 << 20
LIMITS = [
    ('root ::= "<" [a-z]{0,3000} ">"', CompileLimits(max_dfa_states=1_000, unroll_budget=BIG)),
    ('root ::= ([^"] | "\\\\u" [0-9]{4}){0,900} "."', CompileLimits(max_dfa_states=5_000, unroll_budget=BIG)),
    ('root ::= [a-z]{0,2000} "."', CompileLimits(max_compile_mb=1, unroll_budget=BIG)),
    ('root ::= ( "a" | "b" )* "a" ( "a" | "b" ){12}', CompileLimits(max_dfa_states=500)),
    ('root ::= ( "a" | "b" )* "a" ( "a" | "b" ){9} "."', CompileLimits(max_compile_mb=1)),
]


@pytest.mark.parametrize(("text", "limits"), LIMITS, ids=range(len(LIMITS)))
def test_limits(text: str, limits: CompileLimits) -> None:
    """Past a limit (states, memory: the lists sized at the start are charged): the same outcome on
    and off."""
    _same(_gbnf(text), limits)


SCHEMAS = [
    {"type": "string", "maxLength": 64},
    {"type": "string", "pattern": "^[A-Z]{2,6}-[0-9]{1,8}$"},
    {
        "type": "object",
        "properties": {"a": {"type": "string", "format": "date-time"}, "b": {"type": "number"}},
        "required": ["a"],
    },
    {"type": "array", "items": {"enum": ["x", "y", 3, None]}, "maxItems": 4},
]


@pytest.mark.parametrize("schema", SCHEMAS, ids=range(len(SCHEMAS)))
def test_json_shapes(schema: dict[str, object]) -> None:
    assert _same(cfgmask.Grammar.from_json_schema(schema).ir) > 0


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(grammars(alphabet=SMALL))
def test_random_grammars(g: ir.Grammar) -> None:
    _same(g, CompileLimits(max_dfa_states=2_000))


def test_corpus_masks() -> None:
    """Llama-3 masks along the first valid document of corpus schemas: the same on and off, the
    lean builds counted on only."""
    assert_corpus_masks_same_taken(_core.fsm_lean_enable, _core.fsm_lean_builds)
