"""Character classes as UTF-8 byte automata.

A code-point range becomes a few sequences of byte ranges, split where the
encoding length changes and where a byte range would otherwise cover
continuation bytes unevenly (the classic construction of RE2 and Rust's
utf8-ranges).  Surrogates are removed first; overlong forms are never
produced because every sequence is built from real encodings of its ends.
"""

from __future__ import annotations

from .ir import SURROGATES, normalize_ranges

ByteSeq = tuple[tuple[int, int], ...]

_LENGTH_LIMITS = (0x7F, 0x7FF, 0xFFFF)


def _encode(cp: int) -> bytes:
    return chr(cp).encode("utf-8", "surrogatepass")


def _split(lo: int, hi: int, out: list[ByteSeq]) -> None:
    if lo > hi:
        return
    for top in _LENGTH_LIMITS:
        if lo <= top < hi:
            _split(lo, top, out)
            _split(top + 1, hi, out)
            return
    if hi <= 0x7F:
        out.append(((lo, hi),))
        return
    n = len(_encode(lo))
    for i in range(1, n):
        m = (1 << (6 * i)) - 1
        if lo & ~m != hi & ~m:
            if lo & m:
                _split(lo, lo | m, out)
                _split((lo | m) + 1, hi, out)
                return
            if hi & m != m:
                _split(lo, (hi & ~m) - 1, out)
                _split(hi & ~m, hi, out)
                return
    a, b = _encode(lo), _encode(hi)
    out.append(tuple(zip(a, b, strict=True)))


def without_surrogates(ranges: tuple[tuple[int, int], ...]) -> tuple[tuple[int, int], ...]:
    lo_s, hi_s = SURROGATES
    out: list[tuple[int, int]] = []
    for lo, hi in ranges:
        if hi < lo_s or lo > hi_s:
            out.append((lo, hi))
            continue
        if lo < lo_s:
            out.append((lo, lo_s - 1))
        if hi > hi_s:
            out.append((hi_s + 1, hi))
    return normalize_ranges(out)


def byte_sequences(ranges: tuple[tuple[int, int], ...]) -> list[ByteSeq]:
    """Byte-range sequences whose concatenations are exactly the UTF-8 encodings
    of the code points in ``ranges`` (surrogates excluded)."""
    norm = normalize_ranges(ranges)
    if norm and norm[-1][1] <= 0x7F:  # ASCII only: one byte each (what _split gives)
        return [((lo, hi),) for lo, hi in norm]
    out: list[ByteSeq] = []
    for lo, hi in without_surrogates(norm):
        _split(lo, hi, out)
    return out
