"""A bounded count's positions copied without lookups by the direct build (csrc/direct.c).

``db_counted`` builds x{m,n}'s positions from the end, each a copy of one template (the item built
once into a placeholder P).  Where the position after is a state no other refers to (the start of
the copy made just before, made last, no pending state filled since) and every state of the
template reaches P, each copied state is new by construction: ``db_copy_fresh`` writes the copies
in one pass and puts each in the table by content without looking for its equal
(``_core.direct_fresh_copy_enable(True)``, the default).  Off, every copy is looked up as it is
made: the reference.  The tables must be the same, array for array, on bounded strings (JSON
``maxLength``), counts of multi-byte items, unions with shared prefixes, counts with rests of their
own, counts beside loops and the caps; the Llama-3 masks of corpus schemas along their documents.
"""

from __future__ import annotations

from contextlib import AbstractContextManager

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cfgmask
from cfgmask import _core, ir
from cfgmask.compile.tables import build_tables

from .helpers import core_switch
from .test_direct_build import _digest
from .test_direct_loops import assert_corpus_masks_same


def _fresh(on: bool) -> AbstractContextManager[None]:
    return core_switch(_core.direct_fresh_copy_enable, on)


def _outcome(g: ir.Grammar, on: bool) -> str:
    with _fresh(on):
        try:
            return _digest(build_tables(g))
        except cfgmask.LimitError as e:
            return f"LimitError {e.limit}"


def _same(g: ir.Grammar) -> int:
    """Tables on == off; how many positions the switch on copied without lookups."""
    ref = _outcome(g, False)
    before = _core.direct_fresh_copies()
    assert _outcome(g, True) == ref
    return _core.direct_fresh_copies() - before


def _gbnf(text: str) -> ir.Grammar:
    return cfgmask.Grammar.from_gbnf(text).ir


@pytest.mark.parametrize(
    ("text", "fires"),
    [
        ('root ::= "\\"" [a-z]{0,30} "\\""', True),
        ('root ::= [0-9]{5,12} "."', True),
        ('root ::= ( "ab" | "ac" | "cd" ){2,9} "."', True),  # a union with a shared prefix
        ('root ::= ( "é" | [a-c] | "€" ){1,20}', True),  # multi-byte items
        ('root ::= ( [a-z] [0-9] | "-" ){0,7} ";"', True),
        # an item that may end where it may go on (the placeholder in a union): no template
        ('root ::= ( "ab" | "a" | "b" ){2,9} "."', False),
        ('root ::= ( [a-z] [0-9]? ){0,7} ";"', False),
        ("root ::= [a-z]{0,5} | [a-z]{7} [0-9]{0,3}", True),  # branches counting the same item
        ('root ::= [a-z]{0,40} "-" [a-z]{3,40}', True),
        ('root ::= ( [a-z]* "," ){0,8} "."', False),  # a loop inside: no template
        ("root ::= [0-9]{2}", True),  # the second position copies the first's template
    ],
)
def test_shapes(text: str, fires: bool) -> None:
    assert (_same(_gbnf(text)) > 0) == fires


def test_caps() -> None:
    """A count whose copies would pass the build's caps: the same outcome (a limit, or Thompson's
    path) on and off."""
    for n in (600, 3000, 20000):
        _same(_gbnf(f'root ::= ( [a-z] | "é" | "ab" ){{0,{n}}} "."'))


ITEMS = ["[a-z]", '"ab" | "a"', '"é" | [0-9]', "[a-c] [x-z]?", '"\\\\" [nrt] | [a-m]', "w"]


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    item=st.sampled_from(ITEMS),
    lo=st.integers(0, 6),
    span=st.integers(0, 12),
    shape=st.sampled_from(
        [
            "( {x} ){{{lo},{hi}}} {rest}",
            '"[" ( {x} ){{{lo},{hi}}} "]" | [0-9] {rest}',
            "( {x} ){{{lo},{hi}}} ( {x} )* {rest}",
            "( ( {x} ){{{lo},{hi}}} {rest} ){{1,3}}",
        ]
    ),
    rest=st.sampled_from(['"."', '[a-z] "."', '"a"?']),
)
def test_random_counts(item: str, lo: int, span: int, shape: str, rest: str) -> None:
    body = shape.format(x=item, lo=lo, hi=lo + span, rest=rest)
    _same(_gbnf(f'root ::= {body}\nw ::= [ \\t] "-" | "+"\n'))


SCHEMAS = [
    {"type": "string", "maxLength": 64},
    {"type": "string", "minLength": 3, "maxLength": 20},
    {"type": "string", "minLength": 8},
    {"type": "string", "pattern": "^[A-Z]{2,6}-[0-9]{1,8}$"},
    {
        "type": "object",
        "properties": {"a": {"type": "string", "maxLength": 12}, "b": {"type": "string", "maxLength": 255}},
        "required": ["a"],
    },
    {"type": "array", "items": {"type": "string", "maxLength": 10}, "maxItems": 4},
]


@pytest.mark.parametrize("schema", SCHEMAS, ids=range(len(SCHEMAS)))
def test_json_shapes(schema: dict[str, object]) -> None:
    _same(cfgmask.Grammar.from_json_schema(schema).ir)


def test_corpus_masks() -> None:
    """Llama-3 masks along the first valid document of corpus schemas: the same on and off."""
    assert_corpus_masks_same(_fresh)
