"""repeat.c's pair table: a proof's pairs of states, keyed by both states and both exit flags.

Before the token walk, a proof explores the strings of a first byte's subtree by the pairs of
states (with their exit flags) that both automata reach, breadth first, each pair once
(csrc/repeat.c, ``pairs_agree``: at most 64 pairs, open addressing in 128 slots).  A pair read as
seen when it is not skips the strings past it, and the proof may hold where a token differs.
Here two sibling states (``r``'s positions after ``a`` and after ``b``, ``r`` kept a call so
that its exits read FOLLOW(r)) reach, through two strings of one length, pairs that differ only
by one exit flag or only by one state, and wide word sets reach 30-60 pairs, so that home slots
collide; every entry is compared with the sharing on (the checks on and off), off and the plain
walks', in state order and in reverse (either sibling asks), and with the pairs hashed and all
in one home slot (``_core.repeat_pair_hash_enable``: each lookup then probes every pair seen, so
a compare that leaves out part of the key meets the pair it confuses).  Breaking the lookup
(the exit flags, the first or the second state left out of the key or of its compare, any
occupied home slot read as seen) fails these tests."""

from __future__ import annotations

import random
from contextlib import AbstractContextManager

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cfgmask
from cfgmask import _core
from cfgmask.compile.limits import CompileLimits

from .helpers import core_switch
from .test_entries import WALKS_ONLY
from .test_listed_reuse import _same

NO_INLINE = CompileLimits(inline_max_states=0, inline_shared_states=0)
LETTERS = "defghkmnpqstuvw"  # at most 15: the subtree's bytes past the first stay summed up


def _on(on: bool) -> AbstractContextManager[None]:
    return core_switch(_core.repeat_enable, on)


def _checks(on: bool) -> AbstractContextManager[None]:
    return core_switch(_core.repeat_checks_enable, on)


def _entries(compiled: cfgmask.CompiledGrammar, reverse: bool) -> list:
    order = range(compiled.tables.n_states)
    got = {s: compiled._handle.entry(s) for s in (reversed(order) if reverse else order)}
    return [got[s] for s in order]


def _hash(on: bool) -> AbstractContextManager[None]:
    return core_switch(_core.repeat_pair_hash_enable, on)


def _check(text: str, toks: list[bytes]) -> int:
    """Every entry of ``text`` (no rule inlined) equal with the sharing on (the checks on and off,
    the pairs hashed or all in one home slot), off and the plain walks', states asked in order
    and in reverse; the proofs tried."""
    toks = list(dict.fromkeys(t for t in toks if t))
    vocab = cfgmask.Vocabulary.from_token_bytes([*toks, b""], stop_token_ids=[len(toks)])
    g = cfgmask.Grammar.from_gbnf(text)
    with _on(False):
        ref = _entries(cfgmask.compile(g, vocab, limits=NO_INLINE, _strategy=WALKS_ONLY), False)
    tries = 0
    for reverse in (False, True):
        for checks, hashed in [(True, True), (False, True), (True, False)]:
            with _on(True), _checks(checks), _hash(hashed):
                t0 = _core.repeat_counts()[0]
                got = _entries(cfgmask.compile(g, vocab, limits=NO_INLINE), reverse)
                tries += _core.repeat_counts()[0] - t0
            _same(got, ref, f"the plain walks (reverse {reverse}, checks {checks}, hashed {hashed})")
        with _on(False):
            _same(_entries(cfgmask.compile(g, vocab, limits=NO_INLINE), reverse), ref, "the sharing off")
    return tries


def _siblings(a_side: str, b_side: str, follow: tuple[str, str] = ('"."', '","')) -> str:
    """``r``'s two branches after its first byte (``a``, ``b``: the siblings, both reading ``0``
    next); ``r`` called twice, followed by each of ``follow``."""
    return f'root ::= "x" r {follow[0]} | "y" r {follow[1]}\nr ::= "a0" ({a_side}) | "b0" ({b_side})\n'


BASE = [b"x", b"y", b"a", b"b", b".", b",", b"0", b"a0", b"b0"]


def test_pairs_differing_by_exit_flags() -> None:
    """After `0` the `b` side accepts and `e` follows `r`: `0d` and `0e` reach the same pair of
    states, `0e` with the `b` side's exit flag.  Past it `0ez` dies in both: rejected by `a`,
    uncertain for `b` -- only the flagged pair tells them apart (the unflagged one comes first)."""
    toks = [*BASE, b"0d", b"0e", b"0dk", b"0ek", b"0ez", b"0dz", b"e", b"k", b"z", b"ez"]
    assert _check(_siblings('[de] "k"', '([de] "k")?', ('"ez"', '"."')), toks) > 0
    # the mirror: the flag on the `a` side, whose entry is then the uncertain one
    assert _check(_siblings('([de] "k")?', '[de] "k"', ('"ez"', '"."')), toks) > 0


def test_pairs_differing_by_one_state() -> None:
    """`0d` and `0e` reach pairs with the same first state (`a`'s after either) and different
    second states (`b` reads `z` after `0e` only): `0ez` rejected by `a`, accepted by `b`.  And
    the mirror, the states swapped."""
    toks = [*BASE, b"0d", b"0e", b"0dk", b"0ek", b"0ez", b"0dz", b"k", b"z"]
    assert _check(_siblings('[de] "k"', '"dk" | "e" [kz]'), toks) > 0
    assert _check(_siblings('"dk" | "e" [kz]', '[de] "k"'), toks) > 0


def _words(rng: random.Random, n: int) -> list[str]:
    return sorted({"".join(rng.choice(LETTERS) for _ in range(rng.randint(2, 6))) for _ in range(n)})


def _alt(words: list[str]) -> str:
    return " | ".join(f'"{w}"' for w in words)


@pytest.mark.parametrize("seed", range(24))
def test_wide_siblings_one_word_apart(seed: int) -> None:
    """Word sets whose tries give both sides ~30-60 pairs: the `b` side's last word differs from
    the `a` side's in its last byte, so a chain of pairs differing in both states comes last in
    the breadth-first order, after many pairs in the table (their home slots collide); a token
    ends on the different byte.  And a second set with the difference past every token (the
    proof holds there)."""
    rng = random.Random(seed)
    words = _words(rng, rng.randint(8, 14))
    last = words[-1]
    other = last[:-1] + next(c for c in reversed(LETTERS) if c != last[-1])
    toks = [*BASE, *(b"0" + w.encode() for w in words), b"0" + other.encode()]
    toks += [b"0" + w[: rng.randint(1, len(w))].encode() for w in words]
    assert _check(_siblings(_alt(words), _alt([*words[:-1], other])), toks) > 0
    # past the tokens: `b`'s last word two letters longer than any token reads
    longer = [*words[:-1], last + "dd"]
    held = _core.repeat_counts()[1]
    _check(_siblings(_alt(words), _alt(longer)), [t for t in toks if len(t) <= len(last) + 1])
    assert _core.repeat_counts()[1] > held, "no proof held"


@settings(max_examples=60, deadline=None)
@given(
    words=st.lists(st.text(LETTERS[:6], min_size=1, max_size=4), min_size=2, max_size=10, unique=True),
    change=st.sampled_from(["byte", "drop", "extend", "add", "remove"]),
    at=st.integers(0, 9),
    follow=st.tuples(st.sampled_from(LETTERS[:6] + "."), st.sampled_from(LETTERS[:6] + ",")),
    cut=st.integers(1, 5),
    data=st.data(),
)
def test_siblings_random_words(
    words: list[str], change: str, at: int, follow: tuple[str, str], cut: int, data: st.DataObject
) -> None:
    """Hypothesis: the `a` side a set of short words, the `b` side the same set with one word
    changed (a byte replaced, dropped or added, a word added or removed) and letters that follow
    `r` (exits inside tokens where a word is a prefix of another); the tokens the words and
    their prefixes up to `cut` bytes, and random strings of the letters."""
    w = words[at % len(words)]
    other = list(words)
    if change == "byte":
        other[at % len(words)] = w[:-1] + ("d" if w[-1] != "d" else "e")
    elif change == "drop" and len(w) > 1:
        other[at % len(words)] = w[:-1]
    elif change == "extend":
        other[at % len(words)] = w + "f"
    elif change == "add":
        other.append(w + "g")
    elif change == "remove" and len(words) > 2:
        other.remove(w)
    if sorted(set(other)) == sorted(words):
        return
    extra = data.draw(st.lists(st.text(LETTERS[:6], min_size=1, max_size=5), max_size=12))
    toks = [*BASE, *(f.encode() for f in follow), *(("0" + x).encode() for x in [*words, *other, *extra])]
    toks += [("0" + x[:cut]).encode() for x in words]
    _check(_siblings(_alt(words), _alt(other), (f'"{follow[0]}"', f'"{follow[1]}"')), toks)
