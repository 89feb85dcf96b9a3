"""The JSON Schema front end's memo tables never change what it makes.

The front end keeps process-wide tables of what repeats between schemas (literals, rule-name
stems, whitespace, canonical strings, pattern and format languages, the JSON spellings of
pattern expressions, regex syntax checks).  A schema compiled when the tables are warm from
other schemas must give the same IR (rule names in order, bodies, start, meta) and the same
report or error as in a process that has seen nothing, whatever came before it.
"""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from cfgmask import Grammar
from cfgmask.errors import CfgmaskError
from cfgmask.frontends import json_schema
from cfgmask.frontends.json_schema import _ir_util

CORPUS = Path(__file__).parent / "corpora" / "jsonschemabench"


def _schemas() -> list[tuple[str, Any]]:
    out = []
    for path in sorted(CORPUS.glob("*.jsonl")):
        for line in path.read_text().split("\n"):
            if line.strip():
                r = json.loads(line)
                out.append((r["id"], r["schema"]))
    return out


def _clear_memos() -> None:
    """Empty every memo table of the front end's modules: a fresh process."""
    pkg = Path(json_schema.__file__).parent
    for mod in list(sys.modules.values()):
        f = getattr(mod, "__file__", None) or ""
        if f and Path(f).parent == pkg:
            for v in vars(mod).values():
                if isinstance(v, functools._lru_cache_wrapper):
                    v.cache_clear()
    _ir_util._STEMS.clear()
    _ir_util._LITERALS.clear()


def _output(schema: Any, canonical: bool) -> str:
    try:
        g = Grammar.from_json_schema(json.dumps(schema), canonical=canonical, strict=False)
    except CfgmaskError as e:
        return f"{type(e).__name__}: {e}"
    rules = [(name, repr(body)) for name, body in g.ir.rules.items()]
    report = [(e.path, e.keyword, e.status, e.reason) for e in g.schema_report]
    return repr((g.ir.start, g.ir.meta, rules, report))


@pytest.mark.parametrize("canonical", [True, False])
def test_warm_memo_tables_give_what_a_fresh_process_gives(canonical: bool) -> None:
    """Every schema of the sample (the whole language: every fourth, it is slower to build)."""
    schemas = _schemas()
    assert len(schemas) == 240
    if not canonical:
        schemas = schemas[::4]
    _clear_memos()
    warm = {ident: _output(s, canonical) for ident, s in schemas}  # each after all before it
    for ident, s in reversed(schemas):
        _clear_memos()
        assert _output(s, canonical) == warm[ident], ident


def test_the_same_schema_twice_gives_the_same_grammar() -> None:
    """A memo hit (the second compile) builds equal IR, and compiling other schemas in
    between (other patterns, formats, keys) does not disturb it."""
    schema = {
        "type": "object",
        "properties": {
            "when": {"type": "string", "format": "date-time"},
            "code": {"type": "string", "pattern": "^[A-Z]{2}-\\d+$", "maxLength": 12},
            "a/b~c": {"enum": ["x", "y\n"]},
        },
        "additionalProperties": {"type": "integer"},
    }
    first = _output(schema, True)
    for _, other in _schemas()[:40]:
        _output(other, True)
    assert _output(schema, True) == first
    _clear_memos()
    assert _output(schema, True) == first
