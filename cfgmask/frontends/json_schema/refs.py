"""``$ref`` resolution: ``$id`` base URIs, ``$anchor``, JSON pointers (RFC 6901).

References resolve into the document itself, into the documents the caller passes as
``resources`` (URI → schema), and into the draft meta-schemas, which ship with the package
(``metaschemas.json``) and are known by their URIs.  A reference to any other document is a
:class:`GrammarError` (nothing is fetched, ever).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urldefrag, urljoin

from ...errors import GrammarError

ROOT_BASE = "cfgmask:/root.json"  # a base with a path, so that relative $ids resolve
# _join's and defrag's answers without urllib for the URIs it would give back unchanged (off:
# urllib's every time, the reference tests/test_json_schema_uris.py compares against)
FAST_URIS = True

# Keywords whose values are data, not subschemas: never indexed.
DATA_KEYWORDS = {"enum", "const", "default", "examples", "example"}
# Keywords whose values map names to subschemas (the names are not keywords).
SUBSCHEMA_MAPS = (
    "properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies",
)  # fmt: skip
_SUBSCHEMA_MAPS = frozenset(SUBSCHEMA_MAPS)


@functools.lru_cache(maxsize=1)
def metaschemas() -> dict[str, Any]:
    """The draft meta-schemas (and 2019-09/2020-12 vocabulary meta-schemas) by URI, without '#'."""
    out: dict[str, Any] = json.loads((Path(__file__).parent / "metaschemas.json").read_text())
    return out


SCOPED = "cfgmask-scoped:"


def _draft_of(uri: str) -> int:
    for n in (4, 6, 7):
        if f"draft-0{n}" in uri:
            return n
    return 2019 if "2019-09" in uri else 2020


def _join(base: str, ref: str) -> str:
    """``ref`` resolved against ``base``; a reference urllib cannot parse (``//[``: an unclosed
    IPv6 host) is the schema's error, named, not urllib's bare ``ValueError``."""
    if ref.startswith("#"):
        return (base if "#" not in base else defrag(base)[0]) + ref  # urldefrag keeps a base without '#'
    if FAST_URIS and base == ROOT_BASE and ref and ref.isascii() and "[" not in ref and "]" not in ref:
        # urljoin's answer, without its two parses (~10 k instructions): ROOT_BASE's scheme,
        # ``cfgmask``, is none of urllib's ``uses_relative``, so urljoin gives back ``ref`` itself
        # whatever ref's scheme (its own, or ROOT_BASE's when it names none); and an ASCII ref
        # without brackets cannot make urlsplit raise (its only errors: an IPv6 host's brackets,
        # a non-ASCII host's NFKC check).  The root's $id (the commonest join) takes this path.
        return ref
    try:
        return urljoin(base, ref)
    except ValueError as e:
        raise GrammarError(
            f"invalid JSON Schema: the URI reference {ref!r} (against {base!r}) is malformed: {e}"
        ) from None


_ROOT_HASH = ROOT_BASE + "#"


def defrag(uri: str) -> tuple[str, str]:
    """``urldefrag(uri)``: (the URI without its fragment, the fragment).  A reference into this
    document (the commonest) is split here: urllib's parse and unparse would give the same
    pair, as ``urlsplit`` only drops tabs and line breaks from such a URI (then it is theirs)."""
    if uri.startswith(_ROOT_HASH) and "\t" not in uri and "\n" not in uri and "\r" not in uri:
        return ROOT_BASE, uri[len(_ROOT_HASH) :]
    if not FAST_URIS:
        return urldefrag(uri)
    h = uri.find("#")
    if h < 0:
        return uri, ""  # urldefrag's own answer without a '#'
    if _PLAIN_URI.fullmatch(uri, 0, h):
        if "\t" not in uri and "\n" not in uri and "\r" not in uri:  # (urlsplit drops them)
            return uri[:h], uri[h + 1 :]
    return urldefrag(uri)


# ``scheme://host/path`` that urllib's parse and unparse give back as it is (so ``urldefrag`` of it
# and a fragment is the two sides of the first '#', without its parse, unparse and namedtuples,
# ~25 k instructions): a lowercase scheme (urlsplit lowercases one), a host, ASCII printable
# characters but for those urlsplit reads (``?`` a query, ``;`` parameters, brackets an IPv6 host;
# a backslash kept out too), the path empty or from the host's '/'; what urlsplit strips or drops
# (leading spaces and controls, tabs and line breaks) is never in it.  The $id of a schema with
# one (``https://example.com/x.json#``) and every $ref resolved against it.
_PLAIN_URI = re.compile(r"[a-z][a-z0-9+.-]*://[!-\"$-.0-:<->@-Z^-~]+(?:/[!-\"$-:<->@-Z^-~]*)?")


def plain_text(text: str, draft: int) -> bool:
    """Whether the JSON text ``text`` of a schema of ``draft`` surely has no key that
    :meth:`Resolver._index` records (``$id``, or ``id`` up to draft 4, with a string value;
    ``$anchor``, ``$dynamicAnchor``): a key is spelled with its characters or with ``\\u``
    escapes, so without ``nchor"`` and ``\\u`` in the text, and without ``"$id"`` (``"id"`` up to
    draft 4) then a colon then a string's opening quote (JSON whitespace between), there is none.
    (A property named ``id``, an object there, is the common draft-04 case the colon test
    tells apart: its text is indexed for nothing.)"""
    if 'nchor"' in text or "\\u" in text:
        return False
    if draft <= 4:
        return 'id"' not in text or _ID_STRING.search(text) is None
    return '$id"' not in text or _DOLLAR_ID_STRING.search(text) is None


# a key "id" / "$id" with a string value, as JSON text spells it (an escaped quote inside a string
# is preceded by a backslash, so a match is a key or a false alarm, never a miss)
_ID_STRING = re.compile(r'"id"[ \t\n\r]*:[ \t\n\r]*"')
_DOLLAR_ID_STRING = re.compile(r'"\$id"[ \t\n\r]*:[ \t\n\r]*"')


class Resolver:
    """Indexes the resources (``$id``) and anchors of one schema document."""

    def __init__(
        self, root: Any, draft: int, extra: Mapping[str, Any] | None = None, plain: bool = False
    ) -> None:
        """``plain``: the document is known to hold no ``$id``, ``id``, ``$anchor`` or
        ``$dynamicAnchor`` key (:func:`plain_text`), so every node of it has the base
        ``ROOT_BASE``, which is what :meth:`base` answers for a node it has not indexed when
        asked from inside the document: the index walk is skipped."""
        self.draft = draft
        self.resources: dict[str, Any] = {}
        self.anchors: dict[str, Any] = {}
        self.base_of: dict[int, str] = {}
        # 2020-12 $dynamicAnchor: "resource#name" -> node, and the names each resource defines
        self.dynamic_anchors: dict[str, Any] = {}
        self.dynamic_names: dict[str, set[str]] = {}
        # $refs of inlined copies that carry their dynamic scope (absolute()): "cfgmask-scoped:N"
        self.scoped: list[tuple[str, dict[str, str]]] = []
        self.indexed: set[str] = set()  # the documents indexed, by the URI they were known by
        # unindexed (plain), an unknown base ("": the caller does not know where a node is) is
        # the root's, which the index would have given every node of the document
        self.unknown_base = ROOT_BASE if plain else ""
        if not plain:
            self._index(root, ROOT_BASE)
        self.resources.setdefault(ROOT_BASE, root)
        for uri in extra or {}:
            if not isinstance(uri, str):
                raise GrammarError(f"resources: the key {uri!r} is not a URI string")
        # indexed when a $ref first needs them (a resource of another draft is an error only then)
        self.extra = {defrag(k)[0]: v for k, v in extra.items()} if extra else {}
        self.all_loaded = False

    def _load_all(self) -> None:
        """Index every resource of the caller's draft: a $ref may name an ``$id`` inside one."""
        if self.all_loaded:
            return
        self.all_loaded = True
        for doc in self.extra:
            try:
                self._load(doc)
            except GrammarError:
                pass  # another draft, or malformed: only a $ref to it by its own URI says so

    def _load(self, doc: str) -> bool:
        """Index the caller's resource or the meta-schema with URI ``doc``; False if neither."""
        if doc in self.indexed:
            return True
        if doc in self.extra:
            schema = self.extra[doc]
        elif doc.rstrip("#") in metaschemas():
            schema = metaschemas()[doc.rstrip("#")]
        else:
            return False
        if not isinstance(schema, (dict, bool)):
            raise GrammarError(f"resources[{doc!r}] is neither an object nor a boolean")
        meta = str(schema.get("$schema", "")) if isinstance(schema, dict) else ""
        if meta and _draft_of(meta) != self.draft:
            raise GrammarError(
                f"the resource {doc} is written for {meta}, another draft than the schema's own"
                " (one draft per grammar)"
            )
        from .wellformed import check_document

        check_document(schema, self.draft)
        self.indexed.add(doc)
        self._index(schema, doc)
        self.resources.setdefault(doc, schema)
        return True

    def _id_of(self, node: dict[str, Any]) -> str | None:
        key = "id" if self.draft <= 4 else "$id"
        value = node.get(key)
        if isinstance(value, str) and not ("$ref" in node and self.draft <= 7):
            return value
        return None

    def _index(self, node: Any, base: str) -> None:
        if isinstance(node, list):
            for x in node:
                if isinstance(x, (dict, list)):  # a scalar holds no schema: no call for it
                    self._index(x, base)
            return
        if not isinstance(node, dict):
            return
        ident = self._id_of(node)
        if ident is not None:
            if ident.startswith("#") and self.draft <= 7:  # draft-07 plain-name fragment
                self.anchors[_join(base, ident)] = node
            else:
                base = defrag(_join(base, ident))[0]
                self.resources[base] = node
        anchor = node.get("$anchor")
        if isinstance(anchor, str):
            self.anchors[f"{base}#{anchor}"] = node
        dynamic = node.get("$dynamicAnchor") if self.draft >= 2020 else None
        if isinstance(dynamic, str):  # also a plain anchor, for $ref
            self.anchors.setdefault(f"{base}#{dynamic}", node)
            self.dynamic_anchors[f"{base}#{dynamic}"] = node
            self.dynamic_names.setdefault(base, set()).add(dynamic)
        self.base_of[id(node)] = base
        for key, value in node.items():
            if not isinstance(value, (dict, list)) or key in DATA_KEYWORDS:
                continue  # a scalar holds no schema
            if key in _SUBSCHEMA_MAPS:
                if isinstance(value, dict):
                    for sub in value.values():
                        if isinstance(sub, (dict, list)):
                            self._index(sub, base)
                continue
            self._index(value, base)

    def bind(self, scope: dict[str, str], base: str) -> dict[str, str]:
        """The dynamic scope ``scope`` (each ``$dynamicAnchor`` name -> the URI of its outermost
        definition) after entering the resource ``base``: the outermost definition wins."""
        names = self.dynamic_names.get(base)
        if not names:  # the resource defines none (most): no set made and subtracted, ~2 k a call
            return scope
        names = names - scope.keys()
        return {**scope, **{n: f"{base}#{n}" for n in names}} if names else scope

    def scoped_ref(self, uri: str, scope: dict[str, str]) -> str:
        """A ``$ref`` to ``uri`` that is walked in the dynamic scope ``scope`` wherever it is."""
        if not scope:
            return uri
        self.scoped.append((uri, scope))
        return f"{SCOPED}{len(self.scoped) - 1}"

    def scope_of(self, ref: Any) -> tuple[str, dict[str, str] | None]:
        """The URI a ``$ref`` names and the dynamic scope it carries (None: the walk's)."""
        if isinstance(ref, str) and ref.startswith(SCOPED):
            uri, scope = self.scoped[int(ref[len(SCOPED) :])]
            return uri, scope
        return ref, None

    def dynamic(self, ref: str, base: str, scope: dict[str, str]) -> str:
        """The absolute URI a ``$dynamicRef`` names in the dynamic scope ``scope``: its ``$ref``
        reading, unless that lands on a ``$dynamicAnchor`` of the same name (the "bookend"),
        in which case the outermost resource of the scope that defines the name."""
        uri = _join(base, ref)
        doc, name = defrag(uri)
        if uri not in self.dynamic_anchors and doc not in self.resources:
            if not self._load(doc):
                self._load_all()
        if uri in self.dynamic_anchors and name in scope:
            return scope[name]
        return uri

    def absolute(self, node: Any, base: str, scope: dict[str, str] | None = None) -> Any:
        """A copy of ``node`` whose ``$ref``s are absolute URIs and whose ``$dynamicRef``s are
        ``$ref``s to what they name in the dynamic scope ``scope`` (which entering ``node``'s
        resources extends), so that it can be inlined into a schema of another resource
        (``allOf``, ``if``, ``not``...) and still mean the same."""
        if isinstance(node, list):
            return [self.absolute(x, base, scope) for x in node]
        if not isinstance(node, dict):
            return node
        inner = self.base_of.get(id(node), base)
        if scope is not None and inner != base:
            scope = self.bind(scope, inner)
        base = inner
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                uri, carried = self.scope_of(value)
                out[key] = value if carried is not None else self.scoped_ref(_join(base, uri), scope or {})
            elif key == "$dynamicRef" and isinstance(value, str) and scope is not None:
                target = self.scoped_ref(self.dynamic(value, base, scope), scope)
                if "$ref" in node:
                    out["allOf"] = [*out.get("allOf", []), {"$ref": target}]
                else:
                    out["$ref"] = target
            elif key in DATA_KEYWORDS or key in ("$id", "id", "$anchor"):
                out[key] = value
            elif key in SUBSCHEMA_MAPS and isinstance(value, dict):
                out[key] = {k: self.absolute(v, base, scope) for k, v in value.items()}
            elif key == "allOf" and "allOf" in out:
                out[key] = [*out[key], *self.absolute(value, base, scope)]
            else:
                out[key] = self.absolute(value, base, scope)
        return out

    def base(self, node: Any, default: str) -> str:
        return self.base_of.get(id(node), default or self.unknown_base)

    def resolve(self, ref: str, base: str) -> tuple[Any, str, str]:
        """The subschema ``ref`` names, its base URI and a readable location."""
        ref = self.scope_of(ref)[0]
        uri = _join(base, ref)
        doc, frag = defrag(uri)
        if uri in self.anchors:
            node = self.anchors[uri]
            return node, self.base(node, doc), uri
        if doc not in self.resources and uri not in self.anchors and not self._load(doc):
            self._load_all()
        if uri in self.anchors:
            node = self.anchors[uri]
            return node, self.base(node, doc), uri
        if doc not in self.resources:
            raise GrammarError(
                f"$ref {ref!r} points outside this schema ({doc}); only this document, the"
                " meta-schemas and the documents passed as resources= are resolved"
            )
        node = self.resources[doc]
        if frag == "":
            return node, doc, uri
        if not frag.startswith("/"):
            raise GrammarError(
                f"$ref {ref!r}: no anchor {frag!r} in {'this schema' if doc == ROOT_BASE else doc}"
            )
        at = ""
        for raw in frag[1:].split("/"):
            token = (unquote(raw) if "%" in raw else raw).replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict) and token in node:
                node = node[token]
            elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
                node = node[int(token)]
            else:
                raise GrammarError(
                    f"$ref {ref!r}: the JSON pointer {frag!r} leads nowhere: {at or '/'} has no {token!r}"
                )
            at += "/" + raw
        return node, self.base(node, doc), uri
