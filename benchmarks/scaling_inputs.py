"""The inputs of ``bench_scaling``: for each sweep, the grammar of size N and one valid document of
it, and the vocabularies of the vocabulary sweep.  Everything is generated from fixed seeds, so a
point is the same input in every process and every run.

Sweeps (N is the size of the input; the document is the largest the grammar allows where it has
a bound):

* ``properties``: an object with N required properties (names from :func:`identifiers`; values
  string, integer, number, boolean in turn; ``additionalProperties`` absent); the document lists
  them in schema order.
* ``enum``: a string ``enum`` of N distinct identifiers of 5-15 characters; the document is the
  last one listed.
* ``string``: ``{"type": "string", "maxLength": N}``; the document is N characters of prose.
* ``array``: ``{"type": "array", "items": {"type": "integer"}, "maxItems": N}``; the document has N
  integers.
* ``nesting``: N objects nested (``{"type": "object", "properties": {"a": <next>}, "required":
  ["a"]}``, the innermost ``a`` an integer); the document is ``{"a": {"a": ... 1}}``.
* ``gbnf``: N GBNF rules forming a binary tree: ``root ::= r1``, an inner rule ``r<i> ::= "("
  r<2i> " " r<2i+1> ")"`` (or ``"[" r<2i> "]"`` with one child), a leaf ``r<i> ::= [a-z]+ |
  [0-9]+``; the document has every leaf, so it grows with N.
* ``vocab``: the ``properties`` schema with 4 properties, compiled for vocabularies of 50k-200k
  ids (:data:`VOCABULARIES`); N is the number of ids.

Every schema goes to every engine as JSON text (the text is made before the clock starts; parsing
it is part of the compile).  Documents are ``json.dumps`` with its default separators.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from .common import TokenSet, llama3


@dataclass(frozen=True)
class Case:
    """One point of a sweep: ``kind`` "schema" (``source`` is JSON text) or "gbnf"."""

    sweep: str
    n: int
    kind: str
    source: str
    document: str
    vocab: str = "llama3"


# ---- identifiers and values -----------------------------------------------------------------

_ROOTS = (
    "user order item price account status created updated name email phone address city country "
    "zip code region total amount tax discount invoice payment method card bank balance currency "
    "rate count limit offset page size type kind label title body note comment tag group team role "
    "owner member admin level score rank weight height width depth color shape style theme font "
    "icon image file path url host port token key secret session device model version build "
    "release branch commit author editor reviewer project task issue ticket event action source "
    "target start end date time zone day week month year first last min max avg sum id ref parent "
    "child node edge graph tree list map set queue stack cache index field value record entry"
).split()


def identifiers(n: int) -> list[str]:
    """``n`` distinct identifiers of 5-15 characters, snake_case or camelCase from 1-3 common
    words (a digit appended when the words run out); the first k of ``identifiers(n)`` are
    ``identifiers(k)``."""
    rng = random.Random(20240611)
    seen: set[str] = set()
    out: list[str] = []
    misses = 0
    while len(out) < n:
        words = rng.sample(_ROOTS, rng.choice((1, 2, 2, 3)))
        if rng.random() < 0.5:
            name = "_".join(words)
        else:
            name = words[0] + "".join(w.capitalize() for w in words[1:])
        if misses > 50:
            name = name[:12] + str(rng.randrange(1000))
        if 5 <= len(name) <= 15 and name not in seen:
            seen.add(name)
            out.append(name)
            misses = 0
        else:
            misses += 1
    return out


_PROSE = (
    "The quick brown fox jumps over the lazy dog while the committee reviews the quarterly "
    "report, and every reviewer adds a short note about prices, dates and the next release. "
)


def prose(n: int) -> str:
    """Exactly ``n`` characters of ASCII prose (nothing that JSON escapes)."""
    return (_PROSE * (n // len(_PROSE) + 1))[:n]


_TYPES = ("string", "integer", "number", "boolean")


def _value(kind: str, i: int) -> Any:
    if kind == "string":
        return f"{_ROOTS[i % len(_ROOTS)]} {i}"
    if kind == "integer":
        return i * 37 % 1000
    if kind == "number":
        return i * 1.25 + 0.5
    return i % 2 == 0


# ---- the sweeps ------------------------------------------------------------------------------


def properties(n: int) -> Case:
    names = identifiers(n)
    kinds = [_TYPES[i % 4] for i in range(n)]
    schema = {
        "type": "object",
        "properties": {k: {"type": t} for k, t in zip(names, kinds, strict=True)},
        "required": names,
    }
    doc = {k: _value(t, i) for i, (k, t) in enumerate(zip(names, kinds, strict=True))}
    return Case("properties", n, "schema", json.dumps(schema), json.dumps(doc))


def enum(n: int) -> Case:
    values = identifiers(n)
    schema = {"type": "string", "enum": values}
    return Case("enum", n, "schema", json.dumps(schema), json.dumps(values[-1]))


def string(n: int) -> Case:
    schema = {"type": "string", "maxLength": n}
    return Case("string", n, "schema", json.dumps(schema), json.dumps(prose(n)))


def array(n: int) -> Case:
    schema = {"type": "array", "items": {"type": "integer"}, "maxItems": n}
    doc = [i * 7919 % 10007 for i in range(n)]
    return Case("array", n, "schema", json.dumps(schema), json.dumps(doc))


def nesting(n: int) -> Case:
    # Text built inside out: json.dumps of 2N nested dicts would pass Python's recursion limit.
    schema = '{"type": "integer"}'
    for _ in range(n):
        schema = f'{{"type": "object", "properties": {{"a": {schema}}}, "required": ["a"]}}'
    return Case("nesting", n, "schema", schema, '{"a": ' * n + "1" + "}" * n)


def gbnf(n: int) -> Case:
    """``n`` rules: ``root`` and the binary tree ``r1 .. r<n-1>``."""
    last = n - 1
    rules = ["root ::= r1"]
    for i in range(1, n):
        if 2 * i + 1 <= last:
            rules.append(f'r{i} ::= "(" r{2 * i} " " r{2 * i + 1} ")"')
        elif 2 * i <= last:
            rules.append(f'r{i} ::= "[" r{2 * i} "]"')
        else:
            rules.append(f"r{i} ::= [a-z]+ | [0-9]+")
    return Case("gbnf", n, "gbnf", "\n".join(rules) + "\n", _gbnf_text(1, last))


def _gbnf_text(i: int, last: int) -> str:
    """The document of rule ``r<i>`` (the tree is log2 N deep)."""
    if 2 * i + 1 <= last:
        return f"({_gbnf_text(2 * i, last)} {_gbnf_text(2 * i + 1, last)})"
    if 2 * i <= last:
        return f"[{_gbnf_text(2 * i, last)}]"
    return _ROOTS[i % len(_ROOTS)] if i % 2 else str(i)


# ---- vocabularies ----------------------------------------------------------------------------

# name -> (quicktok encoding, ids kept: None = all).  quicktok ships cl100k_base, llama3, qwen3 and
# o200k_base (o200k_harmony is o200k with more special tokens); it has no ~50k vocabulary (gpt2 /
# r50k) and none of ~256k (Gemma), so the smallest point is cl100k cut to its first 50,000 ranks
# (a prefix of a BPE ranking is a BPE vocabulary: every merge's parts rank lower) plus its
# <|endoftext|>, and the largest is o200k.
VOCABULARIES: dict[str, tuple[str, int | None]] = {
    "cl100k_50k": ("cl100k_base", 50_000),
    "cl100k_base": ("cl100k_base", None),
    "llama3": ("llama3", None),
    "qwen3": ("qwen3", None),
    "o200k_base": ("o200k_base", None),
}


@lru_cache(maxsize=2)
def token_set(name: str) -> TokenSet:
    """A vocabulary of :data:`VOCABULARIES` as the engines take it: ids without text (holes in
    the encoding) and special tokens are text-free, the encoding's end-of-text token stops
    (Llama-3: ``LLAMA3_STOPS``, as in every other benchmark)."""
    if name == "llama3":
        return llama3()
    import quicktok

    encoding, keep = VOCABULARIES[name]
    enc = quicktok.get_encoding(encoding)
    toks: list[bytes] = []
    special: set[int] = set()
    for i in range(keep or enc.n_vocab):
        try:
            toks.append(enc.decode_single_token_bytes(i))
        except Exception:  # noqa: BLE001 - an id the encoding leaves unused
            toks.append(b"")
            special.add(i)
    specials = {enc.encode_single_token(s) for s in enc.special_tokens_set}
    if keep is None:
        special |= specials
        return TokenSet(name, tuple(toks), (enc.eot_token,), frozenset(special), enc.encode_ordinary)
    eot = len(toks)
    toks.append(enc.decode_single_token_bytes(enc.eot_token))
    special.add(eot)
    return TokenSet(name, tuple(toks), (eot,), frozenset(special), _greedy_encoder(toks[:keep]))


def _greedy_encoder(toks: list[bytes]) -> Callable[[str], list[int]]:
    """Longest match first, for a cut vocabulary that no BPE tokenizer here implements: every
    engine accepts any tokenization of the document, not only the BPE one."""
    ids = {t: i for i, t in enumerate(toks) if t}
    longest = max(len(t) for t in ids)

    def encode(text: str) -> list[int]:
        data, out, i = text.encode(), [], 0
        while i < len(data):
            for k in range(min(longest, len(data) - i), 0, -1):
                if data[i : i + k] in ids:
                    out.append(ids[data[i : i + k]])
                    i += k
                    break
            else:
                raise ValueError(f"byte {data[i]} has no token")
        return out

    return encode


def vocab_size(name: str) -> int:
    """The number of ids of a vocabulary of :data:`VOCABULARIES` (the N of its point)."""
    import quicktok

    encoding, keep = VOCABULARIES[name]
    return keep + 1 if keep else quicktok.get_encoding(encoding).n_vocab


def vocab(name: str) -> Case:
    base = properties(4)
    return Case("vocab", vocab_size(name), base.kind, base.source, base.document, name)


# ---- the sweeps' points ----------------------------------------------------------------------


@dataclass(frozen=True)
class Sweep:
    name: str
    what: str
    points: tuple[Any, ...]  # N, or a vocabulary name
    quick: tuple[Any, ...]
    make: Callable[[Any], Case]


SWEEPS: dict[str, Sweep] = {
    s.name: s
    for s in (
        Sweep(
            "properties",
            "object with N required properties (string/integer/number/boolean)",
            (4, 16, 64, 256, 1024, 4096, 10000),
            (4, 16),
            properties,
        ),
        Sweep(
            "enum",
            "string enum of N identifiers (5-15 chars)",
            (10, 100, 1000, 10000, 100000),
            (10, 100),
            enum,
        ),
        Sweep(
            "string",
            'string with maxLength N; document: N characters ({"type":"string","maxLength":N})',
            (8, 64, 512, 4096, 32768),
            (8, 64),
            string,
        ),
        Sweep(
            "array",
            "array of integers with maxItems N; document: N items",
            (8, 64, 512, 4096, 32768),
            (8, 64),
            array,
        ),
        Sweep("nesting", "objects nested N deep", (2, 8, 32, 128, 512), (2, 8), nesting),
        Sweep("gbnf", "GBNF with N rules (a binary tree of rules)", (10, 100, 1000, 10000), (10, 100), gbnf),
        Sweep(
            "vocab",
            "the 4-property object schema for a vocabulary of N ids",
            tuple(VOCABULARIES),
            ("cl100k_50k", "llama3"),
            vocab,
        ),
    )
}
