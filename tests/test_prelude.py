"""The prelude: the automata every JSON Schema grammar may share, pinned in the automaton cache
so that every generation (the one after ``clear_caches()`` included) starts with them
(cfgmask/compile/prelude.py).  Checked: a grammar compiled on them has the tables of one
compiled with no cache at all; ``clear_caches()`` keeps them and nothing else; their node and
key ids stay right across generations; a compile that began before a clear files nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cfgmask
from cfgmask.compile import components, prelude
from cfgmask.compile.cache import CACHE, AutomatonCache
from cfgmask.compile.encode import Session
from cfgmask.compile.limits import DEFAULT_LIMITS
from cfgmask.compile.prepare import prepare
from cfgmask.compile.tables import build_tables
from cfgmask.frontends.json_schema import schema_to_grammar

from .test_compile_tables import assert_same

SPLITS = Path(__file__).parent / "corpora" / "jsonschemabench"


@pytest.fixture(autouse=True)
def _pinned() -> None:
    prelude.pin()
    cfgmask.clear_caches()  # a generation that starts with the prelude


def _cold(schema: Any, **options: Any) -> Any:
    """Tables with no automaton cache at all (a private session builds everything)."""
    g, _ = schema_to_grammar(schema, **options)
    return build_tables(g, DEFAULT_LIMITS, prepare(g, DEFAULT_LIMITS, Session()))


def _on_prelude(schema: Any, **options: Any) -> tuple[Any, set[int]]:
    """Tables right after ``clear_caches()``, and the key ids of the cached components used."""
    cfgmask.clear_caches()
    g, _ = schema_to_grammar(schema, **options)
    used: set[int] = set()
    plan = components._plan

    def spy(*a: Any, **k: Any) -> Any:
        out = plan(*a, **k)
        used.update(key for _, key, spec in out if spec[3] is not None)
        return out

    components._plan = spy  # type: ignore[assignment]
    try:
        return build_tables(g, DEFAULT_LIMITS, prepare(g, DEFAULT_LIMITS, CACHE.session())), used
    finally:
        components._plan = plan  # type: ignore[assignment]


ANY_VALUE = [
    {},
    {"type": "object"},
    {"type": "array"},
    {"type": "object", "properties": {"a": {}, "b": {"type": "string"}}, "required": ["a"]},
    {"type": "array", "items": {"type": "object", "additionalProperties": True}},
    {"anyOf": [{"type": "integer"}, {"type": "object", "properties": {"x": {}}}]},
]


@pytest.mark.parametrize("canonical", [True, False])
@pytest.mark.parametrize("schema", ANY_VALUE, ids=[json.dumps(s) for s in ANY_VALUE])
def test_tables_on_the_prelude_equal_a_cacheless_build(schema: Any, canonical: bool) -> None:
    tables, used = _on_prelude(schema, canonical=canonical)
    assert used & CACHE.pinned()  # the prelude's components were taken, not built again
    assert_same(tables, _cold(schema, canonical=canonical))


# the commonest property values, each in two properties (prelude.VALUES): their rules' automata
# are the prelude's in the default generation mode
PROPERTY_VALUES = [
    {"type": "object", "properties": {k: {"type": t} for k in ("x", "y")}}
    for t in ("number", "integer", "boolean", "string", ["number", "null"], ["boolean", "null"])
] + [
    {"type": "object", "properties": {"x": {"type": "number"}, "y": {"type": "number"}, "z": {}}},
    {"type": "object", "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}}, "required": ["y"]},
]
# the commonest string formats (prelude.FORMATS), alone and beside a plain string's value
PROPERTY_VALUES += [
    {"type": "object", "properties": {k: {"type": "string", "format": f} for k in ("x", "y")}}
    for f in prelude.FORMATS
]
PROPERTY_VALUES.append(
    {
        "type": "object",
        "properties": {
            k: {"type": "string", "format": "date-time"} if k in "se" else {"type": "string"} for k in "abse"
        },
        "required": ["a", "s"],
    }
)


@pytest.mark.parametrize("schema", PROPERTY_VALUES, ids=[json.dumps(s) for s in PROPERTY_VALUES])
def test_property_values_on_the_prelude_equal_a_cacheless_build(schema: Any) -> None:
    built: list[list[str]] = []
    plan = components._plan

    def spy(*a: Any, **k: Any) -> Any:
        out = plan(*a, **k)
        built.extend(members for members, _, spec in out if spec[3] is None)
        return out

    components._plan = spy  # type: ignore[assignment]
    try:
        tables, used = _on_prelude(schema)
    finally:
        components._plan = plan  # type: ignore[assignment]
    assert used & CACHE.pinned()
    # the value's component was taken from the prelude, not built again
    assert not [m for members in built for m in members if m.startswith("value")], built
    assert_same(tables, _cold(schema))
    # the other generation mode has none of VALUES pinned, and the same tables as a cold build
    assert_same(_on_prelude(schema, canonical=False)[0], _cold(schema, canonical=False))


def _corpus(per_split: int = 6) -> list[tuple[str, Any]]:
    out = []
    for path in sorted(SPLITS.glob("*.jsonl")):
        with path.open(encoding="utf-8") as f:
            for line in f:
                if len([1 for i, _ in out if i.startswith(path.stem)]) == per_split:
                    break
                row = json.loads(line)
                try:
                    schema_to_grammar(row["schema"])
                except cfgmask.CfgmaskError:
                    continue
                out.append((f"{path.stem}:{row.get('id', len(out))}", row["schema"]))
    return out


CORPUS = _corpus()


@pytest.mark.parametrize("schema", [s for _, s in CORPUS], ids=[i for i, _ in CORPUS])
def test_corpus_tables_on_the_prelude_equal_a_cacheless_build(schema: Any) -> None:
    tables, _ = _on_prelude(schema)
    assert_same(tables, _cold(schema))


_leaf = st.sampled_from(
    [{}, {"type": "string"}, {"type": "integer"}, {"type": "boolean"}, {"type": "null"}, {"type": "array"}]
)
_schemas = st.recursive(
    _leaf,
    lambda inner: st.one_of(
        st.builds(lambda items: {"type": "array", "items": items}, inner),
        st.builds(
            lambda props, extra: {
                "type": "object",
                "properties": props,
                "required": sorted(props)[:1],
                "additionalProperties": extra,
            },
            st.dictionaries(st.sampled_from("abc"), inner, max_size=3),
            st.one_of(st.booleans(), inner),
        ),
        st.builds(lambda a, b: {"anyOf": [a, b]}, inner, inner),
    ),
    max_leaves=6,
)


@settings(max_examples=40, deadline=None)
@given(schema=_schemas, canonical=st.booleans())
def test_random_schemas_on_the_prelude_equal_a_cacheless_build(schema: Any, canonical: bool) -> None:
    try:
        want = _cold(schema, canonical=canonical)
    except cfgmask.CfgmaskError as e:
        with pytest.raises(type(e)):
            _on_prelude(schema, canonical=canonical)
        return
    got, _ = _on_prelude(schema, canonical=canonical)
    assert_same(got, want)


def test_clear_keeps_the_prelude_and_nothing_else() -> None:
    g, _ = schema_to_grammar({"type": "object", "properties": {"zz": {"type": "string", "maxLength": 7}}})
    build_tables(g, DEFAULT_LIMITS, prepare(g, DEFAULT_LIMITS, CACHE.session()))
    assert set(CACHE._components) > CACHE.pinned()  # the schema's own components were kept meanwhile
    cfgmask.clear_caches()
    assert set(CACHE._components) == CACHE.pinned() != frozenset()
    prel = CACHE._prelude
    assert prel is not None
    assert len(CACHE._interner.keys) == len(prel.nodes)  # no node of the schema outlives the clear
    assert len(CACHE._key_ids) == len(prel.keys)


def test_ids_stay_right_across_generations() -> None:
    prel = CACHE._prelude
    assert prel is not None
    for _ in range(3):
        cfgmask.clear_caches()
        it = CACHE._interner
        assert all(it.ids[node] == i for i, node in enumerate(prel.nodes))
        assert [k[0] for k in CACHE._key_ids if isinstance(k, tuple)] == [it.gen] * sum(
            isinstance(k, tuple) for k in CACHE._key_ids
        )
        assert sorted(CACHE._key_ids.values()) == list(range(len(prel.keys)))


def test_seeded_node_ids_are_the_ids_interning_gives() -> None:
    """Every session of a generation with the prelude starts its memo with the prelude's IR
    objects' node ids (``Interner.seed``): each is the id a walk of the object finds, in every
    generation, and the objects are alive (held by the prelude)."""
    prel = CACHE._prelude
    assert prel is not None
    held = {id(o): o for o in prel.held}
    for _ in range(2):
        cfgmask.clear_caches()
        seed = CACHE._interner.seed
        # a session reads the seed where it is (no copy) and starts its own memo empty
        sess = CACHE.session()
        assert seed and sess.seed is seed and sess.memo == {} and set(seed) <= set(held)
        assert all(sess.known(held[k]) == i for k, i in seed.items())
        walk = Session(CACHE._interner, CACHE)
        walk.seed = {}  # every object walked again
        assert {k: walk.cid(held[k]) for k in seed} == seed
        assert seed == prel.seed  # read, never written
    # a generation without the prelude (a cache that pinned none) seeds nothing
    assert AutomatonCache().session().seed == {}


def test_pin_seeds_only_generations_with_the_prelude() -> None:
    cache = AutomatonCache()
    g, _ = schema_to_grammar({"type": "string", "maxLength": 5})
    build_tables(g, DEFAULT_LIMITS, prepare(g, DEFAULT_LIMITS, cache.session()))
    own = AutomatonCache()
    g2, _ = schema_to_grammar({})
    sess = prepare(g2, DEFAULT_LIMITS, own.session())
    build_tables(g2, DEFAULT_LIMITS, sess)
    cache.pin(own, lambda members: "root" not in members, dict(sess.memo), list(sess.keep))
    assert cache.session().seed == {}  # the used generation has other ids: no seed
    cache.clear()
    assert cache.session().seed == sess.memo


def test_a_compile_begun_before_a_clear_files_nothing() -> None:
    sess = CACHE.session()
    cfgmask.clear_caches()  # a new generation: sess's key ids mean nothing in it
    g, _ = schema_to_grammar({"type": "object", "properties": {"q": {"type": "string", "maxLength": 3}}})
    build_tables(g, DEFAULT_LIMITS, prepare(g, DEFAULT_LIMITS, sess))
    assert set(CACHE._components) == CACHE.pinned()


def test_pin_leaves_a_used_generation_alone() -> None:
    cache = AutomatonCache()
    g, _ = schema_to_grammar({"type": "string", "maxLength": 5})
    build_tables(g, DEFAULT_LIMITS, prepare(g, DEFAULT_LIMITS, cache.session()))
    had = dict(cache._components)
    own = AutomatonCache()
    g2, _ = schema_to_grammar({})
    build_tables(g2, DEFAULT_LIMITS, prepare(g2, DEFAULT_LIMITS, own.session()))
    cache.pin(own, lambda members: "root" not in members)
    assert cache._components == had  # the current generation keeps what it had, no prelude yet
    cache.clear()
    assert cache.pinned() and set(cache._components) == cache.pinned()
