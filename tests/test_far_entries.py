"""The far entries of counted segments (docs/design.md §7, "The far entries of a counted
segment from its loop's shared walk").

A segment state's entry keyed by the clipped pair (need, budget) where no token of the
vocabulary reaches a bound -- (L, L): every EXIT dead, every INTO open; (0, L): every guard
open -- is built from the loop's shared walk of `unit*` with each exit's subtree walked on
through a counted chart (csrc/loops.c, cm_seg_far_entry) instead of the plain counted walk of
the whole trie.  Every such entry must equal the plain walk's (``_core.seg_far_enable(False)``),
and so must the entries at the pairs one step nearer a bound (which stay plain walks: a far
test one too wide makes them far and fails here).  On hypothesis units, contexts and
vocabularies, a hand-made string whose tokens of exactly L bytes close after L - 1 units or
read L units, and JSON Schema strings with Llama-3.
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
from .test_segment_masks import _STRUCT, _handle
from .test_segments import CONTEXTS, ON, _grammar, _samples, _string, units


@pytest.fixture
def far_on() -> Iterator[None]:
    yield
    _core.seg_far_enable(True)


def _max_len(vocab: cfgmask.Vocabulary) -> int:
    """L: the longest token in the trie, in bytes (csrc/vocab.c, max_len)."""
    return max(len(t) for _, t in vocab.iter_text_tokens())


def _counts(lo: int, hi: int, L: int) -> list[int]:
    """The counts whose pairs are far, and those one step nearer a bound (plain walks)."""
    ks = {0, lo - L, lo - L + 1, lo, lo + 1, hi - L, hi - L + 1, hi}
    return sorted(k for k in ks if 0 <= k <= hi)


def _far(lo: int, hi: int, k: int, L: int) -> bool:
    return hi - k >= L and (lo - k >= L or k >= lo)


def _entries(
    g: ir.Grammar, vocab: cfgmask.Vocabulary, far: bool
) -> dict[tuple[int, int], tuple[bytes, list[int]]]:
    """Every segment state's entry at the counts of _counts, built with the far entries on or
    off (a fresh grammar handle: its cache holds only what this builds)."""
    form = segment_form(g, ON)
    tables = c_tables(form)
    L = _max_len(vocab)
    _core.seg_far_enable(far)
    gh = _handle(form, vocab)
    out = {}
    for s, sid in enumerate(tables.state_seg.tolist()):
        if sid == 0xFFFFFFFF:
            continue
        lo, hi = int(tables.seg_lo[sid]), int(tables.seg_hi[sid])
        for k in _counts(lo, hi, L):
            words, unc = gh.seg_entry(s, k)
            out[(s, k)] = (words.tobytes(), sorted(unc.tolist()))
    return out


def assert_same_entries(
    fast: dict[tuple[int, int], tuple[bytes, list[int]]],
    plain: dict[tuple[int, int], tuple[bytes, list[int]]],
    vocab: cfgmask.Vocabulary,
    what: str,
) -> None:
    """Each (state, k)'s entry of `fast` equals the plain walks' (the tokens told apart)."""
    assert fast.keys() == plain.keys()
    for key, e in plain.items():
        assert fast[key][1] == e[1], f"uncertain tokens differ at (state, k) = {key}"
        if fast[key][0] != e[0]:
            a = np.frombuffer(fast[key][0], np.uint8)
            b = np.frombuffer(e[0], np.uint8)
            ta = set(np.nonzero(np.unpackbits(a, bitorder="little"))[0].tolist())
            tb = set(np.nonzero(np.unpackbits(b, bitorder="little"))[0].tolist())
            raise AssertionError(
                f"(state, k) = {key}: {what} only {[vocab.decode([t]) for t in sorted(ta - tb)[:8]]}, "
                f"plain only {[vocab.decode([t]) for t in sorted(tb - ta)[:8]]}"
            )


def _check(g: ir.Grammar, vocab: cfgmask.Vocabulary) -> int:
    """The entries with the far ones on equal those with every entry a plain walk; returns how
    many far entries were built from shared walks."""
    plain = _entries(g, vocab, False)
    before = _core.seg_far_builds()
    fast = _entries(g, vocab, True)
    built = _core.seg_far_builds() - before
    assert_same_entries(fast, plain, vocab, "far")
    return built


def _vocabulary(rng: random.Random, pieces: list[bytes], n: int) -> cfgmask.Vocabulary:
    """Every single byte and n tokens of 2-5 pieces (so L stays small: far bounds stay cheap)."""
    texts = {bytes([b]) for b in range(256)}
    while len(texts) < 256 + n:
        texts.add(b"".join(rng.choice(pieces) for _ in range(rng.randint(2, 5))))
    tokens: list[bytes | None] = [*sorted(texts), None]
    return cfgmask.Vocabulary.from_token_bytes(tokens, stop_token_ids=[len(tokens) - 1])


@given(
    units(),
    st.sampled_from(CONTEXTS),
    units(),
    st.integers(0, 3),
    st.integers(0, 3),
    st.booleans(),
    st.integers(0, 2**16),
)
def test_far_entries_equal_plain_walks(
    x: ir.Expr, context: str, y: ir.Expr, a: int, b: int, lo_zero: bool, seed: int
) -> None:
    rng = random.Random(seed)
    words = [_samples(x, rng) for _ in range(6)] + [_samples(y, rng) for _ in range(3)]
    vocab = _vocabulary(rng, words * 3 + _STRUCT, 80)
    L = _max_len(vocab)
    lo = 0 if lo_zero else L + a
    hi = lo + L + b
    g = _grammar(context, x, lo, hi, y, L + b, 2 * L + a)
    if not segment_form(g, ON).segments:
        return
    built = _check(g, vocab)
    # an array's strings lie on a short cycle through the comma (the loop leaves the segment:
    # declined); elsewhere the segment's states are a loop of their own
    assert built > 0 or context == "array"


def test_tokens_of_exactly_l_bytes_at_the_far_edge(far_on: None) -> None:
    """Tokens of exactly L bytes that close after L - 1 units (`aaaa"`) or read L units
    (`abcde`): at lo - k = L the close is refused, at L - 1 taken; at hi - k = L the long token
    is taken, at L - 1 refused.  A far test one step too wide on either side fails here."""
    lo, hi = 12, 30
    g = grammar(root=seq(_string(chars("az"), lo, hi), lit("!")))
    extra = [b"abcd", b'aaaa"', b'aaa"!', b"abcde"]
    tokens: list[bytes | None] = [bytes([c]) for c in range(256)] + extra + [None]
    vocab = cfgmask.Vocabulary.from_token_bytes(tokens, stop_token_ids=[len(tokens) - 1])
    L = _max_len(vocab)
    assert L == 5
    assert _check(g, vocab) > 0
    # the mutation this guards against, seen in the entries themselves: the head's far pairs
    form = segment_form(g, ON)
    tables = c_tables(form)
    head = int(tables.seg_head[0])
    gh = _handle(form, vocab)
    close, long_ = vocab.token_id(b'aaaa"'), vocab.token_id(b"abcde")

    def has(k: int, t: int) -> bool:
        words, unc = gh.seg_entry(head, k)
        return bool((words.view(np.uint32)[t // 32] >> (t % 32)) & 1) or t in unc.tolist()

    assert not has(lo - L, close) and has(lo - L + 1, close)
    assert has(hi - L, long_) and not has(hi - L + 1, long_)


SCHEMAS = [
    {"type": "string", "minLength": 300, "maxLength": 700},
    {
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 600},
            "tags": {"type": "array", "items": {"type": "string", "minLength": 260, "maxLength": 900}},
        },
        "required": ["name"],
    },
]


@pytest.fixture(scope="module")
def llama3() -> cfgmask.Vocabulary:
    return cfgmask.Vocabulary.llama3()


@pytest.mark.parametrize("i", range(len(SCHEMAS)))
def test_json_schema_far_entries_with_llama3(llama3: cfgmask.Vocabulary, i: int, far_on: None) -> None:
    """JSON Schema strings far longer than Llama-3's longest token: every segment state's far
    entries (the string's character at (L, L) and (0, L)) equal the plain walks', as do the
    entries one step nearer a bound."""
    g = cfgmask.Grammar.from_json_schema(json.dumps(SCHEMAS[i])).ir
    assert segment_form(g, ON).segments
    assert _check(g, llama3) > 0
