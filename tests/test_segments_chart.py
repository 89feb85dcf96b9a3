"""Counts in the engine's chart (step (b)(2) of the counters plan, docs/design.md §7, "Counts in
the engine's chart"): a grammar made from the segment form's tables (``segments.c_tables``) keeps
a count beside every item of its matchers' charts (csrc/earley.c), and its matchers accept and
reject by the counts.  Along test_segments' hypothesis walks the engine's viable bytes,
acceptance and every item's count equal the private counted chart's (csrc/segments.c), the
model's (tests/segment_model.py) and, for bytes and acceptance, the reference's (which unrolls
every count); forks read ahead, rollbacks give the same sets back; ``_core.counted_scans()``
proves the engine's counted scan ran.  Masks: tests/test_segment_masks.py (step (c)).
"""

from __future__ import annotations

import dataclasses
import json
import random

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import cfgmask
from cfgmask import _core, ir
from cfgmask.compile.compiled import MatcherLimits, _settings
from cfgmask.compile.segments import MIN_HI, SegmentForm, SegTables, c_tables, segment_form
from cfgmask.compile.strategy import DEFAULT
from cfgmask.errors import MatcherError

from .helpers import alt, chars, grammar, lit, ref, rep, seq
from .reference import ReferenceMatcher
from .segment_model import SegmentModel
from .test_segments import CONTEXTS, ON, _grammar, _nested, _samples, _string, bounds, units

BYTES = cfgmask.Vocabulary.from_token_bytes([bytes([b]) for b in range(256)])


def _handle(tab: SegTables) -> _core.GrammarHandle:
    return _core.GrammarHandle(
        tab, BYTES._handle(), list(BYTES.stop_ids), _settings(MatcherLimits(), DEFAULT)
    )


def _names(
    tab: SegTables, items: list[tuple[int, int, int | None]]
) -> dict[tuple[str, int, int], int | None]:
    """A chart's last set as the model names its items: (rule, state, origin) -> k."""
    where = {g: (name, s) for name, ids in tab.states.items() for s, g in enumerate(ids)}
    return {(*where[s], o): k for s, o, k in items}


def _viable(m: _core.MatcherHandle) -> set[int]:
    return {b for b in range(256) if m.accept_bytes(bytes([b]), dry_run=True)}


def _forced(chart: _core.SegChart, cap: int) -> bytes:
    """The bytes a jump forward may write: while not accepting, the one viable byte."""
    chart = chart.fork()
    out = b""
    while len(out) < cap and not chart.accepting():
        v = chart.viable()
        if len(v) != 1:
            break
        (b,) = v
        assert chart.step(b)
        out += bytes([b])
    return out


def _walk(
    g: ir.Grammar, form: SegmentForm, seed: int, words: list[ir.Expr], n_walks: int = 3, length: int = 60
) -> tuple[int, int, int]:
    """Random walks of viable bytes, mostly words of ``words``, one token (one byte) a step: at
    every position the engine's viable bytes, acceptance and counts equal the private chart's
    and the model's, bytes and acceptance the reference's, and a jump forward the bytes the
    private chart forces.  Forks of the engine read ahead and must agree with the private
    chart's forks; rollbacks of a few tokens give the same sets back.  Returns positions
    checked, steps that scanned a segment item with an edge on its byte, and the engine's
    counted scans over the walks (the private chart steps too: its scans are subtracted)."""
    tab = c_tables(form)
    gh = _handle(tab)
    priv = _core.SegTablesHandle(tab)
    refm = ReferenceMatcher(g)
    rng = random.Random(seed)
    checked = counted = engine_scans = 0
    for _ in range(n_walks):
        m = _core.MatcherHandle(gh)
        model = SegmentModel(form)
        chart = priv.chart()
        ref_chart = refm._parse(b"")
        prefix = b""
        pending = b""
        snapshots: list[dict[tuple[str, int, int], int | None]] = []
        for _ in range(length):
            viable = _viable(m)
            assert viable == chart.viable() == model.viable(), f"prefix {prefix!r}"
            expected = {b for b in range(256) if refm._viable_after(ref_chart, bytes([b]))}
            assert viable == expected, f"prefix {prefix!r}: reference"
            assert m.is_accepting() == chart.accepting() == model.accepting() == refm._is_final(ref_chart)
            counts = _names(tab, m.seg_items())
            assert counts == _names(tab, chart.items()) == dict(model.chart[-1]), f"prefix {prefix!r}: counts"
            assert m.jump_forward(8) == _forced(chart, 8), f"prefix {prefix!r}: jump forward"
            assert m.num_tokens() == len(prefix)
            checked += 1
            if not viable:
                assert not m.accept_bytes(bytes([rng.randrange(256)]))
                assert m.num_tokens() == len(prefix)
                break
            if not pending:
                pending = _samples(rng.choice(words), rng) if rng.random() < 0.8 else b""
            b = pending[0] if pending and pending[0] in viable else rng.choice(sorted(viable))
            pending = pending[1:] if pending and pending[0] == b else b""
            if rng.random() < 0.15:  # a fork reads ahead as the private chart's fork does
                fork, pfork = m.fork(), chart.fork()
                for _ in range(rng.randrange(1, 6)):
                    v = _viable(fork)
                    assert v == pfork.viable()
                    if not v:
                        break
                    x = rng.choice(sorted(v))
                    assert fork.accept_token(x) and pfork.step(x)
                    assert _names(tab, fork.seg_items()) == _names(tab, pfork.items())
                assert _names(tab, m.seg_items()) == counts  # the original is untouched
            bad = rng.randrange(256)
            if bad not in viable:
                assert not m.accept_token(bad) and m.num_tokens() == len(prefix)
            cls = tab.byte_class[b]
            counted += any(k is not None and tab.trans[s, cls] >= 0 for s, _, k in chart.items())
            before = _core.counted_scans()
            assert m.accept_token(b)
            engine_scans += _core.counted_scans() - before
            assert model.step(b) and chart.step(b)
            prefix += bytes([b])
            ref_chart.append(refm._step(ref_chart, b))
            snapshots.append(_names(tab, m.seg_items()))
            if rng.random() < 0.1 and len(prefix) >= 2:  # roll back a few tokens and read them again
                n = rng.randrange(1, min(4, len(prefix)) + 1)
                m.rollback(n)
                assert m.num_tokens() == len(prefix) - n
                if len(prefix) > n:
                    assert _names(tab, m.seg_items()) == snapshots[len(prefix) - n - 1]
                for x in prefix[len(prefix) - n :]:
                    assert m.accept_token(x)
                assert _names(tab, m.seg_items()) == snapshots[-1]
    return checked, counted, engine_scans


@given(units(), bounds(), st.sampled_from(CONTEXTS), units(), bounds(), st.integers(0, 2**16))
def test_engine_chart_equals_private_chart_model_and_reference(
    x: ir.Expr, b1: tuple[int, int], context: str, y: ir.Expr, b2: tuple[int, int], seed: int
) -> None:
    g = _grammar(context, x, *b1, y, *b2)
    form = segment_form(g, ON)
    checked, counted, engine_scans = _walk(g, form, seed, [x, y])
    assert checked > 0
    assert engine_scans >= counted  # the engine's counted scan ran
    if not form.segments:
        assert engine_scans == 0


@given(units(), bounds(), st.integers(0, 2**16))
def test_engine_counts_reach_both_bounds(x: ir.Expr, b: tuple[int, int], seed: int) -> None:
    """Units only, up to hi: the engine's count at the head at every position, the close offered
    exactly on [lo, hi], and one unit past hi refused."""
    lo, hi = b
    g = grammar(root=_string(x, lo, hi))
    form = segment_form(g, ON)
    if hi < MIN_HI:
        assert not form.segments
        return
    (seg,) = form.segments
    tab = c_tables(form)
    head = tab.states[seg.rule][seg.head]
    m = _core.MatcherHandle(_handle(tab))
    rng = random.Random(seed)
    assert m.accept_bytes(b'"')
    for k in range(hi + 1):
        assert [c for s, _, c in m.seg_items() if s == head] == [k]
        assert m.accept_bytes(b'"', dry_run=True) == (lo <= k)
        word = _samples(x, rng)
        if k == hi:
            assert not m.accept_bytes(word)
            break
        assert m.accept_bytes(word)
    assert m.accept_bytes(b'"') and m.is_accepting()


def test_json_schema_documents_through_the_engine() -> None:
    schema = {
        "type": "object",
        "properties": {
            "inner": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
            "name": {"type": "string", "minLength": 2, "maxLength": 9},
            "tags": {"type": "array", "items": {"type": "string", "maxLength": 8}},
        },
        "required": ["inner", "name"],
    }
    g = cfgmask.Grammar.from_json_schema(json.dumps(schema)).ir
    form = segment_form(g, ON)
    assert {(2, 9), (0, 8)} <= {(s.lo, s.hi) for s in form.segments}
    gh = _handle(c_tables(form))
    refm = ReferenceMatcher(g)
    docs = [
        b'{"inner": {"n": 1}, "name": "ab\\"c\\u001f\xc3\xa9", "tags": ["x", "", "12345678"]}',
        b'{"inner": {"n": 1}, "name": "a"}',  # under minLength
        b'{"inner": {"n": 1}, "name": "123456789"}',
        b'{"inner": {"n": 1}, "name": "1234567890"}',  # over maxLength
        b'{"inner": {"n": 1}, "name": "ab", "tags": ["123456789"]}',
    ]
    accepted = 0
    for doc in docs:
        m = _core.MatcherHandle(gh)
        ok = m.accept_bytes(doc) and m.is_accepting()
        model = SegmentModel(form)
        assert ok == (model.feed(doc) and model.accepting()) == refm.accepts(doc), doc
        accepted += ok
    assert accepted == 2
    words: list[ir.Expr] = [
        lit("a"),
        lit('\\"'),
        lit("\u00e9"),
        lit('{"n":1}'),
        lit('","'),
        lit('"tags":["'),
        lit("xyz"),
    ]
    hits = _core.seg_memo_hits()
    checked, counted, engine_scans = _walk(g, form, 5, words, n_walks=2, length=100)
    assert checked > 0 and counted > 0 and engine_scans >= counted
    assert _core.seg_memo_hits() > hits  # closures came from the memo, and the counts still agree


@given(units(), bounds(), st.integers(0, 2**16))
def test_a_called_rule_ending_in_a_segment(x: ir.Expr, b: tuple[int, int], seed: int) -> None:
    """The head accepts (the segment ends a called rule), so a closure reads k >= lo: the same
    kernel before and after lo closes differently, and the closure memo must tell them apart
    (its key holds the bit).  Walks against the private chart, the model and the reference, and
    the memo answered some of the closures."""
    lo, hi = b
    v = alt(seq(lit("<"), rep(x, lo, hi)), seq(lit("["), ref("v"), lit("]")))
    g = grammar(
        root=seq(lit("("), ref("v"), lit(")"), rep(seq(lit(","), lit("("), ref("v"), lit(")")), 0, 1)), v=v
    )
    form = segment_form(g, ON)
    if hi < MIN_HI:
        assert not form.segments
        return
    assert form.segments
    hits = _core.seg_memo_hits()
    words: list[ir.Expr] = [x, x, x, lit(")"), lit(",(<"), lit("[<")]
    checked, counted, engine_scans = _walk(g, form, seed, words, n_walks=2, length=40)
    assert checked > 0 and engine_scans >= counted
    assert _core.seg_memo_hits() > hits


def test_masks_are_made_but_warm_and_entries_refused() -> None:
    """Masks read the counts now (tests/test_segment_masks.py checks them); warm and the entry
    copies, keyed by state alone, still refuse a grammar with segments."""
    g = grammar(root=_string(chars("az"), 1, 12))
    form = segment_form(g, ON)
    assert form.segments
    gh = _handle(c_tables(form))
    m = _core.MatcherHandle(gh)
    row = np.zeros(BYTES.size // 32 + 1, dtype=np.int32)
    assert gh.segments
    assert m.accept_bytes(b'"ab')
    m.fill_mask(row)
    assert row.any()
    with pytest.raises(MatcherError, match="counted segments"):
        gh.warm()
    with pytest.raises(MatcherError, match="counted segments"):
        gh.entry(0)


def test_no_segments_is_a_plain_grammar() -> None:
    """A segment form without segments makes a grammar whose masks are made as ever (equal to
    the unrolled compile's along a walk), and whose scans are never counted."""
    g = grammar(root=seq(lit("["), rep(chars("az"), 0, 3), lit("]")))
    form = segment_form(g, ON)
    assert not form.segments
    gh = _handle(c_tables(form))
    assert not gh.segments
    m = _core.MatcherHandle(gh)
    plain = cfgmask.Matcher(cfgmask.compile(g, BYTES))
    before = _core.counted_scans()
    for b in b"[ab]":
        row = np.zeros(BYTES.size // 32 + 1, dtype=np.int32)
        m.fill_mask(row)
        want = np.zeros_like(row)
        plain.fill_bitmask(want)
        assert (row == want).all()
        assert m.accept_token(b) and plain.accept_token(b)
    assert m.is_accepting() and _core.counted_scans() == before
    assert all(k is None for _, _, k in m.seg_items())


def test_the_clash_is_caught_in_the_engine() -> None:
    """The forms the call tests refuse (call_test="none") give one item two counts: the engine's
    chart says so (a sticky error) where the private chart does."""
    g = grammar(
        root=seq(ref("p"), rep(lit("a"), 0, 10), lit("!")),
        p=alt(rep(lit("a")), seq(lit("("), ref("p"), lit(")"))),
    )
    loose = c_tables(segment_form(g, ON, call_test="none"))
    m = _core.MatcherHandle(_handle(loose))
    with pytest.raises(MatcherError):
        m.accept_bytes(b"aaa")
    assert m.error() != 0
    num = grammar(root=seq(ref("v"), rep(chars("09"), 0, 10), lit("!")), v=_nested(rep(chars("09"), 1)))
    m = _core.MatcherHandle(_handle(c_tables(segment_form(num, ON, call_test="none"))))
    with pytest.raises(MatcherError):
        m.accept_bytes(b"123")


def test_hostile_segment_tables_are_refused_by_the_grammar() -> None:
    """The core's checks of the tags guard the grammar too: a BACK edge onto a state that is not
    its head is refused (CM_ERR_ARG), never run."""
    form = segment_form(grammar(root=_string(alt(chars("az"), seq(lit("\\"), chars("n"))), 0, 9)), ON)
    tab = c_tables(form)
    flags = np.array(tab.edge_flags)
    s, c = next((s, c) for s, c in zip(*np.nonzero(flags), strict=True) if flags[s, c] & 2)
    flags[s, c] = 1  # the unit's last edge now claims to enter it
    with pytest.raises(MatcherError):
        _handle(dataclasses.replace(tab, edge_flags=flags))
