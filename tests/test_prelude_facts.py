"""What a generation of the automaton cache takes from the prelude without making it again
(docs/design.md §7, session 34, helper ``glue34``): a session reads the prelude's object ids
(``Interner.seed``) where they are instead of copying them into its memo, and a generation
starts with the rules referred to and the uses per rule (``Interner._uses``, ``_refs``) that
the prelude's builds worked out of its nodes.

Checked against independent references: each installed fact against a plain walk of the node's
key tree; the node ids a session finds through the seed against a walk that starts from nothing;
the tables of grammars that use the prelude against a session seeded by a copy (the old way)
and against a private session with no cache at all.  Each test also proves its path ran (the
facts are there before any compile asks; the memo holds none of the seeded objects)."""

from __future__ import annotations

from typing import Any

import pytest

import cfgmask
from cfgmask.compile import encode, prelude
from cfgmask.compile.cache import CACHE
from cfgmask.compile.encode import Session
from cfgmask.compile.limits import DEFAULT_LIMITS
from cfgmask.compile.prepare import prepare
from cfgmask.compile.tables import build_tables
from cfgmask.frontends.json_schema import schema_to_grammar

from .test_compile_tables import assert_same

SCHEMAS: list[Any] = [
    {},
    {"type": "string"},
    {"type": "object", "properties": {"a": {}, "b": {"type": "array"}}, "required": ["a"]},
    {"type": "array", "items": {"type": "object"}},
    {"anyOf": [{"type": "string", "maxLength": 3}, {"type": "object", "additionalProperties": True}]},
]


@pytest.fixture(autouse=True)
def _pinned() -> None:
    prelude.pin()
    cfgmask.clear_caches()  # a generation that starts with the prelude


def _plain_uses(keys: list[tuple], c: int) -> dict[str, int]:  # type: ignore[type-arg]
    """The references per rule below node ``c``, capped at 2: a plain walk of its key tree."""
    out: dict[str, int] = {}
    stack = [c]
    while stack:
        key = keys[stack.pop()]
        kind = key[0]
        if kind in (encode._SEQ, encode._ALT):
            stack.extend(key[1])
        elif kind == encode._REPEAT:
            stack.append(key[1])
        elif kind in (encode._REF, encode._LOOKAHEAD):
            name = key[1] if kind == encode._REF else encode.marker_name(key[1])
            out[name] = min(2, out.get(name, 0) + 1)
    return out


def test_a_generation_starts_with_the_prelude_facts() -> None:
    prel = CACHE._prelude
    assert prel is not None and prel.uses and prel.refs
    it = CACHE._interner
    keys = it.keys
    # before any compile of this generation asks: the facts are there (installed, not made)
    installed = [i for i in range(len(prel.nodes)) if it._uses[i] is not None]
    assert set(prel.uses) <= set(installed)
    assert any(it._uses[i] for i in prel.uses)  # some prelude node refers to a rule
    for i in prel.uses:
        assert it._uses[i] == _plain_uses(keys, i)
    for i in prel.refs:
        assert it._refs[i] == frozenset(_plain_uses(keys, i))
    # the same objects in every generation (read only: shared, not copied)
    cfgmask.clear_caches()
    it2 = CACHE._interner
    assert it2 is not it and all(it2._uses[i] is prel.uses[i] for i in prel.uses)


def test_facts_of_the_prelude_nodes_equal_a_fresh_interners() -> None:
    """An interner given the prelude's nodes and nothing else works out the same facts."""
    prel = CACHE._prelude
    assert prel is not None
    fresh = encode.Interner(-1)
    for i, node in enumerate(prel.nodes):
        assert fresh.add(node) == i
    for i in prel.uses:
        assert fresh.uses[i] == prel.uses[i]
    for i in prel.refs:
        assert fresh.refs[i] == prel.refs[i]


def test_a_session_reads_the_seed_in_place() -> None:
    seed = CACHE._interner.seed
    sess = CACHE.session()
    assert seed and sess.seed is seed and sess.memo == {}
    g, _ = schema_to_grammar({"type": "object", "properties": {"a": {}}})
    prepare(g, DEFAULT_LIMITS, sess)
    # the prelude's objects this grammar holds were found through the seed, not copied in
    met = [id(b) for b in g.rules.values() if id(b) in seed]
    assert met and not any(k in sess.memo for k in met)
    assert not set(seed) & set(sess.memo)
    for name, body in g.rules.items():
        assert sess.roots[name] == sess.known(body)
    # the ids the seed gives are those a walk from nothing gives
    walk = Session(CACHE._interner, CACHE)
    walk.seed = {}
    assert {n: walk.cid(b) for n, b in g.rules.items()} == sess.roots


@pytest.mark.parametrize("schema", SCHEMAS)
def test_tables_equal_a_copied_seed_and_no_cache(schema: Any) -> None:
    g, _ = schema_to_grammar(schema)
    read = build_tables(g, DEFAULT_LIMITS, prepare(g, DEFAULT_LIMITS, CACHE.session()))
    cfgmask.clear_caches()
    copied = CACHE.session()  # the way before: the seed copied into the memo
    copied.memo = dict(copied.seed)
    copied.seed = {}
    old = build_tables(g, DEFAULT_LIMITS, prepare(g, DEFAULT_LIMITS, copied))
    cold = build_tables(g, DEFAULT_LIMITS, prepare(g, DEFAULT_LIMITS, Session()))
    assert_same(read, old)
    assert_same(read, cold)
