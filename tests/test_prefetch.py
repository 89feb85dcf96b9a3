"""Mask prefetch (``Matcher.prefetch``, ``accept_token(t, prefetch=True)``): the next mask is
computed on a worker thread while the caller runs its forward pass.

A prefetched mask must equal a plain fill (and the reference) bit for bit; every call made
while a prefetch is queued, running or done must leave the matcher exactly where a matcher
without prefetch would be, never touch the C matcher from two threads at once, and never let
a dropped matcher be freed under a running worker; a limit the worker hits is raised by the
fill that takes its mask.  ``tests/sanitize.sh asan tests/test_prefetch.py`` runs this under
AddressSanitizer, ``tsan`` under ThreadSanitizer.
"""

from __future__ import annotations

import gc
import threading
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import cfgmask
from cfgmask import LimitError, MatcherError, MatcherLimits
from cfgmask import matcher as matcher_mod

from .reference import ReferenceMatcher
from .strategies import Vocab, grammar_alphabet, grammars, token_walks, vocabularies

JSON_GBNF = r"""
root ::= value
value ::= object | array | string | number | ("true" | "false" | "null")
object ::= "{" ( string ":" value ( "," string ":" value )* )? "}"
array ::= "[" ( value ( "," value )* )? "]"
string ::= "\"" [a-z ]* "\""
number ::= "-"? [0-9]+
"""
MULTI = [b'{"', b'":', b'","', b"true", b"null", b"[1", b",2", b"]}", b"ab", b'"}']
STOP = 256 + len(MULTI)
TOKENS: list[bytes | None] = [bytes([b]) for b in range(256)] + MULTI + [None]
PREFIX = b'{"ab":[1,2,{"c":true}],"d":'  # a viable prefix of JSON_GBNF


def _ids(data: bytes) -> list[int]:
    """Greedy longest match over TOKENS."""
    by_bytes = {t: i for i, t in enumerate(TOKENS) if t}
    out, i = [], 0
    while i < len(data):
        n = next(n for n in range(min(4, len(data) - i), 0, -1) if data[i : i + n] in by_bytes)
        out.append(by_bytes[data[i : i + n]])
        i += n
    return out


@pytest.fixture(scope="module")
def compiled() -> cfgmask.CompiledGrammar:
    vocab = cfgmask.Vocabulary.from_token_bytes(TOKENS, stop_token_ids=[STOP])
    return cfgmask.compile(cfgmask.Grammar.from_gbnf(JSON_GBNF), vocab)


def _mask(m: cfgmask.Matcher) -> np.ndarray:
    out = cfgmask.allocate_bitmask(1, m.compiled.vocab.size)
    m.fill_bitmask(out)
    return out


def _drain() -> None:
    """Wait until every prefetch queued so far has run (a task after them on each worker)."""
    pool = matcher_mod._pool()
    for f in [pool.submit(lambda: None) for _ in range(matcher_mod._POOL_THREADS)]:
        f.result(timeout=30)


@pytest.fixture()
def one_worker() -> Iterator[None]:
    """A prefetch pool of one thread, so a task put in front of it holds prefetches queued."""
    before = matcher_mod._POOL_THREADS
    matcher_mod.set_prefetch_threads(1)
    yield
    _drain()
    matcher_mod.set_prefetch_threads(before)


# --------------------------------------------------------------------------- equal to a plain fill


def _vocab(v: Vocab) -> cfgmask.Vocabulary:
    return cfgmask.Vocabulary.from_token_bytes(
        v.tokens, stop_token_ids=v.stop_ids, special_token_ids=v.special_ids
    )


@given(grammars(), st.data())
def test_prefetched_masks_equal_plain_fills_and_the_reference(g, data) -> None:
    """Along a random walk, a matcher that prefetches every mask (taking it before or after
    the worker is done, forking or not) gives the plain matcher's and the reference's masks."""
    ref = ReferenceMatcher(g)
    if not ref.is_prefix(b""):
        return
    v = data.draw(vocabularies(grammar_alphabet(g) or [b"a"]))
    compiled = cfgmask.compile(g, _vocab(v))
    walk = data.draw(token_walks(ref, v))
    plain, ahead = cfgmask.Matcher(compiled), cfgmask.Matcher(compiled)
    ahead.prefetch()
    prefix = b""
    for t in [*walk.token_ids, None]:
        if data.draw(st.booleans(), label="let the worker finish first"):
            ahead._ahead.future.result(timeout=30)  # type: ignore[union-attr]
        if data.draw(st.integers(0, 5), label="fork") == 0:
            ahead = ahead.fork()
        got = _mask(ahead)
        assert np.array_equal(got, _mask(plain)), prefix
        bits = np.unpackbits(got.view(np.uint8), bitorder="little")[: compiled.vocab.size]
        assert [bool(b) for b in bits] == ref.mask(prefix, v.tokens, v.stop_ids, v.special_ids), prefix
        if t is None:
            break
        assert plain.accept_token(t) and ahead.accept_token(t, prefetch=True)
        prefix += v.tokens[t] or b""
    assert ahead.is_accepting() == plain.is_accepting() == ref.accepts(prefix)


def test_prefetch_runs_on_a_worker_and_times_it(compiled) -> None:
    m, plain = cfgmask.Matcher(compiled), cfgmask.Matcher(compiled)
    _mask(m)
    assert m.prefetch_timing is None  # a direct fill
    for t in _ids(PREFIX):
        assert m.accept_token(t, prefetch=True) and plain.accept_token(t)
        assert m.prefetch_pending
        m._ahead.future.result(timeout=30)  # type: ignore[union-attr]
        assert np.array_equal(_mask(m), _mask(plain))
        timing = m.prefetch_timing
        assert timing is not None and timing.compute_seconds > 0 and timing.wait_seconds >= 0
    wide = [np.full((2, compiled.vocab.size // 32 + 3), -1, dtype=np.int32) for _ in range(2)]
    m.prefetch()
    m._ahead.future.result(timeout=30)  # type: ignore[union-attr]
    m.fill_bitmask(wide[0], 1)  # a wider row: the words past the vocabulary are zeroed too
    plain.fill_bitmask(wide[1], 1)
    words = (compiled.vocab.size + 31) // 32
    assert np.array_equal(wide[0], wide[1]) and not wide[0][1, words:].any() and (wide[0][0] == -1).all()
    m.prefetch()  # the same state: one prefetch
    assert m.prefetch_pending
    assert not m.accept_token(STOP)  # rejected: the state and its prefetched mask stay
    assert m.prefetch_pending
    assert m.accept_token(_ids(b"1")[0])
    assert not m.prefetch_pending  # a new state: the old mask is gone


def test_fill_bitmasks_takes_prefetched_rows(compiled) -> None:
    ids = _ids(PREFIX)
    matchers = [cfgmask.Matcher(compiled) for _ in range(6)]
    plain = [cfgmask.Matcher(compiled) for _ in range(6)]
    batch = cfgmask.allocate_bitmask(6, compiled.vocab.size)
    for k, t in enumerate(ids):
        for i, (m, p) in enumerate(zip(matchers, plain, strict=True)):
            assert p.accept_token(t)
            assert m.accept_token(t, prefetch=i % 3 != 0)  # some rows prefetch, some do not
        if k % 2:
            _drain()
        cfgmask.fill_bitmasks(matchers, batch, threads=3)
        for i, p in enumerate(plain):
            assert np.array_equal(batch[i : i + 1], _mask(p)), (k, i)


# --------------------------------------------------------------------------- every interleaving


class Gate:
    """A MatcherHandle whose prefetch fill waits at a gate; it logs every call to the C matcher."""

    def __init__(self, h: Any) -> None:
        self.h = h
        self.log: list[str] = []
        self.entered = threading.Event()
        self.go = threading.Event()

    def fill_mask_timed(self, row: np.ndarray) -> tuple[float, float]:
        self.entered.set()
        assert self.go.wait(30)
        out = self.h.fill_mask_timed(row)
        self.log.append("prefetch")
        return out

    def __getattr__(self, name: str) -> Callable[..., Any]:
        f = getattr(self.h, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            self.log.append(name)
            return f(*args, **kwargs)

        return call


def _walked(compiled: cfgmask.CompiledGrammar, gate: bool) -> tuple[cfgmask.Matcher, Gate | None]:
    m = cfgmask.Matcher(compiled)
    assert m.accept_tokens(_ids(PREFIX))
    if not gate:
        return m, None
    g = Gate(m._h)
    return cfgmask.Matcher(compiled, _handle=g), g


# (name, the call, does it change the state): each runs on a prefetching matcher and a plain one
OPS: list[tuple[str, Callable[[cfgmask.Matcher], Any], bool]] = [
    ("fill", lambda m: _mask(m).tobytes(), False),
    ("accept", lambda m: m.accept_token(_ids(b"[")[0]), True),
    ("accept-prefetch", lambda m: m.accept_token(_ids(b"[")[0], prefetch=True), True),
    ("accept-rejected", lambda m: m.accept_token(_ids(b"}")[0]), False),
    ("accept-bytes", lambda m: m.accept_bytes(b'"x'), True),
    ("can-accept-bytes", lambda m: m.can_accept_bytes(b"tru"), False),
    ("rollback", lambda m: m.rollback(2), True),
    ("rollback-0", lambda m: m.rollback(0), True),
    ("reset", lambda m: m.reset(), True),
    ("fork", lambda m: _mask(m.fork()).tobytes(), False),
    ("is-accepting", lambda m: m.is_accepting(), False),
    ("jump-forward", lambda m: m.jump_forward_bytes(), False),
    ("is-terminated", lambda m: m.is_terminated(), False),
    ("num-tokens", lambda m: m.num_tokens, False),
]
NO_WAIT = {"is-terminated", "num-tokens"}  # read what a fill never writes
# calls that will (most likely) change the state, and the fill: a queued prefetch is cancelled
CANCELS = {
    "fill",
    "accept",
    "accept-prefetch",
    "accept-rejected",
    "accept-bytes",
    "rollback",
    "rollback-0",
    "reset",
}


def _same_as_plain(m: cfgmask.Matcher, plain: cfgmask.Matcher) -> None:
    assert np.array_equal(_mask(m), _mask(plain))
    assert m.num_tokens == plain.num_tokens and m.is_accepting() == plain.is_accepting()
    assert m.jump_forward_bytes() == plain.jump_forward_bytes()


@pytest.mark.parametrize(("name", "op", "changes"), OPS, ids=[o[0] for o in OPS])
def test_call_during_a_running_prefetch_waits_for_it(compiled, name, op, changes) -> None:
    m, gate = _walked(compiled, gate=True)
    plain, _ = _walked(compiled, gate=False)
    assert gate is not None
    m.prefetch()
    assert gate.entered.wait(30)  # the worker is inside the fill, held at the gate
    gate.log.clear()
    release = threading.Timer(0.05, gate.go.set)
    release.start()
    assert op(m) == op(plain)
    release.join()
    if name not in NO_WAIT:  # the call reached the C matcher only after the worker left it
        assert gate.log[0] == "prefetch", gate.log
    _drain()
    _same_as_plain(m, plain)
    assert m.prefetch_pending == (not changes or name == "accept-prefetch")


@pytest.mark.parametrize(("name", "op", "changes"), OPS, ids=[o[0] for o in OPS])
def test_call_while_a_prefetch_is_queued(compiled, one_worker, name, op, changes) -> None:
    """An accept, rollback, reset or fill cancels a prefetch no worker has started; a call that
    only reads the state waits for it; neither runs beside it."""
    m, gate = _walked(compiled, gate=True)
    plain, _ = _walked(compiled, gate=False)
    assert gate is not None
    gate.go.set()
    hold = threading.Event()
    matcher_mod._pool().submit(hold.wait, 30)  # the one worker is busy: the prefetch queues
    m.prefetch()
    release = threading.Timer(0.05, hold.set)
    release.start()
    assert op(m) == op(plain)
    release.join()
    _drain()
    if name in CANCELS:
        assert gate.log[0] != "prefetch", gate.log  # cancelled before it ran
    elif name not in NO_WAIT:
        assert gate.log[0] == "prefetch", gate.log  # waited for it, then read the state
    _same_as_plain(m, plain)


@pytest.mark.parametrize(("name", "op", "changes"), OPS, ids=[o[0] for o in OPS])
def test_call_after_a_prefetch_is_done(compiled, name, op, changes) -> None:
    m, _ = _walked(compiled, gate=False)
    plain, _ = _walked(compiled, gate=False)
    m.prefetch()
    _drain()
    assert op(m) == op(plain)
    _same_as_plain(m, plain)


def test_matcher_dropped_during_a_running_prefetch(compiled) -> None:
    """The worker holds the C matcher: dropping the Matcher mid-fill frees it only after."""
    m, gate = _walked(compiled, gate=True)
    plain, _ = _walked(compiled, gate=False)
    assert gate is not None
    m.prefetch()
    ahead = m._ahead
    assert ahead is not None
    assert gate.entered.wait(30)
    alive = weakref.ref(gate)
    del m, gate
    gc.collect()
    assert alive() is not None  # still in the worker's hands
    alive().go.set()  # type: ignore[union-attr]
    ahead.future.result(timeout=30)
    assert np.array_equal(ahead.row[None, :], _mask(plain))  # the fill ran to its end, intact
    del ahead
    _drain()
    gc.collect()
    assert alive() is None


def test_matchers_dropped_with_prefetches_queued_and_running(compiled) -> None:
    """Many matchers dropped right after starting a prefetch (queued, running or done, as the
    scheduler has it); run under ASan this catches a worker touching a freed matcher."""
    ids = _ids(PREFIX)
    for i in range(200):
        m = cfgmask.Matcher(compiled)
        assert m.accept_tokens(ids[: i % len(ids)], prefetch=True)
        if i % 3 == 0:
            m = m.fork()
            m.prefetch()
        del m
    _drain()


def test_matcher_dropped_with_a_queued_prefetch_cancels_it(compiled, one_worker) -> None:
    m, gate = _walked(compiled, gate=True)
    assert gate is not None
    gate.go.set()
    hold = threading.Event()
    matcher_mod._pool().submit(hold.wait, 30)
    m.prefetch()
    ahead = m._ahead
    assert ahead is not None
    del m
    gc.collect()
    assert ahead.future.cancelled()
    hold.set()
    _drain()
    assert "prefetch" not in gate.log


# --------------------------------------------------------------------------- errors


AMBIGUOUS = 'root ::= x\nx ::= x x | "a"'  # Earley sets grow with the input
# "aaaa": a mask walks its first three bytes' sets (a listed walk only checks a text's last byte)
A_TOKENS: list[bytes | None] = [b"a", b"aa", b"aaa", b"aaaa", b"b", None]


def _ambiguous(**limits: int) -> cfgmask.CompiledGrammar:
    vocab = cfgmask.Vocabulary.from_token_bytes(A_TOKENS, stop_token_ids=[5])
    return cfgmask.compile(
        cfgmask.Grammar.from_gbnf(AMBIGUOUS), vocab, matcher_limits=MatcherLimits(**limits)
    )


def _outcome(f: Callable[[], Any]) -> tuple[str, Any]:
    try:
        return "ok", f()
    except cfgmask.CfgmaskError as e:
        return type(e).__name__, str(e)


@pytest.mark.parametrize(
    "limits", [{"max_items_per_set": 8}, {"max_items_per_set": 10}, {"max_chart_items": 60}], ids=str
)
def test_worker_limit_errors_surface_as_a_direct_fill_would_raise_them(limits) -> None:
    """Lockstep: a matcher that prefetches and one that does not, with tiny limits.  Each step
    gives the same mask or the same error (LimitError once, then MatcherError, the row zeroed)."""
    direct, ahead = cfgmask.Matcher(_ambiguous(**limits)), cfgmask.Matcher(_ambiguous(**limits))
    ahead.prefetch()
    hits = {"mask": 0, "accept": 0}
    for step in range(40):
        rows = [np.full((1, 1), -1, dtype=np.int32) for _ in range(2)]
        if step % 2:
            _drain()  # the worker's error is waiting, or the worker is still on it
        got = [
            _outcome(lambda m=m, r=r: m.fill_bitmask(r)) for m, r in zip((direct, ahead), rows, strict=True)
        ]
        assert got[0] == got[1] and np.array_equal(rows[0], rows[1]), step
        if got[0][0] != "ok":
            hits["mask"] += 1
            assert got[0][0] == "LimitError" and not rows[1].any()
            again = [_outcome(lambda m=m: _mask(m)) for m in (direct, ahead)]  # sticky
            assert again[0][0] == again[1][0] == "MatcherError"
            direct.rollback(0)  # clear the error, keep the state, go on
            ahead.rollback(0)
        acc = [
            _outcome(lambda: direct.accept_token(0)),
            _outcome(lambda: ahead.accept_token(0, prefetch=True)),
        ]
        assert acc[0] == acc[1], step
        if acc[0][0] != "ok":
            hits["accept"] += 1
            direct.rollback(1)
            ahead.rollback(1)
            ahead.prefetch()
    # with 8 items a set, the masks of the first states fail (on the worker) and accepts do not
    assert hits["mask" if limits.get("max_items_per_set") == 8 else "accept"] > 0, hits


def test_worker_error_surfaces_on_the_next_call_that_reads_the_state() -> None:
    """Not only a fill: an accept after a failed prefetch raises the worker's LimitError (the
    masks of the first states need sets over 8 items, the accepts do not)."""
    m = cfgmask.Matcher(_ambiguous(max_items_per_set=8))
    assert m.accept_token(0, prefetch=True)
    _drain()
    assert m.num_tokens == 1 and not m.is_accepting()  # reads never raise; the error waits
    with pytest.raises(LimitError, match="max_items_per_set"):
        m.accept_token(0)
    with pytest.raises(MatcherError, match="error state"):
        m.accept_token(0)
    m.rollback(0)  # clears the error, keeps the state
    assert m.num_tokens == 1 and m.is_accepting()
    assert m.accept_token(0) and m.num_tokens == 2
