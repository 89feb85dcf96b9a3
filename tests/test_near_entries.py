"""The near entries of counted segments (docs/design.md §7, "The near entries of a counted
segment: the far entry less the cut").

A segment state's entry keyed by a clipped pair (need, budget) where a token of the vocabulary
may reach a bound (need < L or budget < L) is built as the far pair's entry -- (0, L) where an
EXIT may be open, (L, L) where none is -- less segcut's cut of (need, budget): a token that stays
must read at most budget units, one that leaves between need and budget before its EXIT byte
(csrc/cache.c, seg_near; csrc/segcut.c).  Every such entry must equal the plain counted walk's
(``_core.seg_far_enable(False)`` and ``_core.seg_near_enable(False)``) at every count from each
bound inwards to L: on hypothesis units, contexts and vocabularies with bounds on both sides of
L, a hand-made string whose tokens of exactly L bytes close after L - 1 units or read L units,
and JSON Schema strings with minLength / maxLength around Llama-3's L.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import cfgmask
from cfgmask import _core, ir
from cfgmask.compile.segments import c_tables, segment_form

from .helpers import chars, grammar, lit, seq
from .test_far_entries import _max_len, _vocabulary, assert_same_entries
from .test_segment_masks import _STRUCT, _handle
from .test_segments import CONTEXTS, ON, _grammar, _samples, _string, units

Entries = dict[tuple[int, int], tuple[bytes, list[int]]]


@pytest.fixture
def switches_on() -> Iterator[None]:
    yield
    _core.seg_far_enable(True)
    _core.seg_near_enable(True)


def _counts(lo: int, hi: int, L: int) -> list[int]:
    """Every count from each bound inwards to L (each need and budget from 0 to L), and one
    count past L from each."""
    ks = set(range(lo - L - 1, lo + 1)) | set(range(hi - L - 1, hi + 1))
    return sorted(k for k in ks if 0 <= k <= hi)


def _near(lo: int, hi: int, k: int, L: int) -> bool:
    return hi - k < L or 0 < lo - k < L


def _entries(
    g: ir.Grammar, vocab: cfgmask.Vocabulary, on: bool, counts: object = _counts, states: int | None = None
) -> Entries:
    """Every segment state's entry (the first `states` of each segment, head first) at the
    counts `counts(lo, hi, L)`, built with the far and near entries on or off (a fresh grammar
    handle: its cache holds only what this builds)."""
    form = segment_form(g, ON)
    tables = c_tables(form)
    L = _max_len(vocab)
    _core.seg_far_enable(on)
    _core.seg_near_enable(on)
    gh = _handle(form, vocab)
    seg_states: dict[int, list[int]] = {}
    for s, sid in enumerate(tables.state_seg.tolist()):
        if sid != 0xFFFFFFFF:
            seg_states.setdefault(sid, []).append(s)
    out = {}
    for sid, ss in seg_states.items():
        head = int(tables.seg_head[sid])
        ss = [head] + [s for s in ss if s != head]
        lo, hi = int(tables.seg_lo[sid]), int(tables.seg_hi[sid])
        for s in ss[:states]:
            for k in counts(lo, hi, L):  # type: ignore[operator]
                words, unc = gh.seg_entry(s, k)
                out[(s, k)] = (words.tobytes(), sorted(unc.tolist()))
    return out


def _check(g: ir.Grammar, vocab: cfgmask.Vocabulary, **kw: object) -> int:
    """The entries with the far and near ones on equal those with every entry a plain walk;
    returns how many near entries were built from the far one and the cut."""
    plain = _entries(g, vocab, False, **kw)  # type: ignore[arg-type]
    before = _core.seg_near_builds()
    fast = _entries(g, vocab, True, **kw)  # type: ignore[arg-type]
    built = _core.seg_near_builds() - before
    assert_same_entries(fast, plain, vocab, "near")
    return built


@given(
    units(),
    st.sampled_from(CONTEXTS),
    units(),
    st.sampled_from(["zero", "near", "far"]),
    st.integers(0, 40),
    st.integers(0, 40),
    st.integers(0, 2**16),
)
def test_near_entries_equal_plain_walks(
    x: ir.Expr, context: str, y: ir.Expr, lo_kind: str, a: int, b: int, seed: int
) -> None:
    """Bounds on both sides of L: lo 0, under L or past it; hi - lo under L (every pair near,
    no far pair ever asked) or past it."""
    rng = random.Random(seed)
    words = [_samples(x, rng) for _ in range(6)] + [_samples(y, rng) for _ in range(3)]
    vocab = _vocabulary(rng, words * 3 + _STRUCT, 80)
    L = _max_len(vocab)
    lo = {"zero": 0, "near": 1 + a % L, "far": L + a % 8}[lo_kind]
    hi = max(lo + b % (2 * L + 3), 8)  # segments.MIN_HI: a smaller hi stays unrolled
    g = _grammar(context, x, lo, hi, y, b % 5, b % 5 + L)
    if not segment_form(g, ON).segments:
        return
    built = _check(g, vocab)
    # an array's strings lie on a short cycle through the comma (the loop leaves the segment:
    # declined); elsewhere every segment state has near pairs
    assert built > 0 or context == "array"


def test_tokens_of_exactly_l_bytes_near_the_bounds(switches_on: None) -> None:
    """Tokens of exactly L bytes that close after L - 1 units (`aaaa"`) or read L units
    (`abcde`): the close is taken at need L - 1 and refused at L; the long token taken at budget
    L and refused at L - 1, with every pair of both near (hi - lo < L) and with lo far.  A cut
    one unit wider on either side fails here."""
    extra = [b"abcd", b'aaaa"', b'aaa"!', b"abcde"]
    tokens: list[bytes | None] = [bytes([c]) for c in range(256)] + extra + [None]
    vocab = cfgmask.Vocabulary.from_token_bytes(tokens, stop_token_ids=[len(tokens) - 1])
    L = _max_len(vocab)
    assert L == 5
    close, long_ = vocab.token_id(b'aaaa"'), vocab.token_id(b"abcde")
    for lo, hi in [(12, 30), (2, 9), (0, 8), (4, 8), (3, 20)]:  # hi >= 8: segments.MIN_HI
        g = grammar(root=seq(_string(chars("az"), lo, hi), lit("!")))
        assert _check(g, vocab) > 0
        form = segment_form(g, ON)
        head = int(c_tables(form).seg_head[0])
        gh = _handle(form, vocab)

        def has(k: int, t: int) -> bool:
            words, unc = gh.seg_entry(head, k)  # noqa: B023
            return bool((words.view(np.uint32)[t // 32] >> (t % 32)) & 1) or t in unc.tolist()

        for k in range(hi + 1):
            assert has(k, close) == (lo - k <= L - 1 and hi - k >= L - 1), (lo, hi, k)
            assert has(k, long_) == (hi - k >= L), (lo, hi, k)


L3_SCHEMAS = [
    # L of Llama-3 is 128: bounds around it, on both sides
    {"type": "string", "minLength": 122, "maxLength": 134},
    {"type": "string", "maxLength": 12},
    {
        "type": "object",
        "properties": {
            "name": {"type": "string", "minLength": 3, "maxLength": 150},
            "tags": {"type": "array", "items": {"type": "string", "minLength": 2, "maxLength": 9}},
        },
        "required": ["name"],
    },
]


@pytest.fixture(scope="module")
def llama3() -> cfgmask.Vocabulary:
    return cfgmask.Vocabulary.llama3()


def _l3_counts(lo: int, hi: int, L: int) -> list[int]:
    """A few counts from each bound inwards (each a distinct near pair, plain walks of Llama-3
    cost ~0.1 s), the first far one past L and one in between."""
    ks = {lo, lo - 1, lo - 2, lo - L + 1, lo - L, hi, hi - 1, hi - 2, hi - L + 1, hi - L, (lo + hi) // 2}
    return sorted(k for k in ks if 0 <= k <= hi)


@pytest.mark.parametrize("i", range(len(L3_SCHEMAS)))
def test_json_schema_near_entries_with_llama3(llama3: cfgmask.Vocabulary, i: int, switches_on: None) -> None:
    """JSON Schema strings with bounds around Llama-3's L: the head's and two interior states'
    near entries equal the plain walks'."""
    assert _max_len(llama3) == 128
    g = cfgmask.Grammar.from_json_schema(json.dumps(L3_SCHEMAS[i])).ir
    assert segment_form(g, ON).segments
    assert _check(g, llama3, counts=_l3_counts, states=3) > 0
