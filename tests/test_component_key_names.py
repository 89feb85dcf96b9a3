"""A component's cache key and the names of its members (cfgmask/compile/_dag.pyx ``plan``).

A component of one rule that does not call itself and is not the start rule is keyed without
the rule's name: its automaton's labels name its callees only, so the same body under another
name is the same automaton (a JSON schema's plain string, named ``value`` or after its
property, takes the prelude's ``json-string``).  A recursive rule keeps its name (its
automaton labels calls to itself), and so does the start rule (the prelude pins no start).
Checked against builds with no automaton cache at all: the tables are the same, and the
cached automata were taken where a rule of another name had them built.  (A rule that calls
itself names itself in its body, so its body's id alone tells two such rules apart; the name
stays in its key all the same.)  The string tests take the prelude's only where the plain
string is used twice: once, it may be inlined up to the larger cap, another key.
"""

from __future__ import annotations

from typing import Any

import pytest

import cfgmask
from cfgmask.compile import components, prelude
from cfgmask.compile.cache import CACHE
from cfgmask.compile.encode import Session
from cfgmask.compile.limits import DEFAULT_LIMITS
from cfgmask.compile.prepare import prepare
from cfgmask.compile.tables import build_tables
from cfgmask.frontends.json_schema import schema_to_grammar

from .test_compile_tables import assert_same


@pytest.fixture(autouse=True)
def _pinned() -> None:
    prelude.pin()
    cfgmask.clear_caches()


def _cold(g: Any) -> Any:
    """Tables with no automaton cache (a private session builds every component)."""
    return build_tables(g, DEFAULT_LIMITS, prepare(g, DEFAULT_LIMITS, Session()))


def _cached(g: Any) -> tuple[Any, list[tuple[list[str], int]]]:
    """Tables on the shared cache as it stands, and the (members, key id) of each component
    the plan took from it."""
    taken: list[tuple[list[str], int]] = []
    plan = components._plan

    def spy(*a: Any, **k: Any) -> Any:
        out = plan(*a, **k)
        taken.extend((list(members), key) for members, key, spec in out if spec[3] is not None)
        return out

    components._plan = spy  # type: ignore[assignment]
    try:
        return build_tables(g, DEFAULT_LIMITS, prepare(g, DEFAULT_LIMITS, CACHE.session())), taken
    finally:
        components._plan = plan  # type: ignore[assignment]


def _prelude_names() -> set[str | None]:
    """The member names in the pinned components' keys (None: keyed without one)."""
    keys = list(CACHE._key_ids)
    return {m for k in CACHE.pinned() for m in keys[k][4 : 4 + 3 * keys[k][3] : 3]}


def _plain_strings(g: Any, canonical: bool) -> set[str]:
    """The rules of ``g`` whose body is the prelude's ``json-string``'s, under another name."""
    body = schema_to_grammar({}, canonical=canonical)[0].rules["json-string"]
    return {name for name, b in g.rules.items() if b == body and name != "json-string"}


SCHEMAS = [
    {
        "type": "object",
        "properties": {"ip": {"type": "string"}, "host": {"type": "string"}, "n": {"type": "integer"}},
        "required": ["ip"],
    },
    {"type": "array", "items": {"type": "string"}},
    {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}}},
]


@pytest.mark.parametrize("canonical", [True, False])
@pytest.mark.parametrize("schema", SCHEMAS, ids=["property", "items", "two"])
def test_a_plain_string_under_another_name_takes_the_preludes_automaton(schema: Any, canonical: bool) -> None:
    g, _ = schema_to_grammar(schema, canonical=canonical)
    tables, taken = _cached(g)
    pinned, plain = CACHE.pinned(), _plain_strings(g, canonical)
    assert plain
    # the prelude's automaton taken for the string under its other name (keyed by its name, it
    # would have been built again)
    assert any(key in pinned and plain.intersection(members) for members, key in taken), taken
    assert_same(tables, _cold(g))


def test_the_prelude_pins_no_start_rule_and_keys_its_rules_without_names() -> None:
    names = _prelude_names()
    assert None in names  # the one-rule components
    assert "root" not in names


@pytest.mark.parametrize(
    "first, second",
    [
        # the same body under two names, neither recursive, each used twice (so built on its
        # own, not expanded in its caller): one automaton, reused
        ('root ::= a "!" a\na ::= "x" [0-9]+ "y"\n', 'root ::= "?" b b\nb ::= "x" [0-9]+ "y"\n'),
        # recursive (not in tail position): the automaton calls the rule by name (and its
        # body names it), so another name does not reuse it
        ('root ::= a\na ::= "(" a ")" | "x"\n', 'root ::= b\nb ::= "(" b ")" | "x"\n'),
        # tail recursion (a loop) and a start rule of the same body as another rule
        ('root ::= a\na ::= "x" a | "y"\n', 'root ::= "x" b | "y"\nb ::= "x" b | "y"\n'),
    ],
    ids=["plain", "recursive", "tail"],
)
def test_a_second_grammar_on_the_first_ones_automata_gets_its_own_tables(first: str, second: str) -> None:
    g1 = cfgmask.Grammar.from_gbnf(first).ir
    g2 = cfgmask.Grammar.from_gbnf(second).ir
    t1, _ = _cached(g1)
    t2, taken = _cached(g2)  # on what the first compile left in the cache
    assert_same(t1, _cold(g1))
    assert_same(t2, _cold(g2))
    if first.startswith('root ::= a "!" a'):
        assert any("b" in members for members, _ in taken)  # b took a's automaton


def test_a_recursive_rule_of_another_name_never_takes_the_automaton() -> None:
    """Its body names it (a reference to itself), so the body's id tells it apart whatever
    the key says of its name."""
    g1 = cfgmask.Grammar.from_gbnf('root ::= a\na ::= "(" a ")" | "x"\n').ir
    g2 = cfgmask.Grammar.from_gbnf('root ::= b\nb ::= "(" b ")" | "x"\n').ir
    _cached(g1)
    _, taken = _cached(g2)
    assert not any("b" in members for members, _ in taken)
