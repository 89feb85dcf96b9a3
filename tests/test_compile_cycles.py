"""A JSON Schema compile leaves no reference cycle behind for its own state: the front end's
walk (``SchemaCompiler`` and the helpers that point back at it), an array's recursive ``tail``
and the literal-set pass's ``rewrite`` (which holds the compile session) are freed by reference
counting when they finish.  Left to the collector, a median schema's few hundred IR nodes,
tuples and dicts were walked and cleared by its passes in the middle of the next compile
(about 2 % of a median compile's instructions, session 26)."""

from __future__ import annotations

import gc
import json
from collections.abc import Iterator

import pytest

import cfgmask

VOCAB = cfgmask.Vocabulary.from_token_bytes([bytes([b]) for b in range(256)] + [b'{"', b'":', b"12"])

SCHEMAS = {
    # prefixItems then more items: Containers.array's tail, walked by position
    "array": {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}], "minItems": 1},
    # an enum of strings inside an object: a literal set outlined into a rule of its own
    "literal set": {
        "type": "object",
        "properties": {"k": {"enum": ["red", "green", "blue", "cyan"]}, "n": {"type": "number"}},
        "required": ["k"],
    },
    "nested": {
        "type": "object",
        "properties": {
            "a": {"type": "array", "items": {"type": "object", "properties": {"b": {"type": "string"}}}}
        },
    },
}


@pytest.fixture
def collector_off() -> Iterator[None]:
    """The collector off and its garbage kept for inspection; as it was afterwards."""
    was = gc.isenabled()
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        yield
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        if was:
            gc.enable()


def _cyclic_garbage(schema: dict[str, object]) -> list[str]:
    """What a compile of ``schema`` leaves for the collector, by type (functions by name)."""
    gc.collect()
    gc.garbage.clear()
    cfgmask.clear_caches()
    compiled = cfgmask.compile(cfgmask.Grammar.from_json_schema(json.dumps(schema)), VOCAB)
    del compiled
    gc.collect()
    return [o.__qualname__ if type(o).__name__ == "function" else type(o).__qualname__ for o in gc.garbage]


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_compile_state_freed_without_the_collector(name: str, collector_off: None) -> None:
    left = _cyclic_garbage(SCHEMAS[name])
    for kept in ("SchemaCompiler", "Strings", "Containers", "Session", "Reporter", "Resolver"):
        assert kept not in left
    assert not [f for f in left if f.endswith((".tail", ".rewrite"))]


def test_the_cases_reach_the_cycles(collector_off: None) -> None:
    """The schemas above do go through the walks whose cycles are broken: an array tail and a
    literal set outlined (their closures made), so the test above is not vacuous."""
    from cfgmask.compile import components
    from cfgmask.frontends.json_schema import containers

    made: list[str] = []
    outline, array = components.outline_sets, containers.Containers.array

    def outline_spy(*a: object, **k: object) -> object:
        made.append("rewrite")
        return outline(*a, **k)  # type: ignore[arg-type]

    def array_spy(self: containers.Containers, *a: object, **k: object) -> object:
        made.append("tail")
        return array(self, *a, **k)  # type: ignore[arg-type]

    mp = pytest.MonkeyPatch()
    try:
        mp.setattr(components, "outline_sets", outline_spy)
        mp.setattr(containers.Containers, "array", array_spy)
        for schema in SCHEMAS.values():
            cfgmask.clear_caches()
            cfgmask.compile(cfgmask.Grammar.from_json_schema(json.dumps(schema)), VOCAB)
    finally:
        mp.undo()
    assert "rewrite" in made and "tail" in made
