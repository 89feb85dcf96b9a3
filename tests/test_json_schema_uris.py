"""refs._join and refs.defrag answer plain URIs without urllib (``FAST_URIS``): the same answers
as ``urljoin(ROOT_BASE, ref)`` and ``urldefrag(uri)``, and the same grammars and reports for
schemas with an ``$id`` (whose every ``$ref`` is resolved against it) as with the shortcut off."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import urldefrag, urljoin

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cfgmask import Grammar, clear_caches
from cfgmask.errors import CfgmaskError
from cfgmask.frontends.json_schema import refs

CORPUS = Path(__file__).parent / "corpora" / "jsonschemabench"

# pieces that make URIs near the shortcut's edges: schemes, upper case, the characters urlsplit
# reads ('?', ';', brackets, '#'), what it strips (spaces, tabs, controls), non-ASCII
_PIECES = st.sampled_from(
    ["https://", "http://", "HTTP://", "a+b.c-d://", "urn:x:", "cfgmask:", "//", "/", "#", "?", ";",
     "[", "]", "\\", "example.com", ":80", "@", "%20", " ", "\t", "\n", "\x00", "\x7f", "..", "../",
     "x.json", "é", "\uff03", "\u3000"]
)  # fmt: skip
_URIS = st.lists(st.one_of(_PIECES, st.characters(max_codepoint=0x7F)), max_size=10).map("".join)
_PLAIN = st.builds(
    lambda s, h, p, f: f"{s}://{h}{p}#{f}",
    st.sampled_from(["https", "http", "urn", "a+b.c-d"]),
    st.text("abcxyz0123.-:@%!$&'()*+,=~_", min_size=1, max_size=12),
    st.sampled_from(["", "/", "/a/b.json", "/schemas/x-1.json", "/a//b"]),
    _URIS,
)


def _both(f: Any, *args: Any) -> Any:
    try:
        return tuple(f(*args)) if f in (urldefrag, refs.defrag) else f(*args)
    except (ValueError, CfgmaskError):  # urllib's ValueError, _join's GrammarError naming it
        return "malformed"


@given(st.one_of(_URIS, _PLAIN))
def test_defrag_is_urldefrag(uri: str) -> None:
    assert _both(refs.defrag, uri) == _both(urldefrag, uri)


@given(st.one_of(_URIS, _PLAIN))
def test_join_from_the_root_is_urljoin(ref: str) -> None:
    if ref.startswith("#"):
        return  # _join's own answer, not urllib's (a fragment of the base)
    assert _both(refs._join, refs.ROOT_BASE, ref) == _both(urljoin, refs.ROOT_BASE, ref)


# every character that urlsplit reads or drops, in the host, the path and the fragment of a URI
# the shortcut would otherwise take, and in a reference joined to the root
_EDGES = [
    u.format(ch)
    for ch in ["?", ";", "[", "]", "\\", "#", " ", "\t", "\n", "\r", "\x00", "\x7f", "é", "\uff03", "", "A",
               "/"]
    for u in ["https://ex{}ample.com/a.json#f", "https://example.com/a{}b.json#f", "https://example.com/a#{}f",
              "{}https://example.com/a#f", "https://{}/a#x", "https://x{}", "HTTPS://x{}#", "ht{}tp://x/#",
              "https://x{}#f", "https://x/{}#f"]
] + ["https://[::1]/a#f", "https://[::1/a#f", "https://::1]/a#f", "https://[v1.x]/a#", "https://[zz]/#",
     "cfgmask:/x#", "urn:x:y#z", "https:///a#f", "https:a#f", "", "#", "https://x#"]  # fmt: skip


@pytest.mark.parametrize("uri", _EDGES)
def test_edges(uri: str) -> None:
    assert _both(refs.defrag, uri) == _both(urldefrag, uri)
    if not uri.startswith("#"):
        assert _both(refs._join, refs.ROOT_BASE, uri) == _both(urljoin, refs.ROOT_BASE, uri)


def test_the_shortcut_is_taken() -> None:
    """A root $id and a $ref against it take both shortcuts (so the tests above compare them)."""
    uri = "https://example.com/schemas/a.json#"
    assert refs._PLAIN_URI.fullmatch(uri, 0, uri.find("#"))
    assert refs._join(refs.ROOT_BASE, uri) is uri  # urljoin would give back an equal string


def _dump(schema: Any, **kw: Any) -> str:
    try:
        g = Grammar.from_json_schema(schema, **kw)
    except CfgmaskError as e:
        return f"error {type(e).__name__} {e!s} {getattr(e, 'pointer', None)!r}"
    rules = "\n".join(f"{n} = {b!r}" for n, b in g.ir.rules.items())
    report = "\n".join(repr((e.path, e.keyword, e.status, e.reason)) for e in g.schema_report)
    return f"{g.ir.start}\n{g.ir.meta!r}\n{rules}\n{report}"


def _with_ids() -> list[Any]:
    out = []
    for path in sorted(CORPUS.glob("*.jsonl")):
        for line in path.read_text().split("\n"):
            if line.strip():
                schema = json.loads(line)["schema"]
                text = json.dumps(schema)
                if '"$id": "' in text or '"id": "' in text:  # (draft-04's id)
                    out.append(schema)
    return out


SCHEMAS = _with_ids() + [
    {"$id": "https://example.com/root.json", "$defs": {"a": {"type": "integer"}}, "$ref": "#/$defs/a"},
    {"$id": "https://example.com/root.json#", "properties": {"x": {"$ref": "https://example.com/root.json#/$defs/a"}},
     "$defs": {"a": {"$id": "other.json", "type": "string"}}},
    {"$id": "http://EXAMPLE.com/a;b?q#", "$defs": {"a": {"const": 1}}, "$ref": "#/$defs/a"},
    {"$id": "HTTPS://example.com/a.json", "$ref": "#/$defs/nope"},
    {"$id": "https://example.com/[x.json", "type": "null"},
]  # fmt: skip


@pytest.mark.parametrize("canonical", [True, False])
def test_schemas_with_ids_same_with_the_shortcut_off(
    monkeypatch: pytest.MonkeyPatch, canonical: bool
) -> None:
    assert len(SCHEMAS) > 25
    clear_caches()
    on = [_dump(s, canonical=canonical, strict=False) for s in SCHEMAS]
    monkeypatch.setattr(refs, "FAST_URIS", False)
    clear_caches()
    off = [_dump(s, canonical=canonical, strict=False) for s in SCHEMAS]
    assert on == off
