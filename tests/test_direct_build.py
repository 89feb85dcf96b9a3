"""Rules built straight to their DFA (csrc/direct.c) against Thompson's path.

A rule whose body has a bounded count and no loop is built by ``cm_direct_build`` (positions of
the count chained from the end, each a copy of the item; unions made by subset construction on
demand) and then minimized like subset construction's DFA.  The reference is the other path of
the same build: with ``_core.direct_build_enable(False)`` every rule goes through Thompson's NFA,
subset construction and minimization.  The tables must be the same, array for array (the minimal
DFA is unique, and both number it in the order subset construction discovers its states): over
hypothesis grammars, counted items of every kind (ASCII and multi-byte classes, escape units,
items that are not prefix-free, nested counts), JSON strings with minLength / maxLength (blocks
included), the limit errors, and rules with loops (a star beside a count, nested, through a
union, a callee with a cycle: Thompson's path, the gate db_worth_it; the same tables either way).
"""

from __future__ import annotations

import dataclasses
import hashlib
from contextlib import AbstractContextManager

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cfgmask
from cfgmask import _core, ir
from cfgmask.compile.limits import CompileLimits
from cfgmask.compile.tables import build_tables

from .engine import EngineRecognizer
from .helpers import core_switch
from .strategies import SMALL, grammars


def _digest(t: object) -> str:
    h = hashlib.sha256()
    for f in sorted(dataclasses.fields(t), key=lambda f: f.name):  # type: ignore[arg-type]
        if f.name == "stats":
            continue
        v = getattr(t, f.name)
        h.update(f.name.encode())
        if isinstance(v, np.ndarray):
            h.update(f"{v.dtype}{v.shape}".encode() + np.ascontiguousarray(v).tobytes())
        else:
            h.update(repr(v).encode())
    return h.hexdigest()


def _direct(on: bool) -> AbstractContextManager[None]:
    return core_switch(_core.direct_build_enable, on)


def tables_outcome(g: ir.Grammar, limits: CompileLimits | None) -> str:
    """The digest of ``g``'s tables, or the error the build raised (its limit or its message)."""
    try:
        return _digest(build_tables(g, limits))
    except cfgmask.LimitError as e:
        return f"LimitError {e.limit}"
    except cfgmask.GrammarError as e:
        return f"GrammarError {e}"


def _outcome(g: ir.Grammar, limits: CompileLimits | None, on: bool) -> str:
    with _direct(on):
        return tables_outcome(g, limits)


def _same(g: ir.Grammar, limits: CompileLimits | None = None) -> str:
    ref = _outcome(g, limits, False)
    assert _outcome(g, limits, True) == ref
    return ref


def _gbnf(text: str) -> ir.Grammar:
    return cfgmask.Grammar.from_gbnf(text).ir


ITEMS = [
    "[a-z]",  # a byte class
    '[^"\\\\\\x00-\\x1f]',  # a JSON string character: multi-byte UTF-8
    '[a-z] | "é" | "日"',
    '[^"\\\\] | "\\\\" ["\\\\/bfnrt] | "\\\\u" [0-9a-fA-F]{4}',  # an escape unit, a count inside
    '"ab" | "ac"',  # a shared prefix: a union made on demand
    '"a" | "ab"',  # not prefix-free
    '"x" [0-9]{1,3}',  # a count inside the item
    '"q"?',  # nullable
    "c",  # a rule of its own (inlined or called)
]


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    item=st.sampled_from(ITEMS),
    lo=st.integers(0, 6),
    extra=st.integers(0, 12),
    tail=st.sampled_from(['"z"', '"a"', "", "[a-c]{0,3}", "c"]),
    lead=st.sampled_from(['"\\""', "", '"a"?']),
)
def test_counted_items(item: str, lo: int, extra: int, tail: str, lead: str) -> None:
    hi = lo + extra
    if hi == 0:
        hi = 1
    text = f'root ::= {lead} ( {item} ){{{lo},{hi}}} {tail}\nc ::= [a-c] | "é"\n'
    _same(_gbnf(text))


@pytest.mark.parametrize("max_len", [1, 2, 16, 45, 46, 47, 64, 93, 100, 255, 1000])
@pytest.mark.parametrize("min_len", [0, 1, 3, 46])
def test_json_strings(min_len: int, max_len: int) -> None:
    if min_len > max_len:
        return
    schema = {"type": "string", "minLength": min_len, "maxLength": max_len}
    _same(cfgmask.Grammar.from_json_schema(schema).ir)
    obj = {"type": "object", "properties": {"a": schema, "b": {"type": "string", "maxLength": 7}}}
    _same(cfgmask.Grammar.from_json_schema(obj).ir)


@pytest.mark.parametrize("budget", [8, 40, 200])
def test_blocks(budget: int) -> None:
    """Big counts cut into blocks (helpers: x{0,B-1} | x{B} x{0,r} share their positions)."""
    limits = CompileLimits(unroll_budget=budget, unroll_whole=0)
    for text in ('root ::= "[" [a-z]{0,300} "]"', 'root ::= ([a-z] | "\\\\u" [0-9]{4}){5,123} "."'):
        _same(_gbnf(text), limits)
    schema = {"type": "string", "minLength": 2, "maxLength": 255}
    _same(cfgmask.Grammar.from_json_schema(schema).ir, limits)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(grammars(alphabet=SMALL))
def test_random_grammars(g: ir.Grammar) -> None:
    _same(g, CompileLimits(max_dfa_states=2_000))


def test_used() -> None:
    """The direct build is what builds a counted string (not a silent fallback)."""
    g = cfgmask.Grammar.from_json_schema({"type": "string", "maxLength": 64}).ir
    _core.compile_stats_enable(True)
    try:
        with _direct(True):
            _core.compile_stats()
            build_tables(g)
            ns = _core.compile_stats()["ns"]
    finally:
        _core.compile_stats_enable(False)
    assert ns["direct"] > 0


BIG = 1 << 20
COPY_900 = 'root ::= "<" c ">" | "x" c\nc ::= [a-z]{0,900}'


@pytest.mark.parametrize(
    ("text", "limits"),
    [
        ('root ::= "<" [a-z]{0,3000} ">"', CompileLimits(max_dfa_states=1_000, unroll_budget=BIG)),
        ('root ::= "<" [a-z]{0,3000} ">"', CompileLimits(max_dfa_states=3_000, unroll_budget=BIG)),
        (
            'root ::= ([^"] | "\\\\u" [0-9]{4}){0,900} "."',
            CompileLimits(max_dfa_states=5_000, unroll_budget=BIG),
        ),
        ('root ::= [a-z]{0,2000} "."', CompileLimits(max_compile_mb=1, unroll_budget=BIG)),
        ('root ::= [a-z]{0,2000} "."', CompileLimits(max_total_states=500, unroll_budget=BIG)),
        (COPY_900, CompileLimits(max_dfa_states=1_000, unroll_budget=BIG)),  # a body copying a big callee
        (COPY_900, CompileLimits(max_dfa_states=3_000, unroll_budget=BIG)),
    ],
)
def test_limits(text: str, limits: CompileLimits) -> None:
    """A count past a limit ends the same way on both paths (the same LimitError, or the same
    tables after the retry with unit blocks)."""
    _same(_gbnf(text), limits)


PIECES = [
    "[0-9]{2,4}",  # a count
    '( [a-c] | "\\\\u" [0-9]{2} ){0,5}',  # a count of a union with a count inside
    "[ \\t]*",  # a star of a class (ws*)
    '( "ab" | "a" )*',  # a star of a small item, not prefix-free
    '( [a-c]{1,3} "," )*',  # a star around a count
    '( "x" | [0-9]+ )+',  # a loop through a union, nested
    "[c-e a-c x f-g]{1,3}",  # a class of overlapping, adjacent, unsorted ranges
    "w",  # a rule with a loop of its own (copied or inlined)
    "c",  # a rule without one
]


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    a=st.sampled_from(PIECES),
    b=st.sampled_from(PIECES),
    shape=st.sampled_from(
        ["{a} {b}", '"[" {a} "," {b} "]"', "( {a} | {b} )*", "( {a} {b} ){{0,3}}", "{a} | {b}"]
    ),
)
def test_loops(a: str, b: str, shape: str) -> None:
    """Rules with loops beside, around and inside counts: the same tables on both paths."""
    body = shape.format(a=a, b=b)
    _same(_gbnf(f'root ::= {body} "."\nw ::= [ \\t]* "-"\nc ::= [a-c] | "é"\n'))


@pytest.mark.parametrize(
    ("text", "direct"),
    [
        ('root ::= [0-9]{2,5} c "."\nc ::= "x" [a-z]{0,2}', True),
        ('root ::= [0-9]{2,5} c "."\nc ::= "x" [a-z]*', False),  # a callee with a cycle
        ('root ::= [0-9]{2,5} [ ]* "."', False),  # a star beside the count
        ('root ::= [0-9]* "."', False),  # no count
    ],
)
def test_gate(text: str, direct: bool) -> None:
    """The direct build is tried for a rule with a count and no loop only (callees' cycles
    included), its loops switch off (tests/test_direct_loops.py: on); the tables are the same
    either way."""
    _core.compile_stats_enable(True)
    try:
        with _direct(True), core_switch(_core.direct_loops_enable, False):
            _core.compile_stats()
            build_tables(_gbnf(text))
            ns = _core.compile_stats()["ns"]
    finally:
        _core.compile_stats_enable(False)
    assert (ns["direct"] > 0) == direct
    _same(_gbnf(text))


def _phases(text: str) -> dict[str, int]:
    _core.compile_stats_enable(True)
    try:
        with _direct(True):
            _core.compile_stats()
            build_tables(_gbnf(text))
            return _core.compile_stats()["ns"]  # type: ignore[no-any-return]
    finally:
        _core.compile_stats_enable(False)


# c is called from two rules (a and b, expanded into root): its DFA is copied, not its body expanded
COPIES = 'root ::= a | b\na ::= {a}\nb ::= "<" c ">"\nc ::= {c}'


@pytest.mark.parametrize(
    ("a", "c", "thompson"),
    [
        ('"\\"" c "\\""', "[a-z]{0,40}", False),  # a bounded string's body in its quotes
        ('"null" | "\\"" c "\\""', '([a-z] | "é"){0,9}', False),
        ('"\\"" c "\\""', "[a-z]*", True),  # a copied callee with a cycle
        ('"a" | "b"', '"x" "y"', True),  # no count and no copy in c, nor in a
    ],
)
def test_copies_built_direct(a: str, c: str, thompson: bool) -> None:
    """A body without a count that copies acyclic callees is built here, Thompson's path not
    taken at all (the callee's own count included); the tables are the same either way."""
    text = COPIES.format(a=a, c=c)
    assert (_phases(text)["thompson"] > 0) == thompson
    _same(_gbnf(text))


CALLEES = [
    "[a-z]{0,5}",  # a counted class: every position accepts
    '"ab" | "ac" | "a"',  # a shared prefix, not prefix-free
    '"é" | [0-9]{1,2} | "日本"',  # multi-byte
    '"x" r "y"',  # a call: label edges (r is recursive, not inlined)
    '( [a-c] | "\\\\u" [0-9]{2} ){2,4}',
]


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    c=st.sampled_from(CALLEES),
    d=st.sampled_from(CALLEES),
    shape=st.sampled_from(
        ['"<" c ">"', "c d", '"n" | "<" c ">"', '( c | d ) "."', "c? d", '"a" c | "a" d', "c | d", 'c c "z"']
    ),
)
def test_copied_callees(c: str, d: str, shape: str) -> None:
    """Bodies without a count made of copies of acyclic callees (unions of copies, copies in
    sequence, shared prefixes, label edges): the same tables on both paths."""
    text = f'root ::= {shape} | "#" c d\nc ::= {c}\nd ::= {d}\nr ::= "(" r ")" | "-"\n'  # copied: used twice
    _same(_gbnf(text))


@pytest.mark.parametrize("count", ["", "{2}"])
@pytest.mark.parametrize("on", [True, False])
def test_class_kept_by_the_last_row(count: str, on: bool) -> None:
    """Ranges that narrow row by row: in breadth-first order each row is the first to tell one
    more pair of adjacent byte classes apart, the last row ('c' from 'd') the last pair.
    Merging a DFA's equal adjacent classes (minimize.c, merged_classes, on either path) stops
    reading rows once every class is kept, not before: 'd' after "aaaa" is refused."""
    text = f"root ::= [a-h] [a-d] [a-b] [a] ( [a-c] ){count}"
    g = _gbnf(text)
    with _direct(on):
        cfgmask.clear_caches()
        rec = EngineRecognizer(g)
        n = 2 if count else 1
        for tail in ("a", "b", "c"):
            assert rec.accepts(b"haba" + tail.encode() * n), tail
        for tail in ("d", "e", "h"):
            assert not rec.accepts(b"aaaa" + tail.encode() * n), tail
