"""``$ref`` resolution: ``$id`` base URIs, ``$anchor``, JSON pointers (RFC 6901).

References resolve into the document itself, into the documents the caller passes as
``resources`` (URI → schema), and into the draft meta-schemas, which ship with the package
(``metaschemas.json``) and are known by their URIs.  A reference to any other document is a
:class:`GrammarError` (nothing is fetched, ever).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urldefrag, urljoin

from ...errors import GrammarError

ROOT_BASE = "cfgmask:/root.json"  # a base with a path, so that relative $ids resolve

# Keywords whose values are data, not subschemas: never indexed.
DATA_KEYWORDS = {"enum", "const", "default", "examples", "example"}


@functools.lru_cache(maxsize=1)
def metaschemas() -> dict[str, Any]:
    """The draft meta-schemas (and 2019-09/2020-12 vocabulary meta-schemas) by URI, without '#'."""
    out: dict[str, Any] = json.loads((Path(__file__).parent / "metaschemas.json").read_text())
    return out


def _draft_of(uri: str) -> int:
    for n in (4, 6, 7):
        if f"draft-0{n}" in uri:
            return n
    return 2019 if "2019-09" in uri else 2020


def _join(base: str, ref: str) -> str:
    if ref.startswith("#"):
        return urldefrag(base)[0] + ref
    return urljoin(base, ref)


class Resolver:
    """Indexes the resources (``$id``) and anchors of one schema document."""

    def __init__(self, root: Any, draft: int, extra: Mapping[str, Any] | None = None) -> None:
        self.draft = draft
        self.resources: dict[str, Any] = {}
        self.anchors: dict[str, Any] = {}
        self.base_of: dict[int, str] = {}
        self.indexed: set[str] = set()  # the documents indexed, by the URI they were known by
        self._index(root, ROOT_BASE)
        self.resources.setdefault(ROOT_BASE, root)
        for uri in extra or {}:
            if not isinstance(uri, str):
                raise GrammarError(f"resources: the key {uri!r} is not a URI string")
        # indexed when a $ref first needs them (a resource of another draft is an error only then)
        self.extra = {urldefrag(k)[0]: v for k, v in (extra or {}).items()}
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
                self._index(x, base)
            return
        if not isinstance(node, dict):
            return
        ident = self._id_of(node)
        if ident is not None:
            if ident.startswith("#") and self.draft <= 7:  # draft-07 plain-name fragment
                self.anchors[_join(base, ident)] = node
            else:
                base = urldefrag(_join(base, ident))[0]
                self.resources[base] = node
        anchor = node.get("$anchor")
        if isinstance(anchor, str):
            self.anchors[f"{base}#{anchor}"] = node
        self.base_of[id(node)] = base
        for key, value in node.items():
            if key in DATA_KEYWORDS:
                continue
            if key in (
                "properties",
                "patternProperties",
                "$defs",
                "definitions",
                "dependentSchemas",
                "dependencies",
            ):
                if isinstance(value, dict):
                    for sub in value.values():
                        self._index(sub, base)
                continue
            self._index(value, base)

    def absolute(self, node: Any, base: str) -> Any:
        """A copy of ``node`` whose ``$ref``s are absolute URIs, so that it can be inlined into a
        schema of another resource (``allOf``, ``if``, ``not``...) and still mean the same."""
        if isinstance(node, list):
            return [self.absolute(x, base) for x in node]
        if not isinstance(node, dict):
            return node
        base = self.base_of.get(id(node), base)
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                out[key] = _join(base, value)
            elif key in DATA_KEYWORDS or key in ("$id", "id", "$anchor"):
                out[key] = value if key in DATA_KEYWORDS else value
            elif key in ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies") and isinstance(value, dict):
                out[key] = {k: self.absolute(v, base) for k, v in value.items()}
            else:
                out[key] = self.absolute(value, base)
        return out

    def base(self, node: Any, default: str) -> str:
        return self.base_of.get(id(node), default)

    def resolve(self, ref: str, base: str) -> tuple[Any, str, str]:
        """The subschema ``ref`` names, its base URI and a readable location."""
        uri = _join(base, ref)
        doc, frag = urldefrag(uri)
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
            token = unquote(raw).replace("~1", "/").replace("~0", "~")
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
