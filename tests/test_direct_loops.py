"""Bodies with a count and unbounded repetitions built by the direct build (csrc/direct.c).

With ``_core.direct_loops_enable(True)`` (the default) ``db_worth_it`` lets a body with a bounded
count through even where it also holds a star or a plus (not a copied DFA with a cycle): the
direct build makes its loop states pending and fills them, cm_fsm_minimize then minimizes (a loop's
states are not kept by content), and the build gives up (Thompson's path then) once it has made
1.5x the states of the body's NFA (+64), where a count's positions copy a loop the DFA before
minimization can be many times subset construction's.  Off, those bodies take Thompson's path:
the reference.  The tables must be the same, array for array, on hypothesis grammars, the
shipped shapes (JSON Schema formats and patterns, counted strings beside loops) and the cap's
give-ups; the Llama-3 masks of corpus schemas are the same along their documents.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cfgmask
from benchmarks.common import tokenize
from cfgmask import _core, ir
from cfgmask.compile.tables import build_tables

from .helpers import core_switch, masks_along
from .test_direct_build import _digest


def _loops(on: bool) -> AbstractContextManager[None]:
    return core_switch(_core.direct_loops_enable, on)


def _outcome(g: ir.Grammar, on: bool) -> str:
    with _loops(on):
        try:
            return _digest(build_tables(g))
        except cfgmask.LimitError as e:
            return f"LimitError {e.limit}"


def _same(g: ir.Grammar) -> str:
    ref = _outcome(g, False)
    assert _outcome(g, True) == ref
    return ref


def _gbnf(text: str) -> ir.Grammar:
    return cfgmask.Grammar.from_gbnf(text).ir


def _phases(text: str, on: bool) -> dict[str, int]:
    _core.compile_stats_enable(True)
    try:
        with _loops(on):
            _core.compile_stats()
            build_tables(_gbnf(text))
            return _core.compile_stats()["ns"]  # type: ignore[no-any-return]
    finally:
        _core.compile_stats_enable(False)


@pytest.mark.parametrize(
    ("text", "direct", "thompson"),
    [
        ('root ::= [0-9]{2,5} [ ]* "."', True, False),  # a star beside a count: built here
        ('root ::= ( [a-z]* "," ){0,8} "."', True, False),  # a loop inside a count
        ('root ::= "<" [a-z]+ ">" [0-9]{1,4}', True, False),
        # a count's positions copying a loop through a union: past the cap, Thompson's path
        ('root ::= ( "a" [b-z]* | [a-c]+ "x" ){1,9} "."', True, True),
        ('root ::= ( ( [a-z] | "ab" )* "," ){2,7} "."', True, True),
        ('root ::= [0-9]* "."', False, True),  # no count: not tried
        # a copied callee with a cycle (c is called from two rules: copied, not expanded)
        ('root ::= a | b\na ::= [0-9]{2,5} c "."\nb ::= "<" c ">"\nc ::= "x" [a-z]*', False, True),
    ],
)
def test_gate_and_cap(text: str, direct: bool, thompson: bool) -> None:
    """Switched on, a body with a count and a loop is tried here, and given up past the cap;
    off, it takes Thompson's path alone; the tables are the same either way."""
    on = _phases(text, True)
    assert (on["direct"] > 0, on["thompson"] > 0) == (direct, thompson)
    off = _phases(text, False)
    assert off["direct"] == 0 and off["thompson"] > 0
    _same(_gbnf(text))


PIECES = [
    "[a-z]*",
    '[0-9]+ "."',
    '( "ab" | "a" )*',  # a loop through a union whose branches share a prefix
    "[a-c]{0,4}",
    '"é"+',  # multi-byte
    "[ \\t]* [a-z]{1,3}",
    "w",  # a rule with a loop of its own
    "c",  # a rule without one
]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    a=st.sampled_from(PIECES),
    b=st.sampled_from(PIECES),
    shape=st.sampled_from(
        [
            "{a} [0-9]{{2,4}} {b}",
            '"[" {a} "," {b} "]" [x-z]{{0,3}}',
            "( {a} | {b} ){{1,4}}",
            "( {a} {b} ){{0,3}} {a}",
            "{a} | [a-c]{{2,6}} {b}",
            "( {a} [0-9]{{2}} )* {b}",
        ]
    ),
)
def test_loops_beside_counts(a: str, b: str, shape: str) -> None:
    body = shape.format(a=a, b=b)
    _same(_gbnf(f'root ::= {body} "."\nw ::= [ \\t]* "-"\nc ::= [a-c] | "é"\n'))


SCHEMAS = [
    {"type": "string", "format": "email"},
    {"type": "string", "format": "uri"},
    {"type": "string", "format": "hostname"},
    {"type": "string", "format": "date-time"},
    {"type": "string", "pattern": "^[a-z]+-[0-9]{2,4}(\\.[a-z]*)?$"},
    {"type": "string", "pattern": "^(\\+|-)?[0-9]{1,3}( [0-9]{3})*$"},
    {
        "type": "object",
        "properties": {
            "mail": {"type": "string", "format": "email"},
            "id": {"type": "string", "pattern": "^[A-Z]{2}[0-9]+$"},
            "n": {"type": "integer"},
        },
        "required": ["mail", "id"],
    },
]


@pytest.mark.parametrize("schema", SCHEMAS, ids=range(len(SCHEMAS)))
def test_json_shapes(schema: dict[str, object]) -> None:
    _same(cfgmask.Grammar.from_json_schema(schema).ir)


CORPUS = Path(__file__).parent / "corpora" / "jsonschemabench"


def _corpus_schemas(limit: int) -> list[tuple[str, str, object]]:
    out = []
    for path in sorted(CORPUS.glob("*.jsonl")):
        for line in path.read_text().splitlines()[:limit]:
            row = json.loads(line)
            tests = row.get("tests") or []
            valid = [t["data"] for t in tests if t.get("valid")]
            if valid:
                out.append((str(row["id"]), json.dumps(row["schema"]), valid[0]))
    return out


def _masks(
    schema: str,
    tokens: list[int],
    vocab: cfgmask.Vocabulary,
    switch: Callable[[bool], AbstractContextManager[None]],
    on: bool,
) -> list[object]:
    with switch(on):
        try:
            cg = cfgmask.compile(cfgmask.Grammar.from_json_schema(schema), vocab)
        except (cfgmask.CfgmaskError, ValueError, NotImplementedError):
            return []
        return masks_along(cg, tokens)


def assert_corpus_masks_same(switch: Callable[[bool], AbstractContextManager[None]]) -> None:
    """Llama-3 masks along the first valid document of 3 corpus schemas a split (40 tokens): the
    same with ``switch(True)`` and ``switch(False)``."""
    vocab = cfgmask.Vocabulary.llama3()
    for sid, schema, doc in _corpus_schemas(3):
        tokens = tokenize(json.dumps(doc, separators=(",", ":")))[:40]
        on, off = _masks(schema, tokens, vocab, switch, True), _masks(schema, tokens, vocab, switch, False)
        assert len(on) == len(off), sid
        assert all(np.array_equal(a, b) for a, b in zip(on, off, strict=True)), sid


def assert_corpus_masks_same_taken(enable: Callable[[bool], None], taken: Callable[[], int]) -> None:
    """``assert_corpus_masks_same`` for a process-wide ``_core`` switch with a counter: the masks
    the same on and off, and the counter moved on and only on."""
    moved: list[tuple[bool, int]] = []

    @contextmanager
    def switch(on: bool) -> Iterator[None]:
        with core_switch(enable, on):
            n0 = taken()
            yield
            moved.append((on, taken() - n0))

    assert_corpus_masks_same(switch)
    assert sum(n for on, n in moved if on) > 0
    assert sum(n for on, n in moved if not on) == 0


def test_corpus_masks() -> None:
    """Llama-3 masks along the first valid document of corpus schemas: the same on both paths."""
    assert_corpus_masks_same(_loops)
