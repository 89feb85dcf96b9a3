"""The JSON Schema front end's shortcuts around the standard library, against what they replaced,
on random inputs: ``refs.defrag`` and ``refs._join`` (references into the document split without
urllib) against ``urldefrag`` and the old join; ``canonical_string`` against ``json.dumps``;
``unspellable`` against the regex alone; ``_loads`` (json's C scanner alone) against
``json.loads``, values and errors."""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import unquote, urldefrag, urljoin

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cfgmask import Grammar, GrammarError
from cfgmask.frontends.json_schema import _loads
from cfgmask.frontends.json_schema.canonical import _spell, canonical_string, unspellable
from cfgmask.frontends.json_schema.refs import ROOT_BASE, _join, defrag

from . import reference_wellformed

_text = st.text(alphabet=st.sampled_from("ab/#?;%~ \t\n\r:.41[]@\x00é"), max_size=12)
_base = st.sampled_from([ROOT_BASE, "https://x.org/s.json", "https://x.org/s.json#frag", "urn:a#b", ""])


@given(st.one_of(_text, _text.map(lambda t: ROOT_BASE + "#" + t), _text.map(lambda t: ROOT_BASE + t)))
def test_defrag_as_urldefrag(uri: str) -> None:
    assert defrag(uri) == tuple(urldefrag(uri))


@given(_base, st.one_of(_text, _text.map(lambda t: "#" + t)))
def test_join_as_before(base: str, ref: str) -> None:
    try:
        want = urldefrag(base)[0] + ref if ref.startswith("#") else urljoin(base, ref)
    except ValueError:  # urllib refuses it ("//[": an unclosed IPv6 host): the schema's error
        with pytest.raises(GrammarError, match="URI reference"):
            _join(base, ref)
        return
    assert _join(base, ref) == want


@pytest.mark.parametrize("key", ["$ref", "$id"])
def test_a_malformed_uri_reference_is_a_grammar_error(key: str) -> None:
    schema = {"properties": {"a": {key: "http://[x/", "type": "string"}}}
    with pytest.raises(GrammarError, match="URI reference 'http://\\[x/'"):
        Grammar.from_json_schema(json.dumps(schema))


@given(_text)
def test_unquote_shortcut(raw: str) -> None:
    assert (unquote(raw) if "%" in raw else raw) == unquote(raw)


_chars = st.text(alphabet=st.sampled_from('az"\\/\x00\x1f\n é\u2028\ud800\udc00\U0001f600'), max_size=8)


@given(_chars)
def test_canonical_string_as_json_dumps(s: str) -> None:
    canonical_string.cache_clear()
    assert canonical_string(s) == _spell(json.dumps(s, ensure_ascii=False))
    assert unspellable(s) == (re.search("[\ud800-\udbff][\udc00-\udfff]", s) is not None)


_json_text = st.one_of(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | _chars,
        lambda kids: st.lists(kids, max_size=3) | st.dictionaries(_chars, kids, max_size=3),
        max_leaves=6,
    ).map(json.dumps),
    st.text(alphabet=st.sampled_from(' \t\n{}[]":,0-1.e\ufeffatrunl'), max_size=10),
)


@given(_json_text, st.sampled_from(["", " ", "\n", "x"]), st.sampled_from(["", " ", "\t"]))
def test_loads_as_json_loads(text: str, tail: str, head: str) -> None:
    text = head + text + tail

    def outcome(f: Any) -> Any:
        try:
            return "ok", json.dumps(f(text))
        except json.JSONDecodeError as e:
            return "error", e.msg, e.pos

    assert outcome(_loads) == outcome(json.loads)


def _outcome_of(schema: Any) -> Any:
    from cfgmask.errors import GrammarError
    from cfgmask.frontends.json_schema import schema_to_grammar

    try:
        g, report = schema_to_grammar(schema, strict=False)
    except GrammarError as e:
        return "error", str(e)
    return [(k, repr(v)) for k, v in g.rules.items()], g.start, g.meta, list(report)


def test_plain_text_skips_only_what_the_index_would_not_find() -> None:
    """A text without ``$id`` (``id`` up to draft 4) or anchors compiles without the resolver's
    index walk (from the text) to what the dict compiles to with it (a dict is always indexed):
    every schema of the sample, among them those with a property named ``id`` (draft 6 on)."""
    from pathlib import Path

    from cfgmask.frontends.json_schema.refs import plain_text
    from cfgmask.frontends.json_schema.walk import detect_draft

    folder = Path(__file__).parent / "corpora" / "jsonschemabench"
    plain = with_id = 0
    for path in sorted(folder.glob("*.jsonl")):
        for line in path.read_text().splitlines():
            if not line.strip():
                continue
            text = json.dumps(json.loads(line)["schema"])
            if plain_text(text, detect_draft(json.loads(text))):
                plain += 1
                with_id += 'id"' in text
                assert _outcome_of(text) == _outcome_of(json.loads(text))
    assert plain > 150 and with_id > 20
    # draft-04 texts with a property named ``id`` and no string-valued ``id`` skip the walk too
    assert plain_text(json.dumps({"$schema": "http://json-schema.org/draft-04/schema#",
                                  "properties": {"id": {"type": "integer"}}}), 4)  # fmt: skip
    for draft in (4, 6, 7, 2019, 2020):
        for key in ("$anchor", "$dynamicAnchor", "$recursiveAnchor"):
            assert not plain_text(json.dumps({"properties": {"a": {key: "x"}}}), draft)
        # ``$id`` is an identifier from draft 6 on (Resolver._id_of)
        assert plain_text(json.dumps({"properties": {"a": {"$id": "x"}}}), draft) == (draft <= 4)
        assert not plain_text('{"properties": {"a": {"$i\\u0064": "x"}}}', draft)
        # ``id`` is an identifier up to draft 4 only (Resolver._id_of)
        assert plain_text(json.dumps({"properties": {"a": {"id": "x"}}}), draft) == (draft > 4)
        # a property named ``id`` (an object, not a string, after the colon) is no identifier
        assert plain_text(json.dumps({"properties": {"id": {"type": "string"}}}), draft)
        for text in ('{"id": "x"}', '{"id" :\n\t"x"}', '{"default": {"id":"x"}}', '{"a": {"\\u0069d": "x"}}'):
            assert not plain_text(text, draft) or draft > 4  # an id, or a false alarm: indexed
            assert not plain_text(text.replace('"id"', '"$id"'), draft) or draft <= 4
        escaped = json.dumps({"description": '"id": "x"', "title": '"$id": "y"'})
        assert plain_text(escaped, draft)  # inside a string, a quote is escaped: no key
        assert _outcome_of(escaped) == _outcome_of(json.loads(escaped))


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "propertyNames": {"$ref": "#/$defs/k"}, "$defs": {"k": {"maxLength": 3}}},
        {
            "properties": {"id": {"type": "object", "propertyNames": {"$ref": "#/definitions/k"}}},
            "definitions": {"k": {"type": "string", "pattern": "^[a-z]+$"}},
        },
        {
            "properties": {"id": {"oneOf": [{"$ref": "#/definitions/a"}, {"$ref": "#/definitions/b"}]}},
            "definitions": {"a": {"type": "string"}, "b": {"type": "integer"}},
        },
    ],
)
def test_plain_text_resolves_parts_of_unknown_base_as_the_index(schema: dict[str, Any]) -> None:
    """Parts resolved without their base (``propertyNames``, ``disjoint``'s branches: base "")
    are at the root's base unindexed too, as the index says of every node of a plain document
    (the text was rejected here, the dict enforced, before)."""
    from cfgmask.frontends.json_schema.refs import plain_text

    text = json.dumps(schema)
    assert plain_text(text, 2020)
    assert _outcome_of(text) == _outcome_of(schema)
    assert "rejected" not in repr(_outcome_of(text)[3])


_number = (
    st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from([0, -0.0, 2**53, 2**53 + 1, float(2**53), 1e308, 10**400])
)


@given(_number, _number)
def test_number_equality_keys_as_fractions(a: float, b: float) -> None:
    from fractions import Fraction

    from cfgmask.frontends.json_schema.merge import equal, equality_key

    ka, kb = equality_key(a), equality_key(b)
    assert (ka == kb) == (Fraction(a) == Fraction(b)) == equal(a, b)
    if ka == kb:
        assert hash(ka) == hash(kb)


@given(st.lists(_chars, max_size=5))
def test_canonical_strings_as_json_dumps(values: list[str]) -> None:
    from cfgmask.frontends.json_schema.canonical import canonical_strings

    assert canonical_strings(values) == [_spell(json.dumps(v, ensure_ascii=False)) for v in values]


_kw = st.sampled_from(
    ["type", "format", "$ref", "enum", "required", "items", "not", "additionalProperties", "if", "allOf",
     "anyOf", "prefixItems", "properties", "$defs", "minLength", "maxItems", "minimum", "maximum", "title"]
)  # fmt: skip
_leafval = st.sampled_from(["string", "objec", "a", "", 0, 3, -1, 1.5, 2.0, True, False, None, float("inf")])
_names = st.sampled_from(["a", "b", "type", "items"])
_val = st.recursive(
    _leafval,
    lambda kids: (
        st.lists(kids, max_size=3)
        | st.dictionaries(_names, kids, max_size=3)
        | st.dictionaries(_kw, kids, max_size=3)
    ),
    max_leaves=10,
)


@given(st.dictionaries(_kw, _val, max_size=5), st.sampled_from([4, 7, 2020]))
def test_check_document_quick_forms_as_the_checks(doc: dict[str, Any], draft: int) -> None:
    """``check_document``'s inline tests of the common forms decide as the rows' checks do: the
    same error (message, pointer) or none, subschemas visited in the same order."""
    from unittest import mock

    fast = _check_outcome(reference_wellformed.check_document_py, doc, draft)
    with mock.patch.object(reference_wellformed, "_quick", lambda *a: False):
        assert _check_outcome(reference_wellformed.check_document_py, doc, draft) == fast


def _check_outcome(check: Any, doc: Any, draft: int) -> Any:
    from cfgmask.errors import GrammarError

    try:
        check(doc, draft)
    except GrammarError as e:
        return str(e), e.pointer
    return None


@given(st.dictionaries(_kw, _val, max_size=5) | _val, st.sampled_from([4, 7, 2020]))
def test_check_document_compiled_as_python(doc: Any, draft: int) -> None:
    """The compiled walk (``_wellformed.walk``) decides as ``check_document_py``: the same error
    (message, pointer) or none, on any value (a root that is not a schema included)."""
    from cfgmask.frontends.json_schema import wellformed

    fast = _check_outcome(wellformed.check_document, doc, draft)
    assert fast == _check_outcome(reference_wellformed.check_document_py, doc, draft)


@pytest.mark.parametrize(
    "doc",
    [5, [], "x", None, True, {}, {"type": "objec"}, {"type": ["string", "nul"]}, {"type": 3},
     {"format": 1}, {"$ref": 2}, {"not": 3}, {"not": {"type": "x"}}, {"items": [{"type": "x"}]},
     {"items": 4}, {"allOf": []}, {"anyOf": [{"type": "x"}, {"type": "y"}]}, {"prefixItems": [1]},
     {"properties": {"a": 5}}, {"properties": {"a": {"type": "x"}}, "items": {"type": "y"}},
     {"$defs": {"a": {"minLength": -1}}}, {"required": ["a", "a"]}, {"required": ["a", 1]},
     {"required": "a"}, {"enum": 3}, {"minLength": -1}, {"minLength": 1.5}, {"maxItems": True},
     {"minimum": "1"}, {"minimum": float("inf")}, {"maximum": 2.5}, {"if": 3}, {"pattern": "("},
     {"dependencies": {"a": 3}}, {"patternProperties": {"(": {}}}, {"uniqueItems": 1}],
)  # fmt: skip
def test_check_document_compiled_on_malformed(doc: Any) -> None:
    """Each inline form's failures (and a root that is not a schema): the compiled walk raises
    what the Python walk raises, in every draft."""
    from cfgmask.frontends.json_schema import wellformed

    for draft in (4, 7, 2020):
        fast = _check_outcome(wellformed.check_document, doc, draft)
        assert fast == _check_outcome(reference_wellformed.check_document_py, doc, draft)


def test_check_document_compiled_on_the_corpus() -> None:
    """Every JSONSchemaBench schema: the compiled walk's outcome is the Python walk's, and both
    number the inline forms alike."""
    from pathlib import Path

    from cfgmask.frontends.json_schema import _wellformed, wellformed

    assert _wellformed.QUICK_KINDS == tuple(sorted(set(wellformed._QUICK.values())))
    w = wellformed
    assert _wellformed.QUICK_KINDS == (w._TYPE, w._STR, w._ONE, w._LIST, w._ITEMS, w._MAP, w._NAMES, w._ARRAY,
                                       w._COUNT, w._NUM)  # fmt: skip
    n = 0
    for path in sorted(Path(__file__).parent.glob("corpora/jsonschemabench/*.jsonl")):
        for line in path.read_text().splitlines():
            if line.strip():
                schema = json.loads(line)["schema"]
                for draft in (4, 7, 2020):
                    got = _check_outcome(wellformed.check_document, schema, draft)
                    assert got == _check_outcome(reference_wellformed.check_document_py, schema, draft)
                n += 1
    assert n > 200
