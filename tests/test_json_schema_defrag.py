"""``refs.defrag`` (a URI split at its fragment without urllib for references into the document)
and ``refs._join`` against urllib's ``urldefrag`` and the join they replaced, on random URIs."""

from __future__ import annotations

from urllib.parse import unquote, urldefrag, urljoin

from hypothesis import given
from hypothesis import strategies as st

from cfgmask.frontends.json_schema.refs import ROOT_BASE, _join, defrag

_text = st.text(alphabet=st.sampled_from("ab/#?;%~ \t\n\r:.41[]@\x00é"), max_size=12)
_base = st.sampled_from([ROOT_BASE, "https://x.org/s.json", "https://x.org/s.json#frag", "urn:a#b", ""])


@given(st.one_of(_text, _text.map(lambda t: ROOT_BASE + "#" + t), _text.map(lambda t: ROOT_BASE + t)))
def test_defrag_as_urldefrag(uri: str) -> None:
    assert defrag(uri) == tuple(urldefrag(uri))


@given(_base, st.one_of(_text, _text.map(lambda t: "#" + t)))
def test_join_as_before(base: str, ref: str) -> None:
    want = urldefrag(base)[0] + ref if ref.startswith("#") else urljoin(base, ref)
    assert _join(base, ref) == want


@given(_text)
def test_unquote_shortcut(raw: str) -> None:
    assert (unquote(raw) if "%" in raw else raw) == unquote(raw)
