"""A second, independent reading of structural tags: which prefixes of a text a format can match.

Written from XGrammar's documentation (docs/structural_tag/structural_tag.md and
advanced_usage.md), not from the front end: no automaton, just positions in a Python string.
``accepts(spec, text)`` is whether the whole text is in the language.  Supports the text formats
the hypothesis tests draw: const_string, regex, any_text, sequence, or, optional, star, plus,
repeat, tag, triggered_tags, tags_with_separator, json_schema (via ``json`` and ``jsonschema``).

Free text (any_text, and the text between tags of triggered_tags) must not contain the
``excludes`` nor the end strings of the nearest enclosing tag; in triggered_tags, the first
complete trigger in the free text dispatches to the tags that begin with it.
"""

from __future__ import annotations

import json
import re
from typing import Any

import jsonschema


def accepts(spec: dict[str, Any], text: str) -> bool:
    fmt = spec["format"] if spec.get("type") == "structural_tag" else spec
    return len(text) in _Oracle(text).ends(fmt, 0, ())


class _Oracle:
    def __init__(self, text: str) -> None:
        self.s = text
        self.memo: dict[tuple[int, int, tuple[str, ...]], frozenset[int]] = {}
        self.synthesized: list[Any] = []

    def ends(self, f: dict[str, Any], i: int, stops: tuple[str, ...]) -> frozenset[int]:
        key = (id(f), i, stops)
        if key not in self.memo:
            self.memo[key] = frozenset()  # a left-recursive loop derives nothing new
            self.memo[key] = frozenset(getattr(self, "_" + f["type"])(f, i, stops))
        return self.memo[key]

    def _seq_ends(self, parts: list[Any], i: int, stops: tuple[str, ...]) -> set[int]:
        here = {i}
        for p in parts:
            here = {k for j in here for k in self.ends(p, j, stops)}
        return here

    def _const_string(self, f: dict[str, Any], i: int, stops: tuple[str, ...]) -> set[int]:
        return {i + len(f["value"])} if self.s.startswith(f["value"], i) else set()

    def _regex(self, f: dict[str, Any], i: int, stops: tuple[str, ...]) -> set[int]:
        return {j for j in range(i, len(self.s) + 1) if re.fullmatch(f["pattern"], self.s[i:j])}

    def _json_schema(self, f: dict[str, Any], i: int, stops: tuple[str, ...]) -> set[int]:
        out = set()
        for j in range(i + 1, len(self.s) + 1):
            try:
                doc = json.loads(self.s[i:j])
            except ValueError:
                continue
            if jsonschema.Draft202012Validator(f["json_schema"]).is_valid(doc):
                out.add(j)
        return out

    def _free(self, i: int, excludes: list[str]) -> set[int]:
        """Ends of free text from ``i`` that contains no excluded string."""
        out = set()
        for j in range(i, len(self.s) + 1):
            if any(self.s[i:j].endswith(e) for e in excludes):
                break
            out.add(j)
        return out

    def _any_text(self, f: dict[str, Any], i: int, stops: tuple[str, ...]) -> set[int]:
        out = self._free(i, [*f.get("excludes", []), *(e for e in stops if e)])
        cap = f.get("max_chars")
        return out if cap is None else {j for j in out if j - i <= cap}

    def _sequence(self, f: dict[str, Any], i: int, stops: tuple[str, ...]) -> set[int]:
        return self._seq_ends(f["elements"], i, stops)

    def _or(self, f: dict[str, Any], i: int, stops: tuple[str, ...]) -> set[int]:
        return {j for e in f["elements"] for j in self.ends(e, i, stops)}

    def _repeat_ends(self, content: Any, i: int, stops: tuple[str, ...], lo: int, hi: int | None) -> set[int]:
        layer = {i}
        for _ in range(lo):
            layer = {k for j in layer for k in self.ends(content, j, stops)}
        out = set(layer)
        if hi is None:
            todo = list(layer)
            while todo:
                for k in self.ends(content, todo.pop(), stops):
                    if k not in out:
                        out.add(k)
                        todo.append(k)
            return out
        for _ in range(hi - lo):
            layer = {k for j in layer for k in self.ends(content, j, stops)}
            out |= layer
        return out

    def _optional(self, f: dict[str, Any], i: int, stops: tuple[str, ...]) -> set[int]:
        return self._repeat_ends(f["content"], i, stops, 0, 1)

    def _star(self, f: dict[str, Any], i: int, stops: tuple[str, ...]) -> set[int]:
        return self._repeat_ends(f["content"], i, stops, 0, None)

    def _plus(self, f: dict[str, Any], i: int, stops: tuple[str, ...]) -> set[int]:
        return self._repeat_ends(f["content"], i, stops, 1, None)

    def _repeat(self, f: dict[str, Any], i: int, stops: tuple[str, ...]) -> set[int]:
        return self._repeat_ends(f["content"], i, stops, f["min"], None if f["max"] == -1 else f["max"])

    def _tag_rest(self, tag: dict[str, Any], i: int, skip: int) -> set[int]:
        """Ends of ``tag`` from ``i`` with the first ``skip`` characters of its begin already read."""
        begin = tag["begin"][skip:]
        if not self.s.startswith(begin, i):
            return set()
        end = tag["end"] if isinstance(tag["end"], list) else [tag["end"]]
        out = set()
        for j in self.ends(tag["content"], i + len(begin), tuple(end)):
            out |= {j + len(e) for e in end if self.s.startswith(e, j)}
        return out

    def _tag(self, f: dict[str, Any], i: int, stops: tuple[str, ...]) -> set[int]:
        return self._tag_rest(f, i, 0)

    def _triggered_tags(self, f: dict[str, Any], i: int, stops: tuple[str, ...]) -> set[int]:
        tags, triggers = f["tags"], f["triggers"]
        excludes = [*f.get("excludes", []), *(e for e in stops if e)]
        loop = not f.get("stop_after_first", False)
        any_tag = {j for t in tags for j in self._tag_rest(t, i, 0)}
        if f.get("at_least_one", False):
            if not loop:
                return any_tag
            return {k for j in any_tag for k in self._dispatching(j, tags, triggers, excludes, loop)}
        return self._dispatching(i, tags, triggers, excludes, loop)

    def _dispatching(
        self, i: int, tags: list[Any], triggers: list[str], excludes: list[str], loop: bool
    ) -> set[int]:
        out: set[int] = set()
        todo, seen = [i], set()
        while todo:
            start = todo.pop()
            if start in seen:
                continue
            seen.add(start)
            for j in range(start, len(self.s) + 1):
                text = self.s[start:j]
                if any(text.endswith(e) for e in excludes):
                    break
                fired = [t for t in triggers if text.endswith(t)]
                if fired:
                    for t in fired:
                        for tag in tags:
                            if tag["begin"].startswith(t):
                                after = self._tag_rest(tag, j, len(t))
                                (todo.extend if loop else out.update)(after)
                    break
                out.add(j)
        return out

    def _tags_with_separator(self, f: dict[str, Any], i: int, stops: tuple[str, ...]) -> set[int]:
        one = {"type": "or", "elements": f["tags"]}
        sep = {"type": "const_string", "value": f["separator"]}
        if f.get("stop_after_first", False):
            body = one
        else:
            body = {
                "type": "sequence",
                "elements": [one, {"type": "star", "content": {"type": "sequence", "elements": [sep, one]}}],
            }
        self.synthesized.append(body)  # kept alive: the memo is keyed by id
        ends = set(self.ends(body, i, stops))
        if not f.get("at_least_one", False):
            ends.add(i)
        return ends
