"""The cut of counted segments (csrc/segcut.c; step (c) of the counters plan, docs/design.md §7,
"The cut of counted segments"): for a segment of the segment form and a vocabulary, every
segment state's walk of every token (dead, stays on the head or mid-unit with its count, or
leaves by an EXIT edge after its count, with the exit's byte offset and target) against a
reference that walks the token's bytes through cfgmask/compile/segments.py's form; the cut of
(state, need, budget) -- the stayers counting more than budget, the leavers counting outside
[need, budget] -- as a kill list and ANDed into a row, against the reference's filter; the
vocabulary's store keyed by the unit's form (a second grammar with the same unit must hit:
``_core.segcut_store_hits()``); hostile inputs give errors.
"""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cfgmask
from cfgmask import _core, ir
from cfgmask.compile.segments import BACK, EXIT, SegmentForm, SegTables, c_tables, segment_form

from .helpers import alt, chars, grammar, lit, rep, seq
from .test_segments import CONTEXTS, ON, _grammar, _samples, bounds, units

DEAD, STAY, MID, LEAVE = (
    _core.SegCutHandle.DEAD,
    _core.SegCutHandle.STAY,
    _core.SegCutHandle.MID,
    _core.SegCutHandle.EXIT,
)
SMALL = _core.SegCutHandle.SMALL
U32 = 0xFFFFFFFF

Answer = tuple[int, int, int | None, int | None]


def _vocab_handle(tokens: list[bytes], special: set[int] | None = None) -> _core.VocabHandle:
    lengths = np.array([len(t) for t in tokens], np.uint64)
    offsets = np.zeros(len(tokens) + 1, np.uint64)
    np.cumsum(lengths, out=offsets[1:])
    in_trie = np.ones(len(tokens), np.uint8)
    for i in special or ():
        in_trie[i] = 0
    return _core.VocabHandle(b"".join(tokens), offsets, in_trie)


def _reference(
    form: SegmentForm, tab: SegTables, seg: int, state: int, data: bytes, in_trie: bool = True
) -> Answer:
    """The walk of ``data`` from global state ``state`` of segment ``seg``, edge by edge of the
    Python form: (kind, count, offset, target) as SegCutHandle.answer gives them."""
    g = form.segments[seg]
    rule = form.rules[g.rule]
    local = tab.states[g.rule].index(state)
    if not in_trie or not data:
        return DEAD, 0, None, None
    s, c = local, 0
    for i, b in enumerate(data):
        edge = next(((t, f) for lo, hi, t, f in rule.edges[s] if lo <= b <= hi), None)
        if edge is None:
            return DEAD, 0, None, None
        t, f = edge
        if f & EXIT:
            return LEAVE, c, i, tab.states[g.rule][t]
        if f & BACK:
            c += 1
        s = t
    return (STAY, c, None, None) if s == g.head else (MID, c + 1, None, None)


def _ref_kill(answers: list[Answer], need: int, budget: int) -> list[int]:
    out = []
    for t, (kind, c, _, _) in enumerate(answers):
        if kind in (STAY, MID) and c > budget:
            out.append(t)
        elif kind == LEAVE and not need <= c <= budget:
            out.append(t)
    return out


def _check_cut(
    cut: _core.SegCutHandle, state: int, answers: list[Answer], need: int, budget: int, rng: random.Random
) -> None:
    n = len(answers)
    want = _ref_kill(answers, need, budget)
    assert cut.kill(state, need, budget) == want, (state, need, budget)
    kept = sorted((t, a[2]) for t, a in enumerate(answers) if a[0] == LEAVE and need <= a[1] <= budget)
    got = cut.leavers(state, need, budget)
    assert sorted(got) == kept, (state, need, budget)
    assert [answers[t][1] for t, _ in got] == sorted(answers[t][1] for t, _ in got)  # by count
    nw = (n + 31) // 32
    for row in (np.full(nw, U32, np.uint32), np.array([rng.getrandbits(32) for _ in range(nw)], np.uint32)):
        expect = row.copy()
        for t in want:
            expect[t >> 5] &= np.uint32(~(1 << (t & 31)) & U32)
        cut.apply(state, need, budget, row)
        assert np.array_equal(row, expect), (state, need, budget)


def _pairs(rng: random.Random, top: int) -> list[tuple[int, int]]:
    """(need, budget) pairs: both sides of the small sets' threshold, beyond every count, a
    need over the budget, the largest values."""
    fixed = [(0, 0), (0, SMALL - 1), (0, SMALL), (1, SMALL + 1), (3, 2), (0, U32), (U32, U32), (U32, 0)]
    drawn = [(rng.randint(0, top + 2), rng.randint(0, top + 2)) for _ in range(8)]
    return fixed + drawn


def _tokens_for(x: ir.Expr, rng: random.Random, n: int) -> list[bytes]:
    """A small vocabulary: words of the unit run together, cut anywhere (mid-unit ends), with
    quotes and commas (exits), random bytes; duplicates and an empty token."""
    out: list[bytes] = [b"", b'"', b",", b'""']
    for _ in range(n):
        words = b"".join(_samples(x, rng) for _ in range(rng.randint(0, 24)))
        r = rng.random()
        if r < 0.3:
            words = words[: rng.randint(0, len(words))]
        elif r < 0.6:
            words += rng.choice([b'"', b'",', b'"}', b",", b":"]) + bytes(
                rng.getrandbits(8) for _ in range(rng.randint(0, 3))
            )
        elif r < 0.7:
            words = bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 4))) + words
        out.append(words)
    out.append(out[-1])  # a duplicate
    return out


def _check_form(form: SegmentForm, tokens: list[bytes], special: set[int], rng: random.Random) -> int:
    """Every segment, state and token against the reference, and the cuts; the checks made."""
    tab = c_tables(form)
    handle = _core.SegTablesHandle(tab)
    vh = _vocab_handle(tokens, special)
    checked = 0
    for seg in range(len(form.segments)):
        cut = _core.SegCutHandle(handle, seg, vh)
        g = form.segments[seg]
        states = cut.states()
        assert states[0] == tab.states[g.rule][g.head]
        assert sorted(states) == sorted(
            tab.states[g.rule][s] for s in range(len(form.rules[g.rule])) if form.rules[g.rule].seg[s] == seg
        )
        for s in states:
            answers = [_reference(form, tab, seg, s, tok, t not in special) for t, tok in enumerate(tokens)]
            got = [cut.answer(s, t) for t in range(len(tokens))]
            assert got == answers, (seg, s)
            kinds, counts = cut.answers(s)
            assert [int(k) for k in kinds] == [a[0] for a in answers]
            assert [int(c) for c in counts] == [a[1] for a in answers]
            top = max((a[1] for a in answers), default=0)
            for need, budget in _pairs(rng, top):
                _check_cut(cut, s, answers, need, budget, rng)
            checked += len(tokens)
    return checked


@settings(max_examples=40, deadline=None)
@given(units(), bounds(), st.sampled_from(CONTEXTS), units(), bounds(), st.integers(0, 2**16))
def test_walks_and_cuts_equal_the_reference(
    x: ir.Expr, b: tuple[int, int], context: str, y: ir.Expr, b2: tuple[int, int], seed: int
) -> None:
    g = _grammar(context, x, b[0], b[1], y, b2[0], b2[1])
    form = segment_form(g, ON)
    if not form.segments:
        return
    rng = random.Random(seed)
    tokens = _tokens_for(x, rng, 60) + _tokens_for(y, rng, 20)
    special = {rng.randrange(len(tokens))}
    assert _check_form(form, tokens, special, rng) > 0


def test_long_tokens_count_past_a_byte() -> None:
    """Counts of 255 and more (the stored byte saturates; the exact count is kept aside), at
    the head, mid-unit and leaving."""
    g = grammar(root=seq(lit('"'), rep(alt(chars("a"), lit("bc")), 0, 1000), lit('"')))
    form = segment_form(g, ON)
    assert form.segments
    tokens = [
        b"a" * 254,
        b"a" * 255,
        b"a" * 300,
        b"a" * 400 + b"b",
        b"a" * 299 + b'"',
        b"bc" * 200,
        b"a" * 256 + b'"x',
    ]
    rng = random.Random(1)
    assert _check_form(form, tokens, set(), rng) > 0
    tab = c_tables(form)
    cut = _core.SegCutHandle(_core.SegTablesHandle(tab), 0, _vocab_handle(tokens))
    head = cut.states()[0]
    assert [cut.answer(head, t)[:2] for t in range(len(tokens))] == [
        (STAY, 254),
        (STAY, 255),
        (STAY, 300),
        (MID, 401),
        (LEAVE, 299),
        (STAY, 200),
        (LEAVE, 256),
    ]
    assert cut.kill(head, 0, 299) == [2, 3]
    assert cut.kill(head, 300, 400) == [3, 4, 6]


def _json_string_form(lo: int, hi: int) -> tuple[SegmentForm, int]:
    schema = {
        "type": "object",
        "properties": {"s": {"type": "string", "minLength": lo, "maxLength": hi}},
        "required": ["s"],
    }
    form = segment_form(cfgmask.Grammar.from_json_schema(json.dumps(schema)).ir, ON)
    seg = next(i for i, g in enumerate(form.segments) if (g.lo, g.hi) == (lo, hi))
    return form, seg


@pytest.fixture(scope="module")
def llama3() -> cfgmask.Vocabulary:
    return cfgmask.Vocabulary.llama3()


def test_json_string_unit_with_llama3(llama3: cfgmask.Vocabulary) -> None:
    """The JSON string character with Llama-3: every state on a sample of tokens (and every
    token counting SMALL or more, and every leaver), every token at the head; the cuts of the
    head against the reference's filter over the whole vocabulary."""
    form, seg = _json_string_form(2, 40)
    tab = c_tables(form)
    cut = _core.SegCutHandle(_core.SegTablesHandle(tab), seg, llama3._handle())
    tokens = llama3.tokens
    special = set(llama3.special_ids)
    rng = random.Random(7)
    states = cut.states()
    assert len(states) > 5  # the escapes and the UTF-8 characters' continuation states
    for s in states:
        kinds, counts = cut.answers(s)
        sample = set(rng.sample(range(len(tokens)), 1500))
        sample |= {t for t in range(len(tokens)) if kinds[t] == LEAVE or counts[t] >= SMALL}
        if s == states[0]:
            sample = set(range(len(tokens)))
        answers = {t: _reference(form, tab, seg, s, tokens[t], t not in special) for t in sorted(sample)}
        for t, a in answers.items():
            assert cut.answer(s, t) == a, (s, t, tokens[t])
        if s != states[0]:  # the cuts of a state against the filter of its (sampled, checked) answers
            own = [(int(k), int(c), None, None) for k, c in zip(kinds, counts, strict=True)]
            for need, budget in [(0, 0), (1, 3), (0, SMALL), (5, U32)]:
                assert cut.kill(s, need, budget) == _ref_kill(own, need, budget), (s, need, budget)
            continue
        full = [answers[t] for t in range(len(tokens))]
        assert max(a[1] for a in full) >= 100  # long tokens stay inside a string
        assert sum(a[0] == LEAVE for a in full) > 100
        for need, budget in _pairs(rng, 130) + [(2, 40), (0, 16), (17, 17), (0, 128), (1, 127)]:
            _check_cut(cut, s, full, need, budget, rng)


def test_a_second_grammar_hits_the_vocabularys_tables(llama3: cfgmask.Vocabulary) -> None:
    """The string character of two schemas (other bounds, other state numbers) is one form:
    the second cut hits the store and makes no table, and its answers are the first's."""
    vh = llama3._handle()
    form1, seg1 = _json_string_form(3, 50)
    tab1 = c_tables(form1)
    cut1 = _core.SegCutHandle(_core.SegTablesHandle(tab1), seg1, vh)
    cut1.build_all()
    hits, builds = _core.segcut_store_hits(), _core.segcut_state_builds()
    schema = {"type": "array", "items": {"type": "string", "minLength": 1, "maxLength": 90}}
    form2 = segment_form(cfgmask.Grammar.from_json_schema(json.dumps(schema)).ir, ON)
    seg2 = next(i for i, g in enumerate(form2.segments) if (g.lo, g.hi) == (1, 90))
    tab2 = c_tables(form2)
    cut2 = _core.SegCutHandle(_core.SegTablesHandle(tab2), seg2, vh)
    assert _core.segcut_store_hits() == hits + 1
    cut2.build_all()
    assert _core.segcut_state_builds() == builds
    assert cut2.bytes == cut1.bytes
    for s1, s2 in zip(cut1.states(), cut2.states(), strict=True):
        k1, c1 = cut1.answers(s1)
        k2, c2 = cut2.answers(s2)
        assert np.array_equal(k1, k2) and np.array_equal(c1, c2)
    # a token that leaves the head lands on each grammar's own closing state
    t = llama3.tokens.index(b'",')
    a1, a2 = cut1.answer(cut1.states()[0], t), cut2.answer(cut2.states()[0], t)
    assert a1[:3] == a2[:3] == (LEAVE, 0, 0)
    assert a1[3] == _reference(form1, tab1, seg1, cut1.states()[0], b'",')[3]
    assert a2[3] == _reference(form2, tab2, seg2, cut2.states()[0], b'",')[3]


def test_another_unit_is_another_form() -> None:
    """A unit of other bytes has tables of its own (no hit), in the same vocabulary."""
    tokens = [b"ab", b"a", b'x"', b"abab"]
    vh = _vocab_handle(tokens)
    f1 = segment_form(grammar(root=seq(lit('"'), rep(chars("a", "b"), 0, 20), lit('"'))), ON)
    f2 = segment_form(grammar(root=seq(lit('"'), rep(chars("a", "b", "x"), 0, 20), lit('"'))), ON)
    c1 = _core.SegCutHandle(_core.SegTablesHandle(c_tables(f1)), 0, vh)
    hits = _core.segcut_store_hits()
    c2 = _core.SegCutHandle(_core.SegTablesHandle(c_tables(f2)), 0, vh)
    assert _core.segcut_store_hits() == hits
    h1, h2 = c1.states()[0], c2.states()[0]
    assert c1.answer(h1, 2)[0] == DEAD and c2.answer(h2, 2)[:3] == (LEAVE, 1, 1)
    c3 = _core.SegCutHandle(_core.SegTablesHandle(c_tables(f1)), 0, vh)
    assert _core.segcut_store_hits() == hits + 1
    assert c3.answer(c3.states()[0], 3) == (STAY, 4, None, None)


def test_hostile_inputs_are_errors() -> None:
    form = segment_form(grammar(root=seq(lit('"'), rep(alt(chars("a"), lit("bc")), 0, 20), lit('"'))), ON)
    tab = c_tables(form)
    handle = _core.SegTablesHandle(tab)
    tokens = [b"a", b"bc", b'"', b"b"]
    vh = _vocab_handle(tokens)
    with pytest.raises(ValueError):
        _core.SegCutHandle(handle, len(form.segments), vh)
    with pytest.raises(ValueError):
        _core.SegCutHandle(handle, 2**32 - 1, vh)
    with pytest.raises(OverflowError):
        _core.SegCutHandle(handle, -1, vh)
    cut = _core.SegCutHandle(handle, 0, vh)
    head = cut.states()[0]
    outside = next(s for s in range(len(tab.accepting)) if s not in cut.states())
    for s in (outside, len(tab.accepting), 2**32 - 1):
        with pytest.raises(ValueError):
            cut.answer(s, 0)
        with pytest.raises(ValueError):
            cut.kill(s, 0, 1)
        with pytest.raises(ValueError):
            cut.apply(s, 0, 1, np.zeros(1, np.uint32))
        with pytest.raises(ValueError):
            cut.answers(s)
    with pytest.raises(ValueError):
        cut.answer(head, len(tokens))
    with pytest.raises(ValueError):
        cut.answer(head, 2**32 - 1)
    for words in (0, 2, 100):
        with pytest.raises(ValueError):
            cut.apply(head, 0, 1, np.zeros(words, np.uint32))
    for need, budget in ((U32, U32), (0, U32), (U32, 0), (2**31, 2**31 - 1)):
        row = np.full(1, U32, np.uint32)
        cut.apply(head, need, budget, row)
        want = _ref_kill([_reference(form, tab, 0, head, t) for t in tokens], need, budget)
        assert cut.kill(head, need, budget) == want
        assert [t for t in range(len(tokens)) if not row[0] >> t & 1] == want
    with pytest.raises(OverflowError):
        cut.kill(head, -1, 0)
    with pytest.raises(OverflowError):
        cut.kill(head, 0, 2**32)
