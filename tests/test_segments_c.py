"""The segment form in C (csrc/segments.c; step (b) of the counters plan, docs/design.md §7):
its tables built from the Python form (``segments.c_tables``), validated by the core (hostile
tables give an error, never undefined behaviour), and the private byte-level chart that keeps a
count beside each item, against tests/segment_model.py and the reference matcher (which unrolls
every count itself) along random walks; ``_core.counted_scans()`` proves the counted path ran.
"""

from __future__ import annotations

import dataclasses
import json
import random
from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import cfgmask
from cfgmask import _core, ir
from cfgmask.compile.segments import BACK, EXIT, INTO, MIN_HI, SegmentForm, SegTables, c_tables, segment_form
from cfgmask.errors import MatcherError

from .helpers import alt, chars, grammar, lit, ref, rep, seq
from .reference import ReferenceMatcher
from .segment_model import CountClash, SegmentModel
from .test_segments import CONTEXTS, ON, _grammar, _nested, _samples, _string, bounds, units

NONE = 0xFFFFFFFF


def _c_counts(tab: SegTables, chart: _core.SegChart) -> dict[tuple[str, int, int], int | None]:
    """The C chart's last set as the model names its items: (rule, state, origin) -> k."""
    where = {g: (name, s) for name, ids in tab.states.items() for s, g in enumerate(ids)}
    return {(*where[s], o): k for s, o, k in chart.items()}


def _model_counts(model: SegmentModel) -> dict[tuple[str, int, int], int | None]:
    return dict(model.chart[-1])


def _walk_c(
    g: ir.Grammar, form: SegmentForm, seed: int, words: list[ir.Expr], n_walks: int = 3, length: int = 60
) -> tuple[int, int]:
    """Random walks of viable bytes, mostly words of ``words``: at every position the C chart's
    viable bytes, acceptance and every item's count equal the model's, and the viable bytes and
    acceptance the reference's; forks and rollbacks on the way give the same sets back.  The
    number of positions checked, and of steps that scanned a segment item with an edge on its
    byte (each must count in ``_core.counted_scans()``)."""
    tab = c_tables(form)
    handle = _core.SegTablesHandle(tab)
    refm = ReferenceMatcher(g)
    rng = random.Random(seed)
    checked = counted = 0
    for _ in range(n_walks):
        model = SegmentModel(form)
        chart = handle.chart()
        ref_chart = refm._parse(b"")
        prefix = b""
        pending = b""
        for _ in range(length):
            viable = chart.viable()
            assert viable == model.viable(), f"prefix {prefix!r}: {sorted(viable ^ model.viable())}"
            expected = {b for b in range(256) if refm._viable_after(ref_chart, bytes([b]))}
            assert viable == expected, f"prefix {prefix!r}: reference"
            assert chart.accepting() == model.accepting() == refm._is_final(ref_chart), f"prefix {prefix!r}"
            assert _c_counts(tab, chart) == _model_counts(model), f"prefix {prefix!r}: counts"
            assert len(chart) == len(prefix)
            checked += 1
            if not viable:
                assert not chart.step(rng.randrange(256))  # nothing read
                assert len(chart) == len(prefix)
                break
            if not pending:
                pending = _samples(rng.choice(words), rng) if rng.random() < 0.8 else b""
            b = pending[0] if pending and pending[0] in viable else rng.choice(sorted(viable))
            pending = pending[1:] if pending and pending[0] == b else b""
            if rng.random() < 0.1:  # a fork reads ahead; the chart rolls back what it read
                before = _c_counts(tab, chart)
                fork = chart.fork()
                extra = bytes(rng.choice(sorted(viable)) for _ in range(1))
                if chart.feed(extra):
                    assert fork.feed(extra) and _c_counts(tab, fork) == _c_counts(tab, chart)
                    chart.rollback(len(extra))
                assert _c_counts(tab, chart) == before
            bad = rng.randrange(256)
            if bad not in viable:
                assert not chart.step(bad) and len(chart) == len(prefix)
            cls = tab.byte_class[b]
            counted += any(k is not None and tab.trans[s, cls] >= 0 for s, _, k in chart.items())
            assert model.step(b)
            assert chart.step(b)
            prefix += bytes([b])
            ref_chart.append(refm._step(ref_chart, b))
    return checked, counted


# -- the chart with counts against the model and the reference


@given(units(), bounds(), st.sampled_from(CONTEXTS), units(), bounds(), st.integers(0, 2**16))
def test_c_chart_equals_model_and_reference(
    x: ir.Expr, b1: tuple[int, int], context: str, y: ir.Expr, b2: tuple[int, int], seed: int
) -> None:
    g = _grammar(context, x, *b1, y, *b2)
    form = segment_form(g, ON)
    before = _core.counted_scans()
    checked, counted = _walk_c(g, form, seed, [x, y])
    assert checked > 0
    assert _core.counted_scans() - before >= counted  # the counted path ran
    if not form.segments:
        assert _core.counted_scans() == before


@given(units(), bounds(), st.integers(0, 2**16))
def test_c_counts_reach_both_bounds(x: ir.Expr, b: tuple[int, int], seed: int) -> None:
    """Units only, up to hi: the C count at the head is read at every position, the close offered
    exactly on [lo, hi], and one unit past hi refused."""
    lo, hi = b
    g = _grammar("quoted", x, lo, hi, x, lo, hi)
    form = segment_form(g, ON)
    if hi < MIN_HI:
        assert not form.segments
        return
    (seg,) = form.segments
    tab = c_tables(form)
    chart = _core.SegTablesHandle(tab).chart()
    rng = random.Random(seed)
    assert chart.step(ord('"'))
    head = tab.states[seg.rule][seg.head]
    for n in range(hi + 1):
        assert [k for s, _, k in chart.items() if s == head] == [n]
        assert (ord('"') in chart.viable()) == (lo <= n <= hi)
        word = _samples(x, rng)
        if n == hi:
            fork = chart.fork()
            assert not fork.feed(word)
            break
        assert chart.feed(word)
    assert chart.step(ord('"')) and chart.accepting()


def test_json_schema_documents_through_the_c_chart() -> None:
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
    handle = _core.SegTablesHandle(c_tables(form))
    refm = ReferenceMatcher(g)
    docs = [
        b'{"inner": {"n": 1}, "name": "ab\\"c\\u001f\xc3\xa9", "tags": ["x", "", "12345678"]}',
        b'{"inner": {"n": 1}, "name": "a"}',  # under minLength
        b'{"inner": {"n": 1}, "name": "123456789"}',
        b'{"inner": {"n": 1}, "name": "1234567890"}',  # over maxLength
        b'{"inner": {"n": 1}, "name": "ab", "tags": ["123456789"]}',
    ]
    for doc in docs:
        chart = handle.chart()
        model = SegmentModel(form)
        c_ok = chart.feed(doc) and chart.accepting()
        assert c_ok == (model.feed(doc) and model.accepting()) == refm.accepts(doc), doc
    words = [lit("a"), lit('\\"'), lit("\u00e9"), lit('{"n":1}'), lit('","'), lit('"tags":["'), lit("xyz")]
    before = _core.counted_scans()
    checked, counted = _walk_c(g, form, 5, words, n_walks=2, length=100)
    assert checked > 0 and counted > 0 and _core.counted_scans() - before >= counted


def test_no_segments_runs_as_a_plain_chart() -> None:
    g = grammar(root=seq(lit("["), rep(chars("az"), 0, 3), lit("]")))
    form = segment_form(g, ON)
    assert not form.segments
    before = _core.counted_scans()
    _walk_c(g, form, 1, [lit("a")], n_walks=2, length=8)
    assert _core.counted_scans() == before  # no segment state: no counted scan


def test_the_clash_is_caught_in_c() -> None:
    """The forms the call tests refuse (call_test="none") give one item two counts; the C chart's
    check says so where the model's does."""
    g = grammar(
        root=seq(ref("p"), rep(lit("a"), 0, 10), lit("!")),
        p=alt(rep(lit("a")), seq(lit("("), ref("p"), lit(")"))),
    )
    loose = segment_form(g, ON, call_test="none")
    with pytest.raises(CountClash):
        SegmentModel(loose).feed(b"aaa")
    chart = _core.SegTablesHandle(c_tables(loose)).chart()
    with pytest.raises(MatcherError, match="another count"):
        chart.feed(b"aaa")
    num = grammar(root=seq(ref("v"), rep(chars("09"), 0, 10), lit("!")), v=_nested(rep(chars("09"), 1)))
    chart = _core.SegTablesHandle(c_tables(segment_form(num, ON, call_test="none"))).chart()
    with pytest.raises(MatcherError, match="another count"):
        chart.feed(b"123")


def test_token_terminals_are_not_flattened() -> None:
    form = segment_form(grammar(root=seq(lit("<"), ir.Token((3,)), _string(chars("az"), 0, 10))), ON)
    with pytest.raises(ValueError, match="not a byte-only rule"):
        c_tables(form)


# -- hostile tables


def _json_like() -> SegTables:
    """Two segments in one rule beside a call, multi-byte units: every kind of tag."""
    x = alt(chars(" !", "#[", (0x5D, 0x7F)), seq(lit("\\"), chars('"', "\\", "n")))
    g = grammar(
        root=seq(
            lit("{"), _string(x, 2, 9), lit(":"), ref("v"), lit(","), _string(chars("az"), 0, 12), lit("}")
        ),
        v=_nested(lit("0")),
    )
    form = segment_form(g, ON)
    assert len(form.segments) == 2
    return c_tables(form)


def _edit(tab: SegTables, **arrays: np.ndarray) -> SegTables:
    return dataclasses.replace(tab, **arrays) if arrays else tab


def _first(tab: SegTables, pred: Callable[[int, int, int, int], bool]) -> tuple[int, int]:
    """The first cell (state, class) with pred(state, class, target, flags)."""
    for s in range(len(tab.state_rule)):
        for c in range(tab.trans.shape[1]):
            if pred(s, c, int(tab.trans[s, c]), int(tab.edge_flags[s, c])):
                return s, c
    raise AssertionError("no such cell")


def _hostile() -> dict[str, Callable[[SegTables], SegTables]]:
    def with_cell(
        tab: SegTables, s: int, c: int, target: int | None = None, flags: int | None = None
    ) -> SegTables:
        trans, fl = tab.trans.copy(), tab.edge_flags.copy()
        if target is not None:
            trans[s, c] = target
        if flags is not None:
            fl[s, c] = flags
        return _edit(tab, trans=trans, edge_flags=fl)

    def arr(tab: SegTables, name: str, i: int, v: int) -> SegTables:
        a = getattr(tab, name).copy()
        a[i] = v
        return _edit(tab, **{name: a})

    def heads(tab: SegTables) -> set[int]:
        return {int(h) for h in tab.seg_head}

    def interior(tab: SegTables) -> int:
        return next(s for s in range(len(tab.state_seg)) if tab.state_seg[s] != NONE and s not in heads(tab))

    def outside(tab: SegTables) -> int:
        return next(s for s in range(len(tab.state_seg)) if tab.state_seg[s] == NONE)

    def edge_from(tab: SegTables, want: Callable[[int, int], bool]) -> tuple[int, int]:
        return _first(tab, lambda s, c, t, f: t >= 0 and want(s, f))

    cases: dict[str, Callable[[SegTables], SegTables]] = {
        "segment id out of range": lambda t: arr(t, "state_seg", interior(t), 7),
        "segment id on a state of another rule": lambda t: arr(t, "state_seg", int(t.rule_start[1]), 0),
        "lo over hi": lambda t: arr(t, "seg_lo", 0, int(t.seg_hi[0]) + 1),
        "hi at the sentinel": lambda t: _edit(
            t, seg_hi=np.array([NONE, t.seg_hi[1]], np.uint32), seg_lo=np.array([0, 0], np.uint32)
        ),
        "head out of range": lambda t: arr(t, "seg_head", 0, len(t.state_rule)),
        "head outside its segment": lambda t: arr(t, "seg_head", 0, int(t.seg_head[1])),
        "head in another rule": lambda t: arr(t, "seg_head", 0, int(t.rule_start[1])),
        "segment's rule out of range": lambda t: arr(t, "seg_rule", 0, 9),
        "flags where there is no edge": lambda t: with_cell(
            t, *_first(t, lambda s, c, tg, f: tg < 0), flags=INTO
        ),
        "unknown flag bit": lambda t: with_cell(t, *edge_from(t, lambda s, f: f == INTO), flags=INTO | 8),
        "flags outside a segment": lambda t: with_cell(
            t, *edge_from(t, lambda s, f: t.state_seg[s] == NONE), flags=INTO
        ),
        "a head's edge neither INTO nor EXIT": lambda t: with_cell(
            t, *edge_from(t, lambda s, f: s in heads(t) and f == INTO), flags=0
        ),
        "EXIT with INTO": lambda t: with_cell(t, *edge_from(t, lambda s, f: f == EXIT), flags=EXIT | INTO),
        "EXIT from an interior state": lambda t: with_cell(
            t, *edge_from(t, lambda s, f: f == BACK), flags=EXIT
        ),
        "INTO from an interior state": lambda t: with_cell(
            t, *edge_from(t, lambda s, f: f == BACK), flags=INTO | BACK
        ),
        "BACK onto another state": lambda t: with_cell(
            t, *edge_from(t, lambda s, f: f == BACK), target=interior(t)
        ),
        "an interior edge leaving its segment": lambda t: with_cell(
            t, *edge_from(t, lambda s, f: f == BACK), target=outside(t), flags=0
        ),
        "an outside edge onto an interior state": lambda t: with_cell(
            t, *edge_from(t, lambda s, f: t.state_seg[s] == NONE and t.state_rule[s] == 0), target=interior(t)
        ),
        "an EXIT onto an interior state": lambda t: with_cell(
            t, *edge_from(t, lambda s, f: f == EXIT), target=interior(t)
        ),
        "an edge into another rule": lambda t: with_cell(
            t, *edge_from(t, lambda s, f: f == EXIT), target=int(t.rule_start[1])
        ),
        "a target out of range": lambda t: with_cell(
            t, *edge_from(t, lambda s, f: f == EXIT), target=len(t.state_rule)
        ),
        "a target under -1": lambda t: with_cell(t, *edge_from(t, lambda s, f: f == EXIT), target=-2),
        "an accepting interior state": lambda t: arr(t, "accepting", interior(t), 1),
        "a call's target interior": lambda t: arr(t, "ref_target", 0, interior(t)),
        "a rule starting inside a unit": lambda t: _interior_start(t, interior(t)),
        "a call from a head": lambda t: _call_from(t, int(t.seg_head[0])),
        "a call from an interior state": lambda t: _call_from(t, interior(t)),
    }
    return cases


def _interior_start(tab: SegTables, s: int) -> SegTables:
    """Rule 0's start moved onto an interior state of its own segment (same rule)."""
    starts = tab.rule_start.copy()
    starts[0] = s
    return _edit(tab, rule_start=starts)


def _call_from(tab: SegTables, s: int) -> SegTables:
    """A call of rule 1 added to state s, landing on s."""
    off = tab.ref_off.astype(np.int64)
    at = int(off[s + 1])
    ref_rule = np.insert(tab.ref_rule, at, 1).astype(np.uint32)
    ref_target = np.insert(tab.ref_target, at, s).astype(np.uint32)
    off[s + 1 :] += 1
    return _edit(tab, ref_rule=ref_rule, ref_target=ref_target, ref_off=off.astype(np.uint32))


def test_the_tables_are_valid() -> None:
    tab = _json_like()
    assert {0, INTO, INTO | BACK, BACK, EXIT} <= {int(f) for f in np.unique(tab.edge_flags)}
    chart = _core.SegTablesHandle(tab).chart()
    assert chart.feed(b'{"ab\\n":[[0]],"xyz"}') and chart.accepting()
    assert chart.fork().feed(b"") and not _core.SegTablesHandle(tab).chart().feed(b'{"a":0,""}x')


@pytest.mark.parametrize("case", sorted(_hostile()))
def test_hostile_segment_tables_are_refused(case: str) -> None:
    tab = _json_like()
    bad = _hostile()[case](tab)
    assert bad is not tab
    with pytest.raises(MatcherError, match="invalid argument"):  # the core's CM_ERR_ARG
        _core.SegTablesHandle(bad)


def test_hostile_shapes_are_refused() -> None:
    tab = _json_like()
    for name, value in [
        ("state_seg", tab.state_seg[:-1]),
        ("edge_flags", tab.edge_flags[:, :-1].copy()),
        ("seg_hi", tab.seg_hi[:1]),
        ("seg_head", np.zeros(3, np.uint32)),
    ]:
        with pytest.raises(ValueError, match="inconsistent"):
            _core.SegTablesHandle(_edit(tab, **{name: value}))


def test_a_segment_table_with_token_edges_has_no_private_chart() -> None:
    tab = _json_like()
    s = int(tab.rule_start[1])  # a state outside every segment: a token edge onto itself
    tok_off = tab.tok_off.copy()
    tok_off[s + 1 :] += 1
    bad = _edit(
        tab,
        tok_off=tok_off,
        tok_set=np.zeros(1, np.uint32),
        tok_target=np.array([s], np.uint32),
        set_off=np.array([0, 1], np.uint32),
        set_ids=np.array([3], np.uint32),
        set_negated=np.zeros(1, np.uint8),
    )
    handle = _core.SegTablesHandle(bad)  # valid tables
    with pytest.raises(MatcherError):
        handle.chart()
    seg_state = int(tab.seg_head[0])
    tok_off = tab.tok_off.copy()
    tok_off[seg_state + 1 :] += 1
    inside = _edit(
        bad, tok_off=tok_off, tok_target=np.array([seg_state], np.uint32)
    )  # a token edge from a head
    with pytest.raises(MatcherError):
        _core.SegTablesHandle(inside)


def test_rollback_past_the_start_is_refused() -> None:
    chart = _core.SegTablesHandle(_json_like()).chart()
    assert chart.feed(b'{"ab')
    with pytest.raises(MatcherError):
        chart.rollback(5)
    chart.rollback(4)
    assert len(chart) == 0 and chart.viable() == {ord("{")}
