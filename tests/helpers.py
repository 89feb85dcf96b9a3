"""Readable spec tables for tests, and tiny IR builders so grammars read like BNF."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any, Protocol

import numpy as np

import cfgmask
from cfgmask import ir

from .reference import ReferenceMatcher


class Recognizer(Protocol):
    def accepts(self, data: bytes) -> bool: ...


def _as_bytes(s: str | bytes) -> bytes:
    return s if isinstance(s, bytes) else s.encode("utf-8")


def check(
    grammar: ir.Grammar,
    accepts: Iterable[str | bytes] = (),
    rejects: Iterable[str | bytes] = (),
    using: Callable[[ir.Grammar], Recognizer] = ReferenceMatcher,
) -> None:
    """Assert that ``grammar`` accepts every string of ``accepts`` and none of ``rejects``.

    ``using`` builds the recognizer under test (the reference by default).
    Text strings are UTF-8 encoded; bytes are used as they are.
    """
    m = using(grammar)
    wrong = [("should accept", s) for s in accepts if not m.accepts(_as_bytes(s))]
    wrong += [("should reject", s) for s in rejects if m.accepts(_as_bytes(s))]
    assert not wrong, "\n".join(f"{why}: {s!r}" for why, s in wrong)


# --------------------------------------------------------------------------- IR shorthand


def grammar(start: str = "root", **rules: ir.Expr) -> ir.Grammar:
    """``grammar(root=..., item=...)``: rule names with ``_`` are written as ``-``."""
    return ir.Grammar({name.replace("_", "-"): body for name, body in rules.items()}, start)


def lit(text: str | bytes) -> ir.Literal:
    return ir.Literal(_as_bytes(text))


def chars(*ranges: str | tuple[int, int], negate: bool = False) -> ir.CharClass:
    """``chars("az", "_", (0x80, 0x10FFFF))``: two-letter strings are ranges, one letter a point."""
    out: list[tuple[int, int]] = []
    for r in ranges:
        if isinstance(r, tuple):
            out.append(r)
        elif len(r) == 1:
            out.append((ord(r), ord(r)))
        else:
            out.append((ord(r[0]), ord(r[1])))
    return ir.char_class(out, negate=negate)


def byte_class(*ranges: tuple[int, int]) -> ir.ByteClass:
    return ir.ByteClass(tuple(ranges))


def ref(name: str) -> ir.Ref:
    return ir.Ref(name)


def seq(*items: ir.Expr) -> ir.Seq:
    return ir.Seq(tuple(items))


def alt(*items: ir.Expr) -> ir.Alt:
    return ir.Alt(tuple(items))


def rep(item: ir.Expr, lo: int = 0, hi: int | None = None) -> ir.Repeat:
    return ir.Repeat(item, lo, hi)


def opt(item: ir.Expr) -> ir.Repeat:
    return ir.Repeat(item, 0, 1)


def json_grammar(max_ws: int | None = None) -> ir.Grammar:
    """JSON written in character-level rules, like llama.cpp's json.gbnf."""
    ws = rep(chars(" ", "\t", "\n", "\r"), 0, max_ws)
    escape = seq(
        lit("\\"),
        alt(
            chars('"', "\\", "/", "b", "f", "n", "r", "t"), seq(lit("u"), rep(chars("09", "af", "AF"), 4, 4))
        ),
    )
    return grammar(
        root=seq(ref("ws"), ref("value"), ref("ws")),
        value=alt(
            ref("object"), ref("array"), ref("string"), ref("number"), lit("true"), lit("false"), lit("null")
        ),
        object=seq(
            lit("{"),
            ref("ws"),
            opt(seq(ref("member"), rep(seq(lit(","), ref("ws"), ref("member"))))),
            lit("}"),
        ),
        member=seq(ref("string"), ref("ws"), lit(":"), ref("ws"), ref("value"), ref("ws")),
        array=seq(
            lit("["),
            ref("ws"),
            opt(seq(ref("value"), ref("ws"), rep(seq(lit(","), ref("ws"), ref("value"), ref("ws"))))),
            lit("]"),
        ),
        string=seq(lit('"'), rep(alt(chars('"', "\\", (0, 0x1F), negate=True), escape)), lit('"')),
        number=seq(
            opt(lit("-")),
            alt(lit("0"), seq(chars("19"), rep(chars("09")))),
            opt(seq(lit("."), rep(chars("09"), 1))),
            opt(seq(chars("e", "E"), opt(chars("+", "-")), rep(chars("09"), 1))),
        ),
        ws=ws,
    )


def json_spellings(data: object) -> set[str]:
    """``data`` as ``json.dumps`` writes it by default, compact, and as indented raw UTF-8: the
    serializations a verdict test checks (each must be accepted iff the instance is valid)."""
    return {
        json.dumps(data),
        json.dumps(data, separators=(",", ":")),
        json.dumps(data, ensure_ascii=False, indent=1),
    }


@contextmanager
def core_switch(enable: Callable[[Any], object], value: object, default: object = True) -> Iterator[None]:
    """A strategy of the core switched by ``enable(value)`` (a ``_core.*_enable``), every cache
    cleared on entry and again after ``enable(default)`` restores it, so no entry outlives its mode."""
    enable(value)
    cfgmask.clear_caches()
    try:
        yield
    finally:
        enable(default)
        cfgmask.clear_caches()


def stop_vocab(pieces: tuple[bytes, ...]) -> tuple[cfgmask.Vocabulary, list[bytes]]:
    """A vocabulary of ``pieces`` and one stop token after them, with the reference's token bytes
    (the stop token's as b"")."""
    vocab = cfgmask.Vocabulary.from_token_bytes(
        [*pieces, None], stop_token_ids=[len(pieces)], special_token_ids=[]
    )
    return vocab, [*pieces, b""]


def mask_bools(m: cfgmask.Matcher, size: int) -> list[bool]:
    """The matcher's next mask, one bool a token."""
    mask = cfgmask.allocate_bitmask(1, size)
    m.fill_bitmask(mask, 0)
    words = mask[0].tolist()
    return [bool((words[i >> 5] >> (i & 31)) & 1) for i in range(size)]


def masks_along(
    compiled: cfgmask.CompiledGrammar, tokens: Iterable[int], *, final: bool = False
) -> list[Any]:
    """The masks a fresh matcher fills before each of ``tokens``, each token accepted after its mask;
    with ``final``, also the mask after the last token."""
    m = cfgmask.Matcher(compiled)
    out = []
    mask = cfgmask.allocate_bitmask(1, compiled.vocab.size)
    for t in tokens:
        m.fill_bitmask(mask, 0)
        out.append(mask.copy())
        assert m.accept_token(t)
    if final:
        m.fill_bitmask(mask, 0)
        out.append(mask.copy())
    return out


def walk_agrees(
    ref_m: ReferenceMatcher,
    tokens: list[bytes],
    stops: Any,
    specials: Any,
    ids: Iterable[int],
    **matchers: cfgmask.Matcher,
) -> None:
    """Each matcher's mask equal to the reference's before every token of the walk ``ids`` and at
    its end, each token accepted by every matcher (``tokens``: the reference's token bytes)."""
    prefix = b""
    size = len(tokens)
    for t in [*ids, None]:
        expected = ref_m.mask(prefix, tokens, stops, specials)
        for name, m in matchers.items():
            assert mask_bools(m, size) == expected, f"{name}, prefix {prefix!r}"
        if t is None:
            break
        assert all(m.accept_token(t) for m in matchers.values())
        prefix += tokens[t] or b""


def same_entries(a: Any, b: Any, what: str) -> None:
    """Entries ``(accepted, uncertain, ...)`` of every state, one list a way of building them:
    ``a`` equal to ``b`` (named ``what`` in the messages) in accepted and uncertain tokens."""
    for s, (x, y) in enumerate(zip(a, b, strict=True)):
        assert np.array_equal(x[0], y[0]), f"{what}: state {s}: accepted tokens differ"
        assert np.array_equal(x[1], y[1]), f"{what}: state {s}: uncertain tokens differ"


def same_document_masks(a: Any, b: Any, docs: Any) -> None:
    """The masks along each of ``docs`` (token lists), one ``masks_along`` list a document in ``a``
    and in ``b``: one mask a token, every mask the same."""
    for d, (x, y) in enumerate(zip(a, b, strict=True)):
        assert len(x) == len(y) == len(docs[d])
        for i, (p, q) in enumerate(zip(x, y, strict=True)):
            assert np.array_equal(p, q), f"document {d}: mask {i} differs"


def same_block_entries(on: Any, off: Any, plain: Any, off_name: str) -> None:
    """Entries ``(accepted, uncertain, split)`` of every state, one list a way of building them:
    ``on`` equal to ``off`` (named ``off_name`` in the messages) and to ``plain`` (a plain walk)
    in accepted and uncertain tokens, and to ``off`` in the block split (wrap bits, rest) where
    either has one."""
    for s, (a, b, c) in enumerate(zip(on, off, plain, strict=True)):
        for x, what in ((b, off_name), (c, "plain walk")):
            assert np.array_equal(a[0], x[0]), f"state {s}: accepted tokens differ from the {what}"
            assert np.array_equal(a[1], x[1]), f"state {s}: uncertain tokens differ from the {what}"
        assert (a[2] is None) == (b[2] is None), f"state {s}: split by one of them only ({off_name})"
        if a[2] is not None and b[2] is not None:
            assert np.array_equal(a[2][0], b[2][0]), f"state {s}: wrap bits differ"
            assert np.array_equal(a[2][1], b[2][1]), f"state {s}: rest differs"
