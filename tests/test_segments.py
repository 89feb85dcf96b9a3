"""Counted repetitions as segments (``CompileLimits.counters``, cfgmask/compile/segments.py) and
the model of the chart with counts (tests/segment_model.py), against the reference matcher,
which unrolls every count itself, and the C engine, which runs the unrolled tables.

Random prefix-code units (ASCII and multi-byte classes, JSON-style escapes, fixed words) with
bounds around the segment threshold, in the contexts a JSON string has; along random byte walks
the model's viable next bytes and acceptance equal the reference's and the C matcher's.
"""

from __future__ import annotations

import json
import pickle
import random
from collections.abc import Iterator

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import cfgmask
from cfgmask import ir
from cfgmask.compile import segments
from cfgmask.compile.limits import CompileLimits
from cfgmask.compile.segments import BACK, EXIT, INTO, MIN_HI, SegmentForm, segment_form

from .helpers import alt, byte_class, chars, grammar, lit, ref, rep, seq
from .reference import ReferenceMatcher
from .segment_model import CountClash, SegmentModel

ON = CompileLimits(counters=True)

# -- units: prefix codes (no word a proper prefix of another), none starting with '"' or ','


def _ascii_class() -> st.SearchStrategy[ir.Expr]:
    letters = "abcxyz019 -_."
    return st.lists(st.sampled_from(letters), min_size=1, max_size=5, unique=True).map(lambda cs: chars(*cs))


def _multibyte_class() -> st.SearchStrategy[ir.Expr]:
    return st.sampled_from(
        [
            chars((0x80, 0x7FF)),
            chars((0xE9, 0xE9), (0x4E00, 0x4E10)),
            chars("az", (0x1F600, 0x1F601)),
            chars(" !", "#+", "-[", (0x5D, 0x10FFFF)),  # a JSON character but its escapes
        ]
    )


_ESCAPES = [
    seq(lit("\\"), chars('"', "\\", "n", "t")),  # \" \\ \n \t
    seq(lit("\\u"), rep(byte_class((0x30, 0x39), (0x61, 0x66)), 4, 4)),  # \uXXXX
    seq(lit("\\"), alt(chars('"', "\\", "/"), seq(lit("u00"), byte_class((0x30, 0x37))))),
]


@st.composite
def units(draw: st.DrawFn) -> ir.Expr:
    parts = [draw(st.one_of(_ascii_class(), _multibyte_class()))]
    if draw(st.booleans()):
        parts.append(draw(st.sampled_from(_ESCAPES)))
    if draw(st.booleans()):
        # words whose first byte no class above holds (a tab, a bell)
        parts.append(draw(st.sampled_from([lit("\t\t"), lit("\x01>"), seq(lit("\x07"), chars("09"))])))
    return parts[0] if len(parts) == 1 else alt(*parts)


@st.composite
def bounds(draw: st.DrawFn) -> tuple[int, int]:
    hi = draw(st.sampled_from([MIN_HI - 2, MIN_HI, MIN_HI + 1, 12, 20]))
    lo = draw(st.sampled_from([0, 1, hi // 2, hi]))
    return lo, hi


def _string(x: ir.Expr, lo: int, hi: int) -> ir.Expr:
    return seq(lit('"'), rep(x, lo, hi), lit('"'))


CONTEXTS = ["quoted", "followed", "called", "two", "array", "after_call", "after_number"]


def _grammar(context: str, x: ir.Expr, lo: int, hi: int, y: ir.Expr, lo2: int, hi2: int) -> ir.Grammar:
    s = _string(x, lo, hi)
    if context == "quoted":
        return grammar(root=s)
    if context == "followed":  # more grammar after the string, in the same rule
        return grammar(root=seq(s, lit(":"), rep(chars("09"), 1), alt(lit("!"), lit(""))))
    if context == "called":  # inside a rule the start rule calls (center recursion: not inlined)
        return grammar(root=seq(lit("("), ref("v"), lit(")")), v=alt(s, seq(lit("["), ref("v"), lit("]"))))
    if context == "two":  # two segments in one rule
        return grammar(root=seq(lit("{"), s, lit(":"), _string(y, lo2, hi2), lit("}")))
    if context == "after_call":  # a call before it in its rule, ending where nothing extends it
        return grammar(root=seq(lit("("), ref("v"), lit(","), s, lit(")")), v=_nested(lit("0")))
    if context == "after_number":  # a call before it that a digit would extend, then a comma
        return grammar(root=seq(ref("v"), lit(","), s), v=_nested(rep(chars("09"), 1)))
    assert context == "array"  # an array of bounded strings re-entering the segment
    return grammar(root=seq(lit("["), rep(seq(s, rep(seq(lit(","), s))), 0, 1), lit("]")))


def _nested(leaf: ir.Expr) -> ir.Expr:
    """``v = leaf | "[" v "]"``: center recursion, so v stays a rule of its own (a call)."""
    return alt(leaf, seq(lit("["), ref("v"), lit("]")))


def _samples(x: ir.Expr, rng: random.Random) -> bytes:
    """One word of the unit (bytes), for walks that stay inside the segment."""
    if isinstance(x, ir.Alt):
        return _samples(rng.choice(x.items), rng)
    if isinstance(x, ir.Seq):
        return b"".join(_samples(i, rng) for i in x.items)
    if isinstance(x, ir.Repeat):
        return b"".join(_samples(x.item, rng) for _ in range(x.lo))
    if isinstance(x, ir.Literal):
        return x.data
    if isinstance(x, ir.ByteClass):
        a, b = rng.choice(x.ranges)
        return bytes([rng.randint(a, b)])
    assert isinstance(x, ir.CharClass)
    a, b = rng.choice(x.ranges)
    c = rng.randint(a, b)
    while 0xD800 <= c <= 0xDFFF:
        c = rng.randint(a, b)
    return chr(c).encode()


# -- the three recognizers in step


class Engine:
    """The C matcher read a byte at a time: viable next bytes and acceptance."""

    def __init__(self, g: ir.Grammar, limits: CompileLimits | None = None) -> None:
        vocab = cfgmask.Vocabulary.from_token_bytes([bytes([b]) for b in range(256)])
        self.compiled = cfgmask.compile(g, vocab, limits=limits)
        self.m = cfgmask.Matcher(self.compiled)

    def viable(self) -> set[int]:
        return {b for b in range(256) if self.m.can_accept_bytes(bytes([b]))}

    def step(self, b: int) -> None:
        assert self.m.accept_bytes(bytes([b]))


def _walks(
    g: ir.Grammar, form: SegmentForm, seed: int, units_: list[ir.Expr], n_walks: int = 3, length: int = 60
) -> Iterator[tuple[bytes, set[int], bool]]:
    """Random walks of viable bytes, mostly words of the units; at each position the model's
    viable bytes and acceptance, checked against the reference and the C engine."""
    refm = ReferenceMatcher(g)
    rng = random.Random(seed)
    for _ in range(n_walks):
        model = SegmentModel(form)
        engine = Engine(g)
        chart = refm._parse(b"")
        prefix = b""
        pending = b""
        for _ in range(length):
            viable = model.viable()
            expected = {b for b in range(256) if refm._viable_after(chart, bytes([b]))}
            assert viable == expected, f"prefix {prefix!r}: model {sorted(viable ^ expected)}"
            assert model.accepting() == refm._is_final(chart), f"prefix {prefix!r}"
            assert engine.viable() == viable, f"prefix {prefix!r}: C"
            assert engine.m.is_accepting() == model.accepting(), f"prefix {prefix!r}: C"
            yield prefix, viable, model.accepting()
            if not viable:
                break
            if not pending:
                pending = _samples(rng.choice(units_), rng) if rng.random() < 0.8 else b""
            b = pending[0] if pending and pending[0] in viable else rng.choice(sorted(viable))
            pending = pending[1:] if pending and pending[0] == b else b""
            assert model.step(b)
            engine.step(b)
            prefix += bytes([b])
            chart.append(refm._step(chart, b))


def _qualified(form: SegmentForm, lo: int, hi: int) -> bool:
    return any(s.lo == lo and s.hi == hi for s in form.segments)


@given(units(), bounds(), st.sampled_from(CONTEXTS), units(), bounds(), st.integers(0, 2**16))
def test_model_equals_reference_and_engine(
    x: ir.Expr, b1: tuple[int, int], context: str, y: ir.Expr, b2: tuple[int, int], seed: int
) -> None:
    g = _grammar(context, x, *b1, y, *b2)
    form = segment_form(g, ON)
    lo, hi = b1
    # a unit of these starts with neither '"' nor ',': every count from the threshold up qualifies
    assert _qualified(form, lo, hi) == (hi >= MIN_HI), form.refused
    for _ in _walks(g, form, seed, [x, y]):
        pass


@given(units(), bounds(), st.integers(0, 2**16))
def test_counts_reach_both_bounds(x: ir.Expr, b: tuple[int, int], seed: int) -> None:
    """Walks that read units only, up to hi: the model's count is read at every position and the
    close is offered exactly from lo to hi."""
    lo, hi = b
    g = _grammar("quoted", x, lo, hi, x, lo, hi)
    form = segment_form(g, ON)
    if hi < MIN_HI:
        assert not form.segments
        return
    (seg,) = form.segments
    rng = random.Random(seed)
    model = SegmentModel(form)
    refm = ReferenceMatcher(g)
    assert model.step(ord('"'))
    text = b'"'
    for n in range(hi + 1):
        (k,) = model.counts().values()
        assert k == n
        close_ok = ord('"') in model.viable()
        assert close_ok == (lo <= n <= hi) == refm.is_prefix(text + b'"')
        if n == hi:
            word = _samples(x, rng)
            assert not refm.is_prefix(text + word)
            assert not SegmentModel(form).feed(text + word)
            break
        word = _samples(x, rng)
        assert model.feed(word)
        text += word
    assert seg.head == 1


# -- what must not become a segment


def _refused(g: ir.Grammar) -> list[str]:
    form = segment_form(g, ON)
    assert not form.segments
    return [why for _, _, _, why in form.refused]


def test_not_a_prefix_code_stays_unrolled() -> None:
    assert _refused(grammar(root=_string(alt(lit("a"), lit("ab")), 0, 10))) == [
        "the unit is not a prefix code"
    ]


def test_entry_not_deterministic_stays_unrolled() -> None:
    g = grammar(root=seq(rep(chars("ab")), rep(lit("b"), 2, 9)))
    assert _refused(g) == ["the entry is not deterministic"]


def test_exit_not_deterministic_stays_unrolled() -> None:
    g = grammar(root=seq(lit("<"), rep(chars("ab"), 0, 10), lit("b>")))
    assert _refused(g) == ["the exit is not deterministic"]


def test_call_inside_stays_unrolled() -> None:
    g = grammar(root=_string(ref("v"), 0, 10), v=alt(lit("a"), seq(lit("("), ref("v"), lit(")"))))
    assert _refused(g) == []  # refused by the IR test: no placeholder was made
    tok = grammar(root=seq(lit("<"), rep(ir.Token((3,)), 0, 10), lit(">")))
    assert _refused(tok) == []


@pytest.mark.parametrize("lo, hi", [(0, MIN_HI - 1), (2, 3), (3, None)])
def test_small_or_unbounded_counts_stay_unrolled(lo: int, hi: int | None) -> None:
    assert _refused(grammar(root=_string(chars("az"), lo, hi))) == []


def test_nested_count_inside_a_segment_stays_unrolled() -> None:
    inner = rep(chars("09"), 2, 10)
    g = grammar(root=_string(seq(lit("<"), inner, lit(">")), 0, 9))
    form = segment_form(g, ON)
    assert [(s.lo, s.hi) for s in form.segments] == [(0, 9)]  # the outer one only
    for _ in _walks(g, form, 7, [seq(lit("<"), inner, lit(">"))], n_walks=2, length=40):
        pass


def test_call_before_the_count_breaks_the_claim() -> None:
    """k is a function of (state, origin, set) only if no call comes before the segment in its
    rule: a call ending at several positions would need several counts for one item."""
    g = grammar(
        root=seq(ref("p"), rep(lit("a"), 0, 10), lit("!")),
        p=alt(rep(lit("a")), seq(lit("("), ref("p"), lit(")"))),
    )
    assert _refused(g) == ["a call comes before it in its rule"]
    assert not segment_form(g, ON, call_test="strict").segments
    loose = segment_form(g, ON, call_test="none")
    assert len(loose.segments) == 1
    with pytest.raises(CountClash):
        SegmentModel(loose).feed(b"aaa")
    # the same with a number: "12" then digits, the call's end and the count's start overlap
    num = grammar(root=seq(ref("v"), rep(chars("09"), 0, 10), lit("!")), v=_nested(rep(chars("09"), 1)))
    assert _refused(num) == ["a call comes before it in its rule"]
    with pytest.raises(CountClash):
        SegmentModel(segment_form(num, ON, call_test="none")).feed(b"123")


@pytest.mark.parametrize("context", ["after_call", "after_number"])
def test_follow_test_takes_calls_that_cannot_go_on(context: str) -> None:
    """A call before the count whose completions cannot be extended by what follows it in the
    rule (a bracketed value; a number followed by a comma) keeps the count a segment under the
    "follow" test; the "strict" test refuses it."""
    x = chars("az")
    g = _grammar(context, x, 1, 12, x, 1, 12)
    assert [(s.lo, s.hi) for s in segment_form(g, ON).segments] == [(1, 12)]
    assert segment_form(g, ON, call_test="strict").refused[0][3] == "a call comes before it in its rule"
    for _ in _walks(g, segment_form(g, ON), 3, [x, lit("[0]"), lit("12")], n_walks=2, length=40):
        pass


def test_late_entry_test_takes_ambiguous_calls_before_a_quote() -> None:
    """Two calls from one state whose first bytes meet (the follow test fails), but the string
    is entered by '"', which its unit never reads: no item can enter while another is inside."""
    x = chars("az")
    g = grammar(
        root=seq(alt(ref("v"), ref("w")), lit(","), _string(x, 0, 10)),
        v=_nested(lit("0")),
        w=alt(lit("[1]"), seq(lit("("), ref("w"), lit(")"))),
    )
    assert [(s.lo, s.hi) for s in segment_form(g, ON).segments] == [(0, 10)]
    with pytest.MonkeyPatch.context() as mp:  # the late-entry test is what takes it
        mp.setattr(segments, "_late_entry_impossible", lambda *a: False)
        assert not segment_form(g, ON).segments
    for _ in _walks(g, segment_form(g, ON), 5, [x, lit("[[0]]"), lit("[1]")], n_walks=2, length=40):
        pass


def test_follow_test_takes_a_unit_that_reads_its_entry_byte() -> None:
    """Entered by ',' after a call that may end with 'a', and ',' and 'a' are units too (the
    late-entry test fails); the call (``v = a | [v]``) cannot go on past its end, so the path to
    the loop is unique."""
    x = chars("az", ",")
    g = grammar(root=seq(lit("("), ref("v"), lit(","), rep(x, 1, 12), lit(")")), v=_nested(lit("a")))
    assert [(s.lo, s.hi) for s in segment_form(g, ON).segments] == [(1, 12)]
    with pytest.MonkeyPatch.context() as mp:  # the follow test is what takes it
        mp.setattr(segments._Follow, "local", lambda *a: False)
        assert not segment_form(g, ON).segments
    for _ in _walks(g, segment_form(g, ON), 9, [x, lit("[a]")], n_walks=3, length=40):
        pass


def test_entry_by_a_byte_the_unit_reads_after_a_call_that_goes_on_is_refused() -> None:
    g = grammar(root=seq(ref("v"), lit("a"), rep(lit("a"), 0, 10), lit("!")), v=_nested(rep(lit("a"))))
    assert _refused(g) == ["a call comes before it in its rule"]
    with pytest.raises(CountClash):
        SegmentModel(segment_form(g, ON, call_test="none")).feed(b"aaaa")


# -- the tags


def test_tags_of_a_json_like_string() -> None:
    x = alt(chars(" !", "#[", (0x5D, 0x10FFFF)), seq(lit("\\"), chars('"', "\\", "n")))
    g = grammar(root=seq(lit("["), _string(x, 2, 9), rep(seq(lit(","), _string(x, 2, 9))), lit("]")))
    form = segment_form(g, ON)
    (seg,) = form.segments
    r = form.rules["root"]
    head = seg.head
    assert r.seg[head] == 0 and not r.accepting[head]
    flags = {(a, b): f for a, b, _, f in r.edges[head]}
    assert flags[(0x22, 0x22)] == EXIT  # the closing quote
    assert flags[(0x20, 0x21)] == INTO | BACK  # a one-byte character: straight back to the head
    assert flags[(0x5C, 0x5C)] == INTO  # the escape's first byte
    inside = [s for s in range(len(r)) if r.seg[s] == 0 and s != head]
    assert inside and all(not r.calls[s] and not r.accepting[s] for s in inside)
    assert all(f & BACK or r.seg[t] == 0 for s in inside for _, _, t, f in r.edges[s])
    assert all(t == head for s in inside for _, _, t, f in r.edges[s] if f & BACK)
    # the array re-enters the one segment from outside (after ',"'): k starts again at 0
    model = SegmentModel(form)
    assert model.feed(b'["ab\\n",')
    assert model.feed(b'"')
    assert list(model.counts().values()) == [0]


def _coloured_blocks(form: SegmentForm) -> None:
    """Moore minimisation of each rule's automaton, the first partition coloured by segment id,
    head and acceptance, edges compared with their flags: no state of a segment merges."""
    for r in form.rules.values():
        n = len(r)
        heads = {s.head for s in form.segments}
        block = [hash((r.seg[s], s in heads, r.accepting[s])) for s in range(n)]
        while True:
            sig = [
                (
                    block[s],
                    tuple((a, b, block[t], f) for a, b, t, f in r.edges[s]),
                    tuple((c, block[t]) for c, t in r.calls[s]),
                )
                for s in range(n)
            ]
            ids = {v: i for i, v in enumerate(dict.fromkeys(sig))}
            new = [ids[v] for v in sig]
            if len(set(new)) == len(set(block)):
                break
            block = new
        for s in range(n):
            if r.seg[s] >= 0:
                assert new.count(new[s]) == 1, f"segment state {s} merges"


@given(units(), bounds(), st.sampled_from(CONTEXTS), units(), bounds())
def test_minimisation_never_merges_segment_states(
    x: ir.Expr, b1: tuple[int, int], context: str, y: ir.Expr, b2: tuple[int, int]
) -> None:
    _coloured_blocks(segment_form(_grammar(context, x, *b1, y, *b2), ON))


# -- nothing reaches C


def test_counters_leave_the_c_tables_unrolled() -> None:
    g = grammar(
        root=seq(
            lit("["), _string(chars("az"), 1, 30), rep(seq(lit(","), _string(chars("az"), 1, 30))), lit("]")
        )
    )
    vocab = cfgmask.Vocabulary.from_token_bytes([b'"', b"a", b"ab", b'b"', b",", b"[", b"]", b'"a'])
    on = cfgmask.compile(g, vocab, limits=ON)
    off = cfgmask.compile(g, vocab)
    assert off.tables.segments is None
    assert on.tables.segments is not None and len(on.tables.segments.segments) == 1
    assert on.tables.segments.n_states < on.tables.n_states == off.tables.n_states
    for name in ("trans", "accepting", "byte_class", "ref_off", "ref_target", "state_rule"):
        assert np.array_equal(getattr(on.tables, name), getattr(off.tables, name)), name
    assert pickle.loads(pickle.dumps(on)).tables.segments.segments == on.tables.segments.segments
    # the C matcher runs the unrolled tables: the bound holds
    m = cfgmask.Matcher(on)
    assert m.accept_bytes(b'["' + b"a" * 30)
    assert not m.can_accept_bytes(b"a") and m.can_accept_bytes(b'"')


def test_off_is_the_unrolled_state_count() -> None:
    """The segment form's builder, with no count qualifying, counts the states C lays out."""
    g = grammar(root=_string(chars("az"), 1, 5))
    vocab = cfgmask.Vocabulary.from_token_bytes([b"a"])
    assert segment_form(g, ON).n_states == cfgmask.compile(g, vocab).tables.n_states


# -- JSON Schema


def test_json_schema_bounded_strings_become_segments() -> None:
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "minLength": 2, "maxLength": 40},
            "tags": {"type": "array", "items": {"type": "string", "maxLength": 12}},
            "code": {"type": "string", "minLength": 3, "maxLength": 3},
        },
        "required": ["name", "tags"],
    }
    g = cfgmask.Grammar.from_json_schema(json.dumps(schema))
    form = segment_form(g.ir, ON)
    got = {(s.lo, s.hi) for s in form.segments}
    assert {(2, 40), (0, 12)} <= got
    assert (3, 3) not in got  # under the threshold
    vocab = cfgmask.Vocabulary.from_token_bytes([b"a"])
    assert form.n_states < cfgmask.compile(g, vocab).tables.n_states
    doc = '{"name": "ab\\"c\\u001f\u00e9", "tags": ["x", ""], "code": "abc"}'.encode()
    model = SegmentModel(form)
    assert model.feed(doc) and model.accepting()
    assert ReferenceMatcher(g.ir).accepts(doc)
    too_long = b'{"name": "' + b"a" * 41 + b'"'
    assert not SegmentModel(form).feed(too_long)


@pytest.mark.parametrize("budget", [0, 16])
def test_small_unroll_budgets_keep_working(budget: int) -> None:
    """With ``unroll_budget`` 0 (the retry after max_dfa_states) or small, the counts that do not
    qualify become helper rules and blocks as today, beside the segment."""
    limits = CompileLimits(counters=True, unroll_budget=budget)
    x = chars("az")
    g = grammar(
        root=seq(_string(x, 1, 12), lit(":"), rep(seq(ref("n"), lit(";")), 0, 40)),
        n=alt(lit("0"), seq(lit("("), ref("n"), lit(")"))),
    )
    form = segment_form(g, limits)
    assert [(s.lo, s.hi) for s in form.segments] == [(1, 12)]
    vocab = cfgmask.Vocabulary.from_token_bytes([b"a"])
    assert cfgmask.compile(g, vocab, limits=limits).tables.segments is not None
    for _ in _walks(g, form, budget, [x, lit("0;"), lit("(0);")], n_walks=2, length=50):
        pass


def test_json_schema_strings_after_calls_walks() -> None:
    """Bounded strings after calls (a nested object, optional properties, an array of bounded
    strings): segments under the call tests, and the model in step with the reference and the C
    engine along random walks."""
    schema = {
        "type": "object",
        "properties": {
            "inner": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
            "name": {"type": "string", "minLength": 1, "maxLength": 9},
            "tags": {"type": "array", "items": {"type": "string", "maxLength": 8}},
            "note": {"type": "string", "maxLength": 10},
        },
        "required": ["inner", "name"],
    }
    g = cfgmask.Grammar.from_json_schema(json.dumps(schema)).ir
    form = segment_form(g, ON)
    assert {(1, 9), (0, 8), (0, 10)} <= {(s.lo, s.hi) for s in form.segments}
    assert not any(why == "a call comes before it in its rule" for _, _, _, why in form.refused)
    words = [
        lit("a"),
        lit('\\"'),
        lit("\u00e9"),
        lit('{"n":1}'),
        lit('","'),
        lit('"tags":["'),
        lit('"note":"'),
    ]
    for _ in _walks(g, form, 11, words + [lit("ab"), lit("xyz")], n_walks=3, length=120):
        pass
