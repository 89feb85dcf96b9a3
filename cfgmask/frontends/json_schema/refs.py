"""Local ``$ref`` resolution: ``$id`` base URIs, ``$anchor``, JSON pointers (RFC 6901).

Only references into the document itself are resolved; a reference to any
other document is a :class:`GrammarError` (nothing is fetched, ever).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote, urldefrag, urljoin

from ...errors import GrammarError

ROOT_BASE = "cfgmask:/root.json"  # a base with a path, so that relative $ids resolve

# Keywords whose values are data, not subschemas: never indexed.
DATA_KEYWORDS = {"enum", "const", "default", "examples", "example"}


def _join(base: str, ref: str) -> str:
    if ref.startswith("#"):
        return urldefrag(base)[0] + ref
    return urljoin(base, ref)


class Resolver:
    """Indexes the resources (``$id``) and anchors of one schema document."""

    def __init__(self, root: Any, draft: int) -> None:
        self.draft = draft
        self.resources: dict[str, Any] = {}
        self.anchors: dict[str, Any] = {}
        self.base_of: dict[int, str] = {}
        self._index(root, ROOT_BASE)
        self.resources.setdefault(ROOT_BASE, root)

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

    def base(self, node: Any, default: str) -> str:
        return self.base_of.get(id(node), default)

    def resolve(self, ref: str, base: str) -> tuple[Any, str, str]:
        """The subschema ``ref`` names, its base URI and a readable location."""
        uri = _join(base, ref)
        doc, frag = urldefrag(uri)
        if uri in self.anchors:
            node = self.anchors[uri]
            return node, self.base(node, doc), uri
        if doc not in self.resources:
            raise GrammarError(
                f"$ref {ref!r} points outside this schema ({doc}); only local references are resolved"
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
