"""JSON Schema → IR: the walk over the schema, applicators and scalar types.

Objects and arrays live in :mod:`.containers`; strings in :mod:`.strings`.
Every dict schema compiles to an expression; ``$ref`` targets become rules of
their own (so recursive schemas become recursive rules).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from ... import deadline, ir
from ...errors import GrammarError, NotEnforceable
from . import _ir_util as U
from . import chardfa
from .canonical import canonical_string, unspellable
from .containers import SCALAR_TYPES, Containers
from .disjoint import disjoint
from .empty import Reason, because
from .enums import canonical_set, full_set, kept_values
from .lexical import CANONICAL_CHAR, ENC_ANY, JSON_CHAR, JSON_NUMBER, encode_text, whitespace
from .merge import (
    ANNOTATIONS,
    NORMALIZED,
    TYPES,
    Unmergeable,
    evaluate,
    intersect,
    is_annotation,
    json_type,
    normalize,
    type_set,
)
from .numbers import cap_digits, decimal_of, multiple_of, multiples_rule_name, multiples_within, number_range
from .refs import ROOT_BASE, Resolver, defrag
from .report import Reporter, pointer
from .strings import Strings
from .wellformed import check_document

STRING_KW = {"minLength", "maxLength", "pattern", "format"}
NUMBER_KW = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"}
OBJECT_KW = {
    "properties", "required", "additionalProperties", "patternProperties", "minProperties", "maxProperties",
    "propertyNames", "dependentRequired", "dependentSchemas", "unevaluatedProperties",
}  # fmt: skip
ARRAY_KW = {"prefixItems", "items", "minItems", "maxItems", "uniqueItems", "contains", "minContains",
            "maxContains", "unevaluatedItems"}  # fmt: skip
GENERIC_KW = {"type", "enum", "not", "if", "then", "else", "$ref", "allOf", "anyOf", "oneOf"}
KNOWN = STRING_KW | NUMBER_KW | OBJECT_KW | ARRAY_KW | GENERIC_KW
MAX_DEPTH = 2_000  # schema nesting; deep walks run on a big stack (cfgmask/deep.py)
# Keywords of a JSON Schema vocabulary that this converter cannot enforce.
UNSUPPORTED = {"$dynamicRef", "$recursiveRef"}  # $dynamicRef: 2019-09 has none; 2020-12 resolves it
# Keywords of no JSON Schema vocabulary ("self", "x-order", typos): JSON Schema 2020-12 section 6.5
# and the jsonschema package treat them as annotations, so ignoring them is exact.  Set to
# "reject" to refuse them in strict mode instead.
UNKNOWN_KEYWORDS = "annotate"
UNKNOWN_REASON = "unknown keyword: an annotation (no vocabulary defines it), as JSON Schema says"
NOT_PLAIN = frozenset(KNOWN | UNSUPPORTED | NORMALIZED)  # see PLAIN_KW
KNOWN_META = {
    f"{scheme}://json-schema.org/{d}/schema"
    for scheme in ("http", "https")
    for d in ("draft-04", "draft-06", "draft-07", "draft/2019-09", "draft/2020-12")
}
MAX_REF_EXPANSIONS = 64
MAX_INLINED_REFS = 32  # oneOf/anyOf branches with a $ref inlined, nested in one another
# Keywords whose walk may inline a $ref target (resolve_part): a schema holding one that is met
# again inside its own walk (same content, base and scope) is a reference to the rule of that walk
# (SchemaCompiler.walked), so an inlined recursion becomes recursion in the grammar.
INLINING = frozenset(
    {"allOf", "anyOf", "oneOf", "not", "if", "dependentSchemas", "dependencies", "$dynamicRef"}
)
MAX_ONE_OF_TERMS = 64  # terms of an overlapping oneOf written as a union (see _exactly_one)
MAX_NEGATION_DEPTH = 4  # nested properties that _negate walks into
# Bounds an 'if' may test, and the keyword whose value range is their complement (same value;
# lengths shift by one): ¬(x >= v) is x < v, ¬(len <= v) is len >= v + 1.
NEGATABLE_BOUNDS = {
    "minimum": "exclusiveMaximum", "exclusiveMinimum": "maximum", "maximum": "exclusiveMinimum",
    "exclusiveMaximum": "minimum", "minLength": "maxLength", "maxLength": "minLength",
}  # fmt: skip
# A condition on the keys present in an object: ("anyOf" | "oneOf" | "not", key sets), true when
# some / exactly one / not every set is contained in the instance's keys.
Presence = tuple[str, list[frozenset[str]]]
PRESENCE = "\x00presence"  # where negation() hands one back
MAX_MULTIPLE_OF = 1000
# The keywords of a plain object (1) and a plain array (2), that _schema sends to Containers'
# object or array directly: with these alone (annotations aside) and "type" the one type,
# neither normalize nor simple changes or reports anything but "type" (an array's "items" a
# schema, its counts nonnegative ints); _schema reads each keyword's bits here in one lookup
PLAIN_KW = {"type": 3, "properties": 1, "required": 1, "additionalProperties": 1, "items": 2,
            "minItems": 2, "maxItems": 2}  # fmt: skip
# keywords that keep a schema off that path (those of PLAIN_KW aside): every other known one,
# and those normalize respells; a keyword of none of these is unknown, an annotation that
# simple reports (_unknown), which the plain path does as well
# a scalar type's own keywords: member_value compiles a leaf of one type with these beside it
# annotations that name a resource or an anchor: a value holding one takes schema()'s path
BASE_KEYWORDS = frozenset({"$id", "id", "$anchor", "$dynamicAnchor"})
LEAF_KW = {
    "string": frozenset({*STRING_KW, "enum", "const"}),
    "integer": frozenset({*NUMBER_KW, "enum", "const"}),
    "number": frozenset({*NUMBER_KW, "enum", "const"}),
    "boolean": frozenset({"enum", "const"}),
    "null": frozenset({"enum", "const"}),
}


# what names a draft in ``$schema``'s text, in the order detect_draft tests them
DRAFT_MARKS = (("draft-04", 4), ("draft-06", 6), ("draft-07", 7), ("2019-09", 2019))


def detect_draft(schema: Any) -> int:
    """The draft ``$schema`` names (a mark anywhere in its text), 2020 by default.  Twice a
    schema (plain_text's and the compiler's): the marks are made once, not an f-string and a
    ``str()`` per mark per call (~6 k instructions a call)."""
    uri = schema.get("$schema") if isinstance(schema, dict) else None
    if not uri:
        return 2020  # absent, or a JSON value whose text ("", "0", "None", "[]" ..) names none
    text = uri if type(uri) is str else str(uri)
    for mark, n in DRAFT_MARKS:
        if mark in text:
            return n
    return 2020


def _plain_array(s: dict[str, Any]) -> bool:
    """An array of PLAIN_KW's keywords that normalize leaves as it is: ``items`` one schema (not
    a list), ``minItems`` and ``maxItems`` ints (the well-formedness check let through no
    other count but a float such as ``1.0``, which normalize makes an int)."""
    if s.get("items").__class__ is list:
        return False
    return s.get("minItems", 0).__class__ is int and s.get("maxItems", 0).__class__ is int


def constraining(s: dict[str, Any]) -> bool:
    for k in s:  # not any() of a generator: one stopped early raises GeneratorExit inside it
        if not is_annotation(k):
            return True
    return False


class SchemaCompiler:
    def __init__(
        self,
        root: Any,
        strict: bool,
        policy: str,
        canonical: bool = True,
        resources: Mapping[str, Any] | None = None,
        plain: bool = False,
        draft: int | None = None,
        ws_body: ir.Expr | None = None,
    ) -> None:
        """``draft`` and ``ws_body``: ``detect_draft(root)`` and ``whitespace(policy)``, when
        the caller has them (schema_to_grammar: each worked out once a schema)."""
        self.root = root
        self.draft = detect_draft(root) if draft is None else draft
        check_document(root, self.draft)  # a malformed schema raises here, in either mode
        self.rules: dict[str, ir.Expr] = {}
        # canonical: one spelling per instance (see Grammar.from_json_schema); else every one
        self.canonical = canonical
        # integer spellings: draft 4 counts only plain integers; canonical mode drops "3.0"
        self.int_forms = "plain" if self.draft == 4 else "no_fraction" if canonical else "all"
        self.rep = Reporter(strict, narrowing=canonical)
        self.strict = strict
        self.policy = policy
        self.ws_body = whitespace(policy) if ws_body is None else ws_body
        self._ws: ir.Expr | None = None  # ws(), once made
        self._seps: dict[str, ir.Expr] = {}  # sep(text), once made
        self._scalars: dict[str, ir.Expr] = {}  # scalar(): each type's expression, once made
        # member_value's scalars with keywords: (type, keywords' repr) -> the expression and the
        # report rows it made (their pointers' ends after the value's path)
        self._leaves: dict[tuple[str, str], tuple[ir.Expr, list[tuple[str, str, str, str]]]] = {}
        self.resolver = Resolver(root, self.draft, resources, plain)  # plain: see Resolver
        self.ref_rules: dict[str, str] = {}
        # the dynamic scope: each $dynamicAnchor name -> its outermost definition (refs.Resolver.bind)
        self.scope: dict[str, str] = {}
        self.depth = 0
        self.inlined_refs = 0  # branches walked with a $ref inlined, nested (see _branch)
        self.inlined_root = ""  # the outermost of them
        # why the schema just walked allows no value, if it does not (said when read: Reason)
        self.empty_why: Reason | str | None = None
        self.empty_rules: dict[str, Reason | str] = {}  # $ref rules of the empty language, and why
        self.walks: dict[str, Walk] = {}  # schemas with an INLINING keyword, by content (see walked)
        self.strings = Strings(self)
        self.containers = Containers(self, MAX_DEPTH)

    # ------------------------------------------------------------------ lexical rules

    def ws(self) -> ir.Expr:
        ws = self._ws
        if ws is None:  # the rule is added on first use
            if self.policy == "compact":
                ws = ir.EPSILON
            else:
                ws = self._rule("ws", lambda: self.ws_body)
            self._ws = ws
        return ws

    def _rule(self, name: str, body: Any) -> ir.Ref:
        if name not in self.rules:
            self.rules[name] = ir.NOTHING
            self.rules[name] = body()
        return ir.Ref(name)

    def sep(self, text: str) -> ir.Expr:
        out = self._seps.get(text)
        if out is None:
            ws = self.ws()
            out = self._seps[text] = ir.seq(ws, U.lit(text), ws)
        return out

    def any_value(self) -> ir.Expr:
        if "json-value" not in self.rules:
            self.char_generic()
            add_builtin(self.rules, self.ws(), self.canonical)
        return ir.Ref("json-value")

    def char_generic(self) -> ir.Ref:
        """A character of an unconstrained string (canonical: its one spelling)."""
        return self._rule("json-char", lambda: CANONICAL_CHAR if self.canonical else JSON_CHAR)

    def char_wf(self) -> ir.Ref:
        """A character of a counted string: well-formed spellings only."""
        return self._rule("json-char-wf", lambda: CANONICAL_CHAR if self.canonical else ENC_ANY)

    def number_form(self, e: ir.Expr) -> ir.Expr:
        """A number's language; canonical mode bounds its digit runs (:func:`.numbers.cap_digits`)."""
        return cap_digits(e) if self.canonical else e

    # ------------------------------------------------------------------ the walk

    def compile(self) -> ir.Grammar:
        meta = self.root.get("$schema") if isinstance(self.root, dict) else None
        if meta is not None:
            known = str(meta).rstrip("#") in KNOWN_META
            self.rep.add("/$schema", "$schema", "enforced" if known else "rejected",
                         "" if known else "unknown meta-schema: its vocabularies are unknown")  # fmt: skip
        body = self.schema(self.root, "", ROOT_BASE)
        if self.policy == "any":
            body = ir.seq(self.ws(), body, self.ws())
        self.rules["root"] = body
        info: dict[str, object] = {"json_schema": True}
        if body == ir.NOTHING:  # the compiler's "language is empty" error says why
            info["empty"] = (
                f"the JSON Schema allows no value: {self.empty_why or because(self.root, '', None)}"
            )
        return ir.Grammar(self.rules, "root", meta=info)

    def schema(self, s: Any, path: str, base: str) -> ir.Expr:
        if s is True:
            return self.any_value()
        if s is False:
            self.empty_why = because(s, path, None)
            return ir.NOTHING
        if not isinstance(s, dict):
            raise GrammarError(f"the schema at {path or '/'} is neither an object nor a boolean")
        self.depth += 1
        deadline.check("JSON Schema")
        saved, self.empty_why = self.empty_why, None
        scope = self.scope
        inner = self.resolver.base_of.get(id(s), base)  # Resolver.base, inline
        if inner != base or self.depth == 1:  # a schema resource entered: its dynamic anchors
            self.scope = self.resolver.bind(scope, inner)
        try:
            if self.depth > MAX_DEPTH:
                raise GrammarError(f"schema nesting deeper than {MAX_DEPTH} at {path or '/'}")
            walk = None if INLINING.isdisjoint(s.keys()) else self.walked(s, inner)  # the test inline
            if walk is None:
                out = self._schema(s, path, inner)
            elif walk.name is not None:  # met inside its own walk: the rule that walk makes
                out = ir.Ref(walk.name)
            else:
                try:
                    out = walk.done(self._schema(s, path, inner), self.rules, path)
                finally:  # met later, beside it: walked afresh (its keywords reported there)
                    del self.walks[walk.key]
        finally:
            self.depth -= 1
            self.scope = scope
        # an empty schema keeps the innermost reason found under it; a live one forgets them
        self.empty_why = Reason(s, path, self.empty_why) if out == ir.NOTHING else saved
        return out

    def member_value(self, s: Any, path: str, base: str) -> ir.Expr:
        """:meth:`schema` of a property's value.  The commonest, ``{"type": "string"}`` (one
        scalar type, annotations beside it), is compiled here as :meth:`_schema` and
        :meth:`scalar` would, with the same report entries in the same order, without the
        bookkeeping :meth:`schema` keeps for a value that holds schemas (the nesting depth, the
        dynamic scope, the walks of inlining keywords, the reason for an empty language: a
        scalar's language is never empty, and it reads none of them)."""
        t = s.get("type") if s.__class__ is dict else None
        if t.__class__ is not str or t not in SCALAR_TYPES or self.depth >= MAX_DEPTH:
            if t.__class__ is list and self.depth < MAX_DEPTH:
                return self.union_leaf(s, path, base, t)
            return self.schema(s, path, base)
        if len(s) > 1:
            own = LEAF_KW[t]
            kws = None
            for k in s:  # annotations beside "type" (none of them is an INLINING keyword)
                if k != "type" and k not in ANNOTATIONS and not k.startswith("x-"):
                    if k not in own:
                        return self.schema(s, path, base)
                    if kws is None:
                        kws = [(k, s[k])]
                    else:
                        kws.append((k, s[k]))
            if kws is not None:
                return self.leaf(s, path, base, t, kws)
        deadline.check("JSON Schema")
        if len(s) > 1:
            for k in s:
                if k != "type":
                    # (an annotation's name, the commonest, has no "~" or "/")
                    plain = k in ANNOTATIONS or ("~" not in k and "/" not in k)
                    where = path + "/" + k if plain else pointer(path, k)
                    self.rep.enforced(where, k, "annotation")
        out = self._scalars.get(t)
        if out is None:
            return self.scalar(s, path)
        self.rep.enforced(path + "/type", "type")  # scalar's report, its expression made
        return out

    def leaf(self, s: dict[str, Any], path: str, base: str, t: str, kws: list[tuple[str, Any]]) -> ir.Expr:
        """:meth:`member_value` of a scalar type with its own keywords beside it (``LEAF_KW``:
        ``{"type": "integer", "minimum": 0}``, ``maxLength``, ``enum``): what :meth:`schema`,
        :meth:`_schema` and :meth:`simple` do for it, without their checks for every other type
        (the value is normalized as there, and its report rows come in the same order).  Its
        expression and rows are kept per (type, keywords) -- ``repr`` tells ``1`` from ``1.0``
        and ``True`` -- when a compile of it added no rule (so a further one adds none and
        gives the same): a repeated leaf replays them, its rows under its own path."""
        deadline.check("JSON Schema")
        for k in s if len(kws) + 1 < len(s) else ():  # _schema's rows come first
            if k in ANNOTATIONS or k.startswith("x-"):
                where = path + "/" + k if "~" not in k and "/" not in k else pointer(path, k)
                self.rep.enforced(where, k, "annotation")
        key = (t, repr(kws))
        kept = self._leaves.get(key)
        rows = self.rep.rows
        if kept is not None:
            for row in kept[1]:
                rows.append((path + row[0], row[1], row[2], row[3]))
            return kept[0]
        saved, self.empty_why = self.empty_why, None  # as schema() keeps it
        first, n_rules = len(rows), len(self.rules)
        n_s = normalize(s, self.draft)
        self.rep.enforced(path + "/type", "type")  # simple's rows, for this type
        if "enum" in n_s:
            out = self.enum(n_s, path, base)
        elif t == "string":
            out = self.strings.string(n_s, path, [])
        else:  # "enum" is the only keyword of null and boolean
            out = self.number_form(self.number(n_s, path, t == "integer", []))
        if out == ir.NOTHING:
            self.empty_why = Reason(s, path, self.empty_why)
            return out
        self.empty_why = saved
        if len(self.rules) == n_rules:  # kept: a further compile would add none either
            n = len(path)
            made = []
            for row in rows[first:]:
                if row[0][:n] != path:  # not under the value's path: not replayed
                    return out
                made.append((row[0][n:], row[1], row[2], row[3]))
            self._leaves[key] = (out, made)
        return out

    def union_leaf(self, s: dict[str, Any], path: str, base: str, t: list[Any]) -> ir.Expr:
        """:meth:`member_value` of a value whose ``type`` lists scalar types (``["string",
        "null"]``) with their own keywords (``LEAF_KW``) and annotations beside it: compiled by
        :meth:`schema`, and its expression and rows (but the annotations', which come first)
        kept per (types, keywords) when that compile added no rule, as :meth:`leaf` keeps
        them -- the language of such a value is a function of its keywords alone (no
        subschema, reference or base) -- and replayed for a repeat, its annotations' rows
        first (Snowplow's wide objects repeat a few such values tens of times)."""
        for x in t:
            if x.__class__ is not str or x not in SCALAR_TYPES:
                return self.schema(s, path, base)
        kws: list[tuple[str, Any]] = []
        notes = 0  # annotations: _schema's first rows
        for k in s:
            if k == "type":
                continue
            if k in ANNOTATIONS or k.startswith("x-"):
                if k in BASE_KEYWORDS:  # a resource or anchor: the walk's own bookkeeping
                    return self.schema(s, path, base)
                notes += 1
                continue
            for x in t:
                if k in LEAF_KW[x]:
                    break
            else:
                return self.schema(s, path, base)
            kws.append((k, s[k]))
        key = (repr(t), repr(kws))  # never a leaf's key: that one's first item is a type name
        rows = self.rep.rows
        kept = self._leaves.get(key)
        if kept is not None:
            deadline.check("JSON Schema")
            if notes:
                for k in s:
                    if k in ANNOTATIONS or k.startswith("x-"):
                        where = path + "/" + k if "~" not in k and "/" not in k else pointer(path, k)
                        self.rep.enforced(where, k, "annotation")
            for row in kept[1]:
                rows.append((path + row[0], row[1], row[2], row[3]))
            return kept[0]
        first, n_rules = len(rows), len(self.rules)
        out = self.schema(s, path, base)
        if out != ir.NOTHING and len(self.rules) == n_rules:  # kept: a repeat would add none either
            n = len(path)
            made = []
            for row in rows[first + notes :]:
                if row[0][:n] != path:  # not under the value's path: not replayed
                    return out
                made.append((row[0][n:], row[1], row[2], row[3]))
            self._leaves[key] = (out, made)
        return out

    def walked(self, s: dict[str, Any], base: str) -> Walk | None:
        """The record of ``s``'s walk in this base and dynamic scope while it lasts, when ``s``
        holds a keyword that may inline a ``$ref`` (``INLINING``); None otherwise.  A schema's
        language is a function of its content, base and scope alone, so a schema met again inside
        its own walk (an inlined copy of a recursive target reaches the same subschema one level
        down) is a reference to the rule that walk makes: recursion in the grammar after one
        level, not an inlining to ``MAX_DEPTH``."""
        if INLINING.isdisjoint(s.keys()):
            return None
        key = self.scoped(base + "\x00" + U.dumps_key(s))  # key order is meaningful
        walk = self.walks.get(key)
        if walk is None:
            walk = self.walks[key] = Walk(key)
        elif walk.name is None:  # the first meeting inside its own walk
            walk.name = U.fresh_stem(self.rules, "walk")
            self.rules[walk.name] = ir.NOTHING  # its body when the walk ends
        return walk

    def _schema(self, s: dict[str, Any], path: str, base: str) -> ir.Expr:
        plain = 0  # keywords that are not annotations
        for k in s:
            if k in ANNOTATIONS:  # is_annotation(k), inline: every subschema (a name without "~", "/")
                self.rep.enforced(path + "/" + k, k, "annotation")
            elif k.startswith("x-"):
                where = path + "/" + k if "~" not in k and "/" not in k else pointer(path, k)
                self.rep.enforced(where, k, "annotation")
            else:
                plain += 1
        t = s.get("type")
        if t.__class__ is str:
            if plain == 1 and t in SCALAR_TYPES:
                return self.scalar(s, path)
            if t == "object" or t == "array":
                out = self._plain_container(s, path, base, t)
                if out is not None:
                    return out
        if "$dynamicRef" in s and self.draft >= 2020:
            s = self.static_dynamic_ref(s, base)
        if "$ref" in s:
            ref = s["$ref"]
            if self.draft <= 7 or not any(not is_annotation(k) for k in s if k != "$ref"):
                for k in s:
                    if k != "$ref" and not is_annotation(k):
                        self.rep.enforced(
                            pointer(path, k), k, "ignored beside $ref, as draft-07 and older say"
                        )
                return self.ref(ref, path, base)
            return self.ref_with_siblings(s, path, base)
        s = normalize(s, self.draft)
        if "allOf" in s:
            s = self.merge_all_of(s, path, base)
        if "dependentSchemas" in s and "unevaluatedProperties" not in s and "unevaluatedItems" not in s:
            s = self.dependent(s, path, base)
        if "not" in s:
            s = self.complement(s, path, base)
        if "if" in s and self.draft >= 7:
            s = self.conditional(s, path, base)
        if "anyOf" in s or "oneOf" in s:
            return self.branches(s, path, base)
        return self.simple(s, path, base)

    def _plain_container(self, s: dict[str, Any], path: str, base: str, t: str) -> ir.Expr | None:
        """What normalize and simple do for a plain object or array (its keywords' PLAIN_KW bits,
        read in one lookup each, hold its type's; an array's ``items`` not a list, its counts
        ints): the rows of the keywords of no vocabulary, the type's, then the container,
        without their checks for every other keyword and type; None for another schema."""
        kinds = 1 if t == "object" else 2
        unknown = False  # a keyword of no vocabulary
        for k in s:
            bits = PLAIN_KW.get(k)
            if bits is not None:
                kinds &= bits
            elif k in NOT_PLAIN:
                return None
            elif k not in ANNOTATIONS and not k.startswith("x-"):
                unknown = True
        if not kinds or (t == "array" and not _plain_array(s)):
            return None
        if unknown:
            if UNKNOWN_KEYWORDS == "reject":
                return None
            for k in s:
                if k not in PLAIN_KW and k not in ANNOTATIONS and not k.startswith("x-"):
                    self.rep.enforced(pointer(path, k), k, UNKNOWN_REASON)  # as simple does
        self.rep.enforced(path + "/type", "type")
        if t == "array":
            return self.containers.array(s, path, base)
        if self.canonical:
            return self.containers.listed_object(s, path, base)
        return self.containers.object(s, path, base)

    def static_dynamic_ref(self, s: dict[str, Any], base: str) -> dict[str, Any]:
        """``s`` with its ``$dynamicRef`` made a ``$ref`` to what it names in today's dynamic
        scope, which the walk knows (it follows the references); rules are memoized per scope."""
        ref = s["$dynamicRef"]
        if not isinstance(ref, str):
            raise GrammarError("$dynamicRef is not a string")
        target = self.resolver.dynamic(ref, base, self.scope)
        out = {k: v for k, v in s.items() if k != "$dynamicRef"}
        if "$ref" in out:
            out["allOf"] = [*out.get("allOf", []), {"$ref": target}]
        else:
            out["$ref"] = target
        return out

    def scoped(self, key: str) -> str:
        """A memo key for the rule of ``key``: what a ``$dynamicRef`` under it names depends on
        the dynamic scope."""
        return key + "\x00" + json.dumps(sorted(self.scope.items())) if self.scope else key

    def ref(self, ref: Any, path: str, base: str) -> ir.Expr:
        where = path + "/$ref"
        if not isinstance(ref, str):
            raise GrammarError(f"$ref at {where} is not a string")
        try:
            target, tbase, uri = self.resolver.resolve(ref, base)
        except GrammarError as e:
            return self.unresolved(where, e)
        carried = self.resolver.scope_of(ref)[1]  # a $ref of an inlined copy: the scope it was in
        if carried is not None:
            saved, self.scope = self.scope, carried
            try:
                return self.ref(uri, path, base)
            finally:
                self.scope = saved
        key = self.scoped(uri)
        if key not in self.ref_rules:
            name = U.fresh(self.rules, "def-" + uri.rsplit("#", 1)[-1].rsplit("/", 1)[-1])
            self.ref_rules[key] = name
            tpath = uri.split("#", 1)[-1] if uri.startswith(ROOT_BASE) else uri
            scope = self.scope
            # the target's resources: the document named, then the one the target is in
            self.scope = self.resolver.bind(self.resolver.bind(scope, defrag(uri)[0]), tbase)
            try:
                body = self.schema(target, tpath, tbase)
            finally:
                self.scope = scope
            if unit_cycle(self.rules, name, body):
                raise GrammarError(f"$ref at {where} refers to itself without consuming input")
            self.rules[name] = body
            if body == ir.NOTHING:
                self.empty_rules[name] = self.empty_why or Reason(target, tpath, None)
        self.rep.enforced(where, "$ref")
        name = self.ref_rules[key]
        if name in self.empty_rules:  # said as nothing, so that the schemas around it can tell why
            self.empty_why = self.empty_rules[name]
            return ir.NOTHING
        return ir.Ref(name)

    def unresolved(self, where: str, e: GrammarError) -> ir.Expr:
        """A ``$ref`` that resolves to nothing here: strict mode refuses it; lenient mode lets any
        value through and reports it rejected."""
        if self.strict:
            raise NotEnforceable(
                f"$ref at {where} does not resolve: {e.message} (strict=False lets any value through"
                " there and lists it in schema_report)",
                pointer=where,
            )
        self.rep.rejected(where, "$ref", e.message)
        return self.any_value()

    def ref_with_siblings(self, s: dict[str, Any], path: str, base: str) -> ir.Expr:
        """2019-09+: ``$ref`` beside other keywords means both apply.  One rule per
        (target, siblings) pair, so recursive targets give recursive rules."""
        ref = s["$ref"]
        try:
            _, _, uri = self.resolver.resolve(ref, base)
        except GrammarError as e:
            return self.unresolved(path + "/$ref", e)
        siblings = {k: v for k, v in s.items() if k != "$ref"}
        key = self.scoped(uri + "\x00" + U.dumps_sorted_key(siblings))
        if key not in self.ref_rules:
            name = U.fresh(self.rules, "ref-" + uri.rsplit("/", 1)[-1])
            self.ref_rules[key] = name
            merged = {**siblings, "allOf": [{"$ref": ref}, *siblings.get("allOf", [])]}
            self.rules[name] = self._schema(normalize(merged, self.draft), path, base)
        return ir.Ref(self.ref_rules[key])

    # ------------------------------------------------------------------ applicators

    def resolve_part(
        self, part: Any, base: str, budget: list[int], scope: dict[str, str] | None = None
    ) -> dict[str, Any]:
        """A subschema with top-level ``$ref``s resolved and inlined, normalized, with
        its own ``allOf`` folded in.  ``scope``: the dynamic scope where ``part`` is (by default
        the walk's); a part taken from another resource is copied with absolute ``$ref``s and its
        ``$dynamicRef``s resolved in the scope it is reached in (:meth:`.Resolver.absolute`)."""
        if part is True:
            return {}
        if part is False:
            return {"type": []}
        if not isinstance(part, dict):
            raise GrammarError("a subschema is neither an object nor a boolean")
        scope = self.scope if scope is None else scope
        inner = self.resolver.base(part, base)
        base = base or inner  # "": the caller does not know where the part is
        if inner != base:  # the part is a resource of its own
            scope = self.resolver.bind(scope, inner)
            part = self.resolver.absolute(part, inner, scope)
        while "$ref" in part or ("$dynamicRef" in part and self.draft >= 2020):
            if "$dynamicRef" in part:
                saved, self.scope = self.scope, scope
                try:
                    part = self.static_dynamic_ref(part, base)
                finally:
                    self.scope = saved
            budget[0] -= 1
            if budget[0] < 0:
                raise Unmergeable("$ref", "recursive $ref inside allOf cannot be expanded")
            target, tbase, uri = self.resolver.resolve(part["$ref"], base)
            scope = self.resolver.scope_of(part["$ref"])[1] or scope
            scope = self.resolver.bind(self.resolver.bind(scope, defrag(uri)[0]), tbase)
            text = repr(target)
            if (tbase != base or scope != self.scope) and ("$ref" in text or "$dynamicRef" in text):
                target = self.resolver.absolute(target, tbase, scope)  # else resolved against `base`
            siblings = {k: v for k, v in part.items() if k != "$ref"} if self.draft > 7 else {}
            if target is False:
                return {"type": []}
            target = {} if target is True else target
            part = (
                {**siblings, "allOf": [target, *siblings.get("allOf", [])]}
                if constraining(siblings)
                else target
            )
        part = normalize(part, self.draft)
        if "allOf" in part:
            subs = part["allOf"]
            acc = {k: v for k, v in part.items() if k != "allOf"}
            for sub in subs:
                acc = intersect(acc, self.resolve_part(sub, base, budget, scope))
            part = acc
        for key in ("anyOf", "oneOf"):  # one branch: a part like any other
            if isinstance(part.get(key), list) and len(part[key]) == 1:
                sole = part[key][0]
                part = intersect(
                    {k: v for k, v in part.items() if k != key}, self.resolve_part(sole, base, budget, scope)
                )
        if self.draft >= 7 and ("if" in part or "then" in part or "else" in part):
            part = self.conditional_part(part, base)  # each part's own if/then/else
        return self.close_unevaluated(part)  # it sees only its own subschema

    def merge_all_of(self, s: dict[str, Any], path: str, base: str) -> dict[str, Any]:
        where = path + "/allOf"
        keep: dict[str, Any] = {k: s[k] for k in ("unevaluatedProperties", "unevaluatedItems") if k in s}
        acc = {k: v for k, v in s.items() if k != "allOf" and k not in keep}
        budget = [MAX_REF_EXPANSIONS]
        for i, part in enumerate(s["allOf"]):
            try:
                resolved = self.resolve_part(part, base, budget)
                if "additionalProperties" in resolved:  # every property is evaluated by this part
                    keep.pop("unevaluatedProperties", None)
                if "items" in resolved:
                    keep.pop("unevaluatedItems", None)
                acc = intersect(acc, resolved)
            except Unmergeable as e:
                self.rep.rejected(pointer(where, i), e.keyword, e.reason)
            except GrammarError as e:
                at = (
                    pointer(where, i, "$ref")
                    if isinstance(part, dict) and "$ref" in part
                    else pointer(where, i)
                )
                self.rep.rejected(at, "$ref", e.message)
        self.rep.enforced(where, "allOf")
        acc.update(dict(keep))
        return acc

    def branches(self, s: dict[str, Any], path: str, base: str) -> ir.Expr:
        key = "anyOf" if "anyOf" in s else "oneOf"
        where = pointer(path, key)
        rest = {k: v for k, v in s.items() if k != key}
        subs = s[key]
        if not isinstance(subs, list) or not subs:
            raise GrammarError(f"{key} at {where} must be a non-empty list")
        if "unevaluatedProperties" in rest or "unevaluatedItems" in rest:
            try:
                terms = self._branches_unevaluated(key, subs, rest, base)
            except (Unmergeable, GrammarError) as e:
                reason = e.reason if isinstance(e, Unmergeable) else e.message
                self.rep.rejected(where, "unevaluatedProperties", f"unevaluated* beside {key}: {reason}")
                rest.pop("unevaluatedProperties", None)
                rest.pop("unevaluatedItems", None)
            else:
                self.rep.enforced(where, key, "each branch closed by unevaluated*")
                exprs = [self.schema(b, pointer(where, i), base) for i, b in enumerate(terms)]
                live = [e for e in exprs if e != ir.NOTHING]
                return ir.alt(*live) if live else ir.NOTHING
        presence = self._presence_branches(key, subs, rest, base)
        if presence is not None:
            self.rep.enforced(where, key, "a condition on which keys are present")
            return self.simple(rest, path, base, [presence])
        trivial = not constraining(rest)
        merged: list[Any] = []
        for i, b in enumerate(subs):
            if trivial and (key == "anyOf" or isinstance(b, bool)):
                merged.append(b)
                continue
            try:
                merged.append(intersect(rest, self.resolve_part(b, base, [MAX_REF_EXPANSIONS])))
            except (Unmergeable, GrammarError) as e:
                reason = e.reason if isinstance(e, Unmergeable) else e.message
                self.rep.rejected(pointer(where, i), key, reason)
                merged.append(b if trivial else rest)
        if key == "oneOf" and not self._pairwise_disjoint(merged):
            exact = self._exactly_one(merged)
            if exact is None:
                self.rep.rejected(
                    where, "oneOf", "branches not provably disjoint, so 'exactly one' is not enforced"
                )
            else:
                self.rep.enforced(where, "oneOf", "each branch without the others")
                exprs = [self.schema(b, pointer(where, i), base) for i, b in enumerate(exact)]
                live = [e for e in exprs if e != ir.NOTHING]
                return ir.alt(*live) if live else ir.NOTHING
        self.rep.enforced(where, key)
        # with nothing beside them, the branches as written: the same languages, and a $ref keeps
        # its rule (a branch that inlined a recursive $ref would be inlined again at each level)
        exprs = [
            self._branch(key, subs[i], b, pointer(where, i), base)
            for i, b in enumerate(subs if trivial else merged)
        ]
        live = [e for e in exprs if e != ir.NOTHING]
        return ir.alt(*live) if live else ir.NOTHING

    def _branch(self, key: str, written: Any, b: Any, where: str, base: str) -> ir.Expr:
        """A branch that had a ``$ref`` inlined (``b`` is not what was ``written``): walked with a
        count of such branches nested, so that a recursive ``$ref`` beside other keywords (each
        level inlines it again) is refused with its pointer, not walked until the stack ends."""
        if b is written or not isinstance(written, dict) or not ({"$ref", "$dynamicRef"} & written.keys()):
            return self.schema(b, where, base)
        if self.inlined_refs >= MAX_INLINED_REFS:
            self.rep.rejected(
                self.inlined_root, key,
                f"a $ref inlined beside other keywords recurses (more than {MAX_INLINED_REFS} levels,"
                f" the last at {where})",
            )  # fmt: skip
            return self.schema(written, where, base)
        if not self.inlined_refs:
            self.inlined_root = where
        self.inlined_refs += 1
        try:
            return self.schema(b, where, base)
        finally:
            self.inlined_refs -= 1

    def _branches_unevaluated(
        self, key: str, subs: list[Any], rest: dict[str, Any], base: str
    ) -> list[dict[str, Any]]:
        """``anyOf``/``oneOf`` beside ``unevaluated*``: what is evaluated is what ``rest`` and the
        branches that hold evaluate.  When no two branches can hold together (or, for ``oneOf``,
        each is taken without the others), one branch holds, so the union of the branches each
        closed (:meth:`close_unevaluated`) is exact; else :class:`Unmergeable`."""
        core = {k: v for k, v in rest.items() if k not in ("unevaluatedProperties", "unevaluatedItems")}
        parts = [self.resolve_part(b, base, [MAX_REF_EXPANSIONS]) for b in subs]
        closed = [self.close_unevaluated(intersect(rest, p)) for p in parts]
        plain = [intersect(core, p) for p in parts]
        if self._pairwise_disjoint(plain):
            return closed
        if key == "oneOf":
            exact = self._exactly_one(closed, plain)
            if exact is not None:
                return exact
        raise Unmergeable("unevaluatedProperties", "branches that may hold together")

    def close_unevaluated(self, part: dict[str, Any]) -> dict[str, Any]:
        """A schema whose every applicator is folded in (no ``anyOf``/``oneOf``/``if``/
        ``dependentSchemas`` left), with ``unevaluatedProperties``/``unevaluatedItems`` made the
        ``additionalProperties``/``items`` they then are: the properties and items evaluated are
        those its ``properties``/``patternProperties``/``prefixItems`` name."""
        if not ("unevaluatedProperties" in part or "unevaluatedItems" in part):
            return part
        left = [k for k in ("anyOf", "oneOf", "if", "dependentSchemas", "$ref", "$dynamicRef") if k in part]
        if left:
            raise Unmergeable("unevaluatedProperties", f"unevaluated* beside {left[0]} inside a subschema")
        out = dict(part)
        if "unevaluatedProperties" in out:
            u = out.pop("unevaluatedProperties")
            out.setdefault("additionalProperties", u)
        if "unevaluatedItems" in out:
            u = out.pop("unevaluatedItems")
            if "contains" in out:
                raise Unmergeable("unevaluatedItems", "unevaluatedItems beside contains")
            out.setdefault("items", u)
        return out

    def conditional(self, s: dict[str, Any], path: str, base: str) -> dict[str, Any]:
        """``if``/``then``/``else`` as ``anyOf: [if ∧ then, ¬if ∧ else]`` (the two branches are
        disjoint, so the union is exact), when ``¬if`` can be written exactly: ``if`` may test
        ``type``, ``required`` and ``properties`` whose schemas are scalar ``enum``/``const``.
        ``¬if`` is then a union: another type, a required key absent, or a tested key present
        with another value."""
        where = path + "/if"
        rest = {k: v for k, v in s.items() if k not in ("if", "then", "else")}
        if (
            "then" not in s
            and "else" not in s
            and not ("unevaluatedProperties" in s or "unevaluatedItems" in s)
        ):
            self.rep.enforced(where, "if", "no effect without then/else")
            return rest
        try:
            out = self.conditional_part(s, base)
        except Unmergeable as e:
            self.rep.rejected(where, "if", e.reason)
            return rest
        except GrammarError as e:
            self.rep.rejected(where, "if", e.message)
            return rest
        for k in ("if", "then", "else"):
            if k in s:
                self.rep.enforced(pointer(path, k), k, "(if and then) or (not if and else)")
        return out

    def complement(self, s: dict[str, Any], path: str, base: str) -> dict[str, Any]:
        """``not`` of what :meth:`negation` does not take (objects, bounds, several keywords),
        written as :meth:`_negate`'s union when it can be; else ``s`` unchanged (for
        :meth:`negation` to enforce or refuse)."""
        try:
            n = self.resolve_part(s["not"], base, [MAX_REF_EXPANSIONS])
        except (Unmergeable, GrammarError):
            return s
        keys = {k for k in n if not is_annotation(k)}
        if not keys or keys in ({"type"}, {"enum"}, {"required"}):
            return s  # negation() writes these
        negs = self._negate(n)
        if negs is None:
            return s
        rest = {k: v for k, v in s.items() if k != "not"}
        try:
            out = intersect(rest, {"anyOf": negs}) if negs else intersect(rest, {"type": []})
        except Unmergeable:
            return s
        self.rep.enforced(path + "/not", "not", "the complement written as a union")
        return out

    def dependent(self, s: dict[str, Any], path: str, base: str) -> dict[str, Any]:
        """``dependentSchemas`` (and draft-07 ``dependencies`` with schemas): each entry is
        ``if {type: object, required: [name]} then S``, written as :meth:`conditional_part`
        writes it and intersected into ``s``."""
        deps = s["dependentSchemas"]
        out = {k: v for k, v in s.items() if k != "dependentSchemas"}
        if not isinstance(deps, dict):
            raise GrammarError(f"dependentSchemas at {pointer(path, 'dependentSchemas')} is not an object")
        for name, sub in deps.items():
            where = pointer(path, "dependentSchemas", name)
            try:
                cond = {"if": {"type": "object", "required": [name]}, "then": sub}
                out = intersect(out, self.conditional_part(cond, base))
            except Unmergeable as e:
                self.rep.rejected(where, "dependentSchemas", e.reason)
            except GrammarError as e:
                self.rep.rejected(where, "dependentSchemas", e.message)
            else:
                self.rep.enforced(where, "dependentSchemas", "(name absent) or (name present and the schema)")
        return out

    def conditional_part(self, s: dict[str, Any], base: str) -> dict[str, Any]:
        """``s`` with its ``if``/``then``/``else`` written as an ``anyOf`` (see :meth:`conditional`),
        or :class:`Unmergeable`; ``then``/``else`` without ``if`` are dropped."""
        rest = {k: v for k, v in s.items() if k not in ("if", "then", "else")}
        seen = "unevaluatedProperties" in s or "unevaluatedItems" in s  # they see what 'if' evaluates
        if "if" not in s or ("then" not in s and "else" not in s and not seen):
            return rest
        cond = self.resolve_part(s["if"], base, [MAX_REF_EXPANSIONS])
        then = self.resolve_part(s.get("then", True), base, [MAX_REF_EXPANSIONS])
        other = self.resolve_part(s.get("else", True), base, [MAX_REF_EXPANSIONS])
        negated = self._negate(cond)
        if negated is None:
            raise Unmergeable("if", "the negation of this 'if' schema cannot be written exactly")
        if "unevaluatedProperties" in s or "unevaluatedItems" in s:
            # 'if' that holds evaluates with 'then'; one that fails evaluates nothing: each
            # branch is closed on what it evaluates, then meets the negation
            if any(k in rest for k in ("anyOf", "oneOf", "dependentSchemas")):
                raise Unmergeable("if", "if/then/else beside unevaluated* and anyOf/oneOf")
            yes = self.close_unevaluated(intersect(rest, intersect(cond, then)))
            no = self.close_unevaluated(intersect(rest, other))
            return {"anyOf": [yes] + [intersect(no, d) for d in negated]}
        branches = [intersect(cond, then)] + [intersect(d, other) for d in negated]
        return intersect(rest, {"anyOf": branches})

    def _negate(self, cond: dict[str, Any], depth: int = 0) -> list[dict[str, Any]] | None:
        """Schemas whose union is exactly the complement of ``cond``, or None.  ``cond`` holds
        when the instance has one of its types and meets each of its keywords (a keyword holds
        for the instances of other types); so ``¬cond`` is another type, or a value of the
        keyword's type that breaks it: a number beyond a bound, a string of another length, a
        missing required key, a tested key with another value, a value outside a scalar enum."""
        keys = {k for k in cond if not is_annotation(k)}
        if keys == {"enum"} or keys == {"enum", "type"}:
            values = cond["enum"]
            if "type" in cond:
                values = [v for v in values if evaluate({"type": cond["type"]}, v)]
            if any(isinstance(v, (dict, list)) for v in values):
                return None
            return [{"not": {"enum": values}}] if values else [{}]
        if not keys <= {"type", "required", "properties", *NEGATABLE_BOUNDS}:
            return None
        ts = type_set(cond)
        out: list[dict[str, Any]] = []
        others = [
            t for t in TYPES if t not in ts and t != "integer" and not (t == "number" and "integer" in ts)
        ]
        if "integer" in ts and "number" not in ts:
            return None  # "a number that is not an integer" needs multipleOf
        if others:
            out.append({"type": others})
        for k, flipped in NEGATABLE_BOUNDS.items():
            if k not in cond or not (ts & {"number", "string"}):
                continue
            v = cond[k]
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                return None
            if k in ("minLength", "maxLength"):
                if "string" in ts and (k == "maxLength" or v > 0):
                    out.append({"type": "string", flipped: v + 1 if k == "maxLength" else v - 1})
            elif "number" in ts:
                out.append({"type": "number", flipped: v})
        if "object" not in ts:
            return out
        required = cond.get("required", [])
        if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
            return None
        for r in required:  # r absent (written so that several such branches intersect)
            out.append({"type": "object", "properties": {r: False}})
        props = cond.get("properties", {})
        if not isinstance(props, dict):
            return None
        for name, ps in props.items():
            if ps is True or (isinstance(ps, dict) and not constraining(ps)):
                continue
            if ps is False:  # the key is absent in every instance of cond
                out.append({"type": "object", "required": [name]})
                continue
            if not isinstance(ps, dict) or "$ref" in ps or depth >= MAX_NEGATION_DEPTH:
                return None
            inner = self._negate(normalize(ps, self.draft), depth + 1)
            if inner is None:
                return None
            # the key present with a value its schema refuses
            out += [{"type": "object", "required": [name], "properties": {name: n}} for n in inner]
        return out

    def _exactly_one(self, bs: list[Any], negate: list[Any] | None = None) -> list[dict[str, Any]] | None:
        """``oneOf`` as the union over i of ``b_i ∧ ¬b_j`` for every j ≠ i, where each ``¬b_j``
        is :meth:`_negate`'s union, multiplied out (at most ``MAX_ONE_OF_TERMS`` terms); None
        when a negation cannot be written or the terms do not intersect exactly."""
        parts = [{} if b is True else {"type": []} if b is False else b for b in bs]
        others = [{} if b is True else {"type": []} if b is False else b for b in (negate or bs)]
        if not all(isinstance(b, dict) for b in parts + others):
            return None
        negs = [self._negate(b) for b in others]
        if any(n is None for n in negs):
            return None
        out: list[dict[str, Any]] = []
        try:
            for i, b in enumerate(parts):
                terms = [b]
                for j, n in enumerate(negs):
                    if j != i:
                        terms = [intersect(t, d) for t in terms for d in n or []]
                        if len(out) + len(terms) > MAX_ONE_OF_TERMS:
                            return None
                out += terms
        except Unmergeable:
            return None
        return out

    def _presence_branches(
        self, key: str, subs: list[Any], rest: dict[str, Any], base: str
    ) -> tuple[str, list[frozenset[str]]] | None:
        """``anyOf``/``oneOf`` of branches that only say ``required`` (``type: object`` at most),
        beside a schema of objects: a Boolean condition on the set of present keys, which the
        object's key-set machine checks exactly (so ``oneOf`` needs no disjointness)."""
        if type_set(rest) != {"object"} or "enum" in rest or "not" in rest:
            return None
        sets: list[frozenset[str]] = []
        for b in subs:
            try:
                r = self.resolve_part(b, base, [MAX_REF_EXPANSIONS])
            except (Unmergeable, GrammarError):
                return None
            ks = {k for k in r if not is_annotation(k)}
            if not ks <= {"required", "type"} or "object" not in type_set(r):
                return None
            req = r.get("required", [])
            if not isinstance(req, list) or not all(isinstance(x, str) for x in req):
                return None
            sets.append(frozenset(req))
        return key, sets

    def _pairwise_disjoint(self, bs: list[Any]) -> bool:
        return all(disjoint(bs[i], bs[j], self) for i in range(len(bs)) for j in range(i + 1, len(bs)))

    # ------------------------------------------------------------------ one schema, no applicators

    def simple(
        self, s: dict[str, Any], path: str, base: str, presence: list[Presence] | None = None
    ) -> ir.Expr:
        """One schema without applicators.  ``presence``: conditions on the set of keys of an
        object instance (from ``anyOf``/``oneOf``/``not`` of ``required``), checked by
        :meth:`Containers.object`."""
        presence = list(presence or [])
        for k in s:
            if k in KNOWN or k in ANNOTATIONS:  # most keys, checked without a call
                continue
            if k in UNSUPPORTED:
                self.rep.rejected(pointer(path, k), k, "not supported")
            elif not k.startswith("x-"):  # neither known nor an annotation (is_annotation)
                if UNKNOWN_KEYWORDS == "reject":
                    self.rep.rejected(pointer(path, k), k, "unknown keyword")
                else:
                    self.rep.enforced(pointer(path, k), k, UNKNOWN_REASON)
        if "if" not in s and ("then" in s or "else" in s):
            for k in ("then", "else"):
                if k in s:
                    self.rep.enforced(pointer(path, k), k, "no effect without 'if'")
        if "if" in s and self.draft >= 7:
            self.rep.rejected(path + "/if", "if", "if/then/else is not supported here")
        elif "if" in s:
            self.rep.enforced(path + "/if", "if", "not a keyword before draft-07: an annotation")
        types = type_set(s)
        extra: dict[str, Any] = {}
        excluded: list[Any] = []
        if "not" in s:
            types, excluded, extra = self.negation(s["not"], types, path + "/not", base)
            if PRESENCE in extra:
                presence.append(extra.pop(PRESENCE))
        if "type" in s:
            self.rep.enforced(path + "/type", "type")
        if "enum" in s:
            return self.enum(s, path, base)
        alts: list[ir.Expr] = []
        if "null" in types and not any(v is None for v in excluded):
            alts.append(U.lit("null"))
        if "boolean" in types:
            alts += [
                U.lit(t) for t, v in (("true", True), ("false", False)) if not any(v is x for x in excluded)
            ]
        if "string" in types:
            alts.append(self.strings.string(s, path, [v for v in excluded if isinstance(v, str)]))
        else:
            self._ignore(s, STRING_KW, path)
        if "integer" in types:
            nums = [v for v in excluded if json_type(v) in ("integer", "number")]
            alts.append(self.number_form(self.number(s, path, "number" not in types, nums)))
        else:
            self._ignore(s, NUMBER_KW, path)
        if "object" in types:
            alts.append(self.containers.object(self._with_negation(s, extra, path), path, base, presence))
        else:
            self._ignore(s, OBJECT_KW, path)
        if "array" in types:
            alts.append(self.containers.array(s, path, base))
        else:
            self._ignore(s, ARRAY_KW, path)
        live = [a for a in alts if a != ir.NOTHING]
        return ir.alt(*live) if live else ir.NOTHING

    def scalar(self, s: dict[str, Any], path: str) -> ir.Expr:
        """A schema whose one keyword is ``"type"`` naming one scalar type (annotations aside): the
        commonest property value, compiled as :meth:`simple` would (same expression, same report
        entries) without its checks for every other keyword."""
        t = s["type"]
        self.rep.enforced(path + "/type", "type")  # path + "/type"
        # with no other keyword the expression depends on the type alone: made once per schema
        # (the first string also adds the json-char rule, as it did)
        out = self._scalars.get(t)
        if out is None:
            if t == "string":
                out = self.strings.string(s, path, [])
            elif t == "null":
                out = U.lit("null")
            elif t == "boolean":
                out = ir.alt(U.lit("true"), U.lit("false"))
            else:
                out = self.number_form(self.number(s, path, t == "integer", []))
            self._scalars[t] = out
        return out

    def _with_negation(self, s: dict[str, Any], extra: dict[str, Any], path: str) -> dict[str, Any]:
        """``s`` and what its ``not`` says of objects, as one schema when they can be merged."""
        if not extra:
            return s
        try:
            return intersect(s, extra)
        except Unmergeable as e:  # lenient mode: the 'not' is left out (a superset)
            self.rep.rejected(path + "/not", "not", e.reason)
            return s

    def _ignore(self, s: dict[str, Any], kws: set[str], path: str) -> None:
        if kws.isdisjoint(s):  # the common case: no list built
            return
        for k in [k for k in s if k in kws]:  # schema order: a stable report
            self.rep.enforced(pointer(path, k), k, "no effect: the type excludes it")

    def negation(
        self, n: Any, types: set[str], where: str, base: str
    ) -> tuple[set[str], list[Any], dict[str, Any]]:
        """``not``: types removed, scalar values excluded, or an object constraint."""
        try:
            n = self.resolve_part(n, base, [MAX_REF_EXPANSIONS])
        except (Unmergeable, GrammarError):
            self.rep.rejected(where, "not", "cannot resolve the negated schema")
            return types, [], {}
        keys = {k for k in n if not is_annotation(k)}
        if not keys:
            return set(), [], {}
        if keys == {"type"}:
            self.rep.enforced(where, "not")
            return types - type_set(n), [], {}
        if keys == {"enum"} and all(not isinstance(v, (dict, list)) for v in n["enum"]):
            self.rep.enforced(where, "not")
            return types, list(n["enum"]), {}
        if keys == {"required"} and isinstance(n["required"], list) and len(n["required"]) == 1:
            self.rep.enforced(where, "not")
            return types, [], {"properties": {n["required"][0]: False}}
        if (
            keys == {"required"}
            and isinstance(n["required"], list)
            and all(isinstance(x, str) for x in n["required"])
            and n["required"]
        ):
            self.rep.enforced(where, "not", "a condition on which keys are present")
            # non-objects satisfy every ``required``, so ``not`` excludes them
            return types & {"object"}, [], {PRESENCE: ("not", [frozenset(n["required"])])}
        self.rep.rejected(where, "not", "only 'not' of type, of scalar enum/const, or of one required name")
        return types, [], {}

    # ------------------------------------------------------------------ scalars

    def enum(self, s: dict[str, Any], path: str, base: str) -> ir.Expr:
        """The values of ``s["enum"]`` that satisfy the keywords beside it, as one literal set
        (:mod:`.enums`): canonical mode spells each value once, the full language every way."""
        where = path + "/enum"
        values = s["enum"]
        if not isinstance(values, list):
            raise GrammarError(f"enum at {where} is not a list")
        rest = {k: v for k, v in s.items() if k != "enum" and not is_annotation(k)}
        strs, others = kept_values(values, rest, self.rep, where)
        if self.canonical and (others or any(strs)):
            self.rep.narrowed(where, "enum", "one spelling of each value: its canonical JSON text")
        else:
            self.rep.enforced(where, "enum")
        for k in rest:
            self.rep.enforced(pointer(path, k), k, "checked on each enum/const value")
        const = lambda v: self.const_value(v, where)  # noqa: E731
        return canonical_set(strs, others, const) if self.canonical else full_set(strs, others, const)

    def const_value(self, v: Any, where: str) -> ir.Expr:
        """The spellings of the JSON value ``v`` (equal as JSON Schema compares): its canonical
        text in canonical mode (arrays and objects item by item), else every one."""
        if v is None or isinstance(v, bool):
            return U.lit(json_literal(v))
        if isinstance(v, (int, float)):
            if self.canonical and (isinstance(v, int) or math.isfinite(v)):
                return U.lit(json.dumps(v))
            d = decimal_of(v)
            return number_range(d, True, d, True, False)
        if isinstance(v, str):
            if self.canonical:
                return ir.Literal(canonical_string(v)) if not unspellable(v) else ir.NOTHING
            return ir.seq(U.lit('"'), encode_text(v), U.lit('"')) if not unspellable(v) else ir.NOTHING
        if isinstance(v, list):
            if not v:
                return ir.seq(U.lit("["), self.ws(), U.lit("]"))
            items = [self.const_value(x, where) for x in v]
            body = [items[0]] + [ir.seq(self.sep(","), x) for x in items[1:]]
            return ir.seq(U.lit("["), self.ws(), *body, self.ws(), U.lit("]"))
        if isinstance(v, dict):
            schema = {"properties": {k: {"enum": [x]} for k, x in v.items()}, "required": list(v),
                      "additionalProperties": False}  # fmt: skip
            return self.containers.object(schema, where, ROOT_BASE)
        raise GrammarError(f"enum/const at {where} holds a value that is not JSON")

    def number(self, s: dict[str, Any], path: str, integer: bool, excluded: list[Any]) -> ir.Expr:
        lo: Decimal | None = None
        hi: Decimal | None = None
        lo_incl = hi_incl = True
        for k, strict_bound in (("minimum", False), ("exclusiveMinimum", True)):
            if k in s:
                d = self._bound(s[k], pointer(path, k))
                if lo is None or d > lo or (d == lo and strict_bound):
                    lo, lo_incl = d, not strict_bound
        for k, strict_bound in (("maximum", False), ("exclusiveMaximum", True)):
            if k in s:
                d = self._bound(s[k], pointer(path, k))
                if hi is None or d < hi or (d == hi and strict_bound):
                    hi, hi_incl = d, not strict_bound
        for k in s:  # schema order, not a set's: the report must not change between runs
            if k in NUMBER_KW and k != "multipleOf":
                self.rep.enforced(pointer(path, k), k)
        if "multipleOf" in s:
            return self._multiple_of(s, path, integer, (lo, lo_incl, hi, hi_incl), excluded)
        return self._range(lo, lo_incl, hi, hi_incl, integer, excluded)

    def _range(
        self,
        lo: Decimal | None,
        lo_incl: bool,
        hi: Decimal | None,
        hi_incl: bool,
        integer: bool,
        excluded: list[Any],
    ) -> ir.Expr:
        if not excluded:
            return number_range(lo, lo_incl, hi, hi_incl, integer, self.int_forms)
        # exclude points: split the interval at each excluded value
        points = sorted({decimal_of(v) for v in excluded})
        pieces: list[ir.Expr] = []
        cur, cur_incl = lo, lo_incl
        for p in points:
            if (lo is not None and p < lo) or (hi is not None and p > hi):
                continue
            pieces.append(number_range(cur, cur_incl, p, False, integer, self.int_forms))
            cur, cur_incl = p, False
        pieces.append(number_range(cur, cur_incl, hi, hi_incl, integer, self.int_forms))
        live = [x for x in pieces if x != ir.NOTHING]
        return ir.alt(*live) if live else ir.NOTHING

    def _bound(self, v: Any, where: str) -> Decimal:
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise GrammarError(f"{where} must be a number")
        return decimal_of(v)

    def _multiple_of(
        self,
        s: dict[str, Any],
        path: str,
        integer: bool,
        bounds: tuple[Decimal | None, bool, Decimal | None, bool],
        excluded: list[Any],
    ) -> ir.Expr:
        lo, lo_incl, hi, hi_incl = bounds
        where = path + "/multipleOf"
        k = s["multipleOf"]
        if isinstance(k, float) and k.is_integer():
            k = int(k)
        if isinstance(k, float) and k > 0 and math.isfinite(k):  # exact decimal arithmetic
            return self._decimal_multiple(decimal_of(k), where, integer, bounds, excluded)
        if not isinstance(k, int) or isinstance(k, bool) or k <= 0:
            self.rep.rejected(where, "multipleOf", "multipleOf must be a positive number")
            if lo is None and hi is None:
                return number_range(lo, True, hi, True, integer, self.int_forms)
            return JSON_NUMBER
        if excluded or k > MAX_MULTIPLE_OF:  # past the plain mod-k automaton: the decimal one
            return self._decimal_multiple(decimal_of(s["multipleOf"]), where, integer, bounds, excluded)
        fraction = not integer or self.int_forms == "all"
        if lo is not None or hi is not None:  # the mod-k automaton times the range's
            try:
                bounded = chardfa.intersection(
                    [
                        chardfa.from_expr(number_range(lo, lo_incl, hi, hi_incl, integer, self.int_forms)),
                        chardfa.multiples(k, fraction),
                    ]
                )
            except GrammarError as e:
                self.rep.rejected(where, "multipleOf", f"multipleOf with bounds: {e.message}")
                return number_range(lo, lo_incl, hi, hi_incl, integer, self.int_forms)
            self.rep.enforced(where, "multipleOf", "integers divisible by k in range (plain spelling)")
            return bounded.to_expr(self.rules, U.fresh_stem(self.rules, f"mult{k}"))
        self.rep.enforced(where, "multipleOf", "integers divisible by k (plain spelling)")
        return multiple_of(k, self.rules, U.fresh_stem(self.rules, f"mult{k}"), fraction)

    def _decimal_multiple(
        self,
        m: Decimal,
        where: str,
        integer: bool,
        bounds: tuple[Decimal | None, bool, Decimal | None, bool],
        excluded: list[Any],
    ) -> ir.Expr:
        """Exact multiples of ``m`` in the range (:func:`.numbers.multiples_within`), one rule per
        divisor and range; past its state budget, rejected (lenient: the range alone)."""
        base = self._range(*bounds, integer, excluded)
        try:
            dfa = multiples_within(m, base, self.canonical)
        except GrammarError as e:
            self.rep.rejected(where, "multipleOf", f"multipleOf {m}: {e.message}")
            return base
        self.rep.enforced(
            where, "multipleOf", "exact decimal multiples (see numbers.py for exponent spellings)"
        )
        name = multiples_rule_name(m, self.number_form(base))
        return self._rule(name, lambda: dfa.to_expr(self.rules, name))


def unit_cycle(rules: dict[str, ir.Expr], name: str, body: ir.Expr) -> bool:
    """Whether ``body`` is ``name`` itself through rules that are each one bare reference (a
    schema that is its own ``$ref``, directly or through schemas met again): no language."""
    seen = set()
    while isinstance(body, ir.Ref) and body.name not in seen:
        if body.name == name:
            return True
        seen.add(body.name)
        body = rules.get(body.name, ir.NOTHING)
    return False


class Walk:
    """A schema being walked (:meth:`SchemaCompiler.walked`), and the rule that holds its
    expression once the schema was met again inside its own walk."""

    __slots__ = ("key", "name")

    def __init__(self, key: str) -> None:
        self.key = key
        self.name: str | None = None

    def done(self, out: ir.Expr, rules: dict[str, ir.Expr], path: str) -> ir.Expr:
        """The walk's result, which is also the body of its rule if it has one."""
        if self.name is None:
            return out
        if unit_cycle(rules, self.name, out):
            raise GrammarError(f"the schema at {path or '/'} refers to itself without consuming input")
        rules[self.name] = out
        return out


def json_literal(v: Any) -> str:
    return "null" if v is None else "true" if v else "false"


def add_builtin(rules: dict[str, ir.Expr], ws: ir.Expr, canonical: bool = False) -> None:
    """Generic JSON values as rules ``json-value`` and friends (canonical: strings and numbers
    in canonical spelling; keys may still come in any order and repeat)."""
    rules.setdefault("json-char", CANONICAL_CHAR if canonical else JSON_CHAR)
    made = _BUILTIN.get((ws, canonical))
    if made is None:
        made = _builtin_rules(ws, canonical)
        if len(_BUILTIN) < 16:
            _BUILTIN[(ws, canonical)] = made
    rules.update(made)


# add_builtin's rules (after json-char) by (whitespace expression, canonical): no schema's content,
# so clear_memos keeps them; IR is immutable, so every grammar may hold the same nodes.  Made per
# call they were ~40 k instructions of each cold schema with an unconstrained value in it.
_BUILTIN: dict[tuple[ir.Expr, bool], dict[str, ir.Expr]] = {}


def _builtin_rules(ws: ir.Expr, canonical: bool) -> dict[str, ir.Expr]:
    """The rules ``add_builtin`` sets after ``json-char``, in the order it sets them."""
    rules: dict[str, ir.Expr] = {}
    rules["json-string"] = ir.seq(U.lit('"'), ir.Repeat(ir.Ref("json-char"), 0, None), U.lit('"'))
    rules["json-number"] = cap_digits(JSON_NUMBER) if canonical else JSON_NUMBER
    comma = ir.seq(ws, U.lit(","), ws)
    member = ir.seq(ir.Ref("json-string"), ws, U.lit(":"), ws, ir.Ref("json-value"))
    rules["json-member"] = member
    rules["json-object"] = ir.alt(
        ir.seq(U.lit("{"), ws, U.lit("}")),
        ir.seq(U.lit("{"), ws, ir.Ref("json-member"),
               ir.Repeat(ir.seq(comma, ir.Ref("json-member")), 0, None), ws, U.lit("}")),
    )  # fmt: skip
    rules["json-array"] = ir.alt(
        ir.seq(U.lit("["), ws, U.lit("]")),
        ir.seq(U.lit("["), ws, ir.Ref("json-value"), ir.Repeat(ir.seq(comma, ir.Ref("json-value")), 0, None),
               ws, U.lit("]")),
    )  # fmt: skip
    rules["json-value"] = ir.alt(
        ir.Ref("json-object"), ir.Ref("json-array"), ir.Ref("json-string"), ir.Ref("json-number"),
        U.lit("true"), U.lit("false"), U.lit("null"),
    )  # fmt: skip
    return rules


__all__ = ["SchemaCompiler", "TYPES", "Walk", "add_builtin", "detect_draft"]
