"""Masks on a grammar with counted segments (step (c) of the counters plan, first half;
docs/design.md §7, "Masks on a grammar with counted segments").

A grammar made from the segment form's tables keeps a count beside every item of its charts
(csrc/earley.c); its masks read the counts: an item in a segment state looks up the entry of its
state keyed by the clipped pair (need, budget) = (min(max(lo - k, 0), L), min(hi - k, L)), built
by the plain trie walk of a private counted chart (csrc/cache.c, cm_grammar_seg_entry), and every
strategy that reads the automata without counts is off for such grammars.  Every mask must be
bit-identical to the mask of the same grammar compiled unrolled (the counts spelled out as
states), along random walks with rollbacks and forks, on hypothesis units, bounds and contexts
with small random vocabularies and on JSON Schema strings with Llama-3;
``_core.seg_entry_stats()`` proves the keyed entries were built and found again.
"""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import cfgmask
from cfgmask import _core, ir
from cfgmask.compile.compiled import MatcherLimits, _settings
from cfgmask.compile.segments import MIN_HI, c_tables, segment_form
from cfgmask.compile.strategy import DEFAULT, Strategy
from cfgmask.errors import MatcherError

from .helpers import alt, chars, grammar, lit, ref, rep, seq
from .test_segments import CONTEXTS, ON, _grammar, _samples, _string, bounds, units

_STRUCT = [b'"', b",", b":", b"[", b"]", b"{", b"}", b"(", b")", b"!", b"0", b"7", b"\\", b'",', b'":']


# every shortcut of the mask path that would answer from what reads no count (the whole-mask
# memo, the closing verdicts, the stack verdict store, direct walks) from the first mask: on a
# segment grammar they must stay off or read the counts
EAGER = Strategy(
    mask_memo_min_items=1,
    mask_memo_min_candidates=1,
    closing_verdicts=1,
    stack_verdicts=1,
    direct_walk_states=2,
)


def _handle(form: object, vocab: cfgmask.Vocabulary, strategy: Strategy = DEFAULT) -> _core.GrammarHandle:
    return _core.GrammarHandle(
        c_tables(form),  # type: ignore[arg-type]
        vocab._handle(),
        list(vocab.stop_ids),
        _settings(MatcherLimits(), strategy),
    )


def _row(vocab: cfgmask.Vocabulary) -> np.ndarray:
    return np.zeros(vocab.size // 32 + 1, dtype=np.int32)


def _allowed(row: np.ndarray, n: int) -> list[int]:
    bits = np.unpackbits(row.view(np.uint8), bitorder="little")[:n]
    return [int(t) for t in np.nonzero(bits)[0]]


def _vocabulary(rng: random.Random, pieces: list[bytes], n: int) -> cfgmask.Vocabulary:
    """Every single byte (walks can always move) and n tokens of 2-8 pieces of the grammar's words
    and its punctuation; one stop token."""
    texts = {bytes([b]) for b in range(256)}
    while len(texts) < 256 + n:
        texts.add(b"".join(rng.choice(pieces) for _ in range(rng.randint(2, 8))))
    tokens: list[bytes | None] = sorted(texts)
    tokens.append(None)
    return cfgmask.Vocabulary.from_token_bytes(tokens, stop_token_ids=[len(tokens) - 1])


def _compare_walks(
    g: ir.Grammar,
    vocab: cfgmask.Vocabulary,
    seed: int,
    n_walks: int = 3,
    length: int = 40,
    prefer: list[bytes] | None = None,
    strategy: Strategy = DEFAULT,
) -> int:
    """Random token walks (allowed tokens, some preferred), the segment grammar's matcher beside
    the unrolled compile's: the same mask and acceptance at every step, through rollbacks of a
    few tokens and forks that read ahead.  Returns the masks compared."""
    form = segment_form(g, ON)
    gh = _handle(form, vocab, strategy)
    unrolled = cfgmask.compile(g, vocab)
    rng = random.Random(seed)
    n = vocab.size
    pref = {vocab.token_id(p) for p in prefer or [] if _has(vocab, p)}
    compared = 0

    def same(m: _core.MatcherHandle, p: cfgmask.Matcher, what: str) -> list[int]:
        nonlocal compared
        a, b = _row(vocab), _row(vocab)
        m.fill_mask(a)
        p.fill_bitmask(b)
        if not np.array_equal(a, b):
            sa, sb = set(_allowed(a, n)), set(_allowed(b, n))
            raise AssertionError(
                f"{what}: segments only {[vocab.decode([t]) for t in sorted(sa - sb)[:8]]}, "
                f"unrolled only {[vocab.decode([t]) for t in sorted(sb - sa)[:8]]}"
            )
        assert m.is_accepting() == p.is_accepting(), what
        compared += 1
        return [t for t in _allowed(b, n) if t not in vocab.stop_ids]

    for _ in range(n_walks):
        m = _core.MatcherHandle(gh)
        p = cfgmask.Matcher(unrolled)
        text = b""
        for step in range(length):
            ok = same(m, p, f"after {text!r}")
            if not ok:
                break
            liked = [t for t in ok if t in pref]
            t = rng.choice(liked if liked and rng.random() < 0.7 else ok)
            if rng.random() < 0.1:  # a fork reads ahead; the original is untouched
                fm, fp = m.fork(), p.fork()
                for _ in range(rng.randrange(1, 4)):
                    fok = same(fm, fp, f"fork after {text!r}")
                    if not fok:
                        break
                    x = rng.choice(fok)
                    assert fm.accept_token(x) and fp.accept_token(x)
            assert m.accept_token(t) and p.accept_token(t)
            text += vocab.decode([t])
            if rng.random() < 0.12 and step >= 2:  # roll back a few tokens, read them again
                k = rng.randrange(1, 4)
                m.rollback(k)
                p.rollback(k)
                same(m, p, f"rolled back {k} from {text!r}")
                break
    return compared


def _has(vocab: cfgmask.Vocabulary, piece: bytes) -> bool:
    try:
        vocab.token_id(piece)
    except (KeyError, ValueError):
        return False
    return True


@given(units(), bounds(), st.sampled_from(CONTEXTS), units(), bounds(), st.integers(0, 2**16))
def test_masks_equal_the_unrolled_grammars(
    x: ir.Expr, b1: tuple[int, int], context: str, y: ir.Expr, b2: tuple[int, int], seed: int
) -> None:
    g = _grammar(context, x, *b1, y, *b2)
    rng = random.Random(seed)
    words = [_samples(x, rng) for _ in range(6)] + [_samples(y, rng) for _ in range(3)]
    vocab = _vocabulary(rng, words * 3 + _STRUCT, 120)
    strategy = EAGER if seed % 2 else DEFAULT
    assert (
        _compare_walks(g, vocab, seed, prefer=sorted(set(words)), n_walks=4, length=40, strategy=strategy) > 0
    )


@given(units(), bounds(), st.integers(0, 2**16))
def test_masks_at_every_count(x: ir.Expr, b: tuple[int, int], seed: int) -> None:
    """Units only, one at a time up to hi: every count's mask (the close offered exactly on
    [lo, hi], the tokens that would pass hi refused) equals the unrolled grammar's."""
    lo, hi = b
    g = grammar(root=_string(x, lo, hi))
    rng = random.Random(seed)
    words = sorted({_samples(x, rng) for _ in range(8)})
    vocab = _vocabulary(rng, words * 4 + [b'"'], 150)
    form = segment_form(g, ON)
    m = _core.MatcherHandle(_handle(form, vocab))
    p = cfgmask.Matcher(cfgmask.compile(g, vocab))
    for piece in [b'"'] + [rng.choice(words) for _ in range(hi)]:
        a, r = _row(vocab), _row(vocab)
        m.fill_mask(a)
        p.fill_bitmask(r)
        assert np.array_equal(a, r)
        for b_ in piece:
            assert m.accept_token(vocab.token_id(bytes([b_]))) and p.accept_token(vocab.token_id(bytes([b_])))
    a, r = _row(vocab), _row(vocab)
    m.fill_mask(a)
    p.fill_bitmask(r)
    assert np.array_equal(a, r)


def test_far_positions_share_one_keyed_entry() -> None:
    """A long string (hi far above the longest token): the positions further than L from both
    bounds have one clipped pair, so their entry is built once and found again; the masks equal
    the unrolled grammar's at every position, up to the bound and past the close."""
    g = grammar(root=seq(_string(chars("az", "09"), 3, 90), lit("!")))
    rng = random.Random(7)
    words = [bytes([rng.choice(b"abcxyz019")]) * rng.randint(1, 3) for _ in range(30)]
    vocab = _vocabulary(rng, words, 60)
    L = max(len(t) for _, t in vocab.iter_text_tokens())
    assert 90 > 2 * L + 8
    form = segment_form(g, ON)
    assert [(s.lo, s.hi) for s in form.segments] == [(3, 90)]
    m = _core.MatcherHandle(_handle(form, vocab))
    p = cfgmask.Matcher(cfgmask.compile(g, vocab))
    built, hits = _core.seg_entry_stats()
    a_id = vocab.token_id(b"a")
    steps = [vocab.token_id(b'"')] + [a_id] * 90 + [vocab.token_id(b'"'), vocab.token_id(b"!")]
    for t in steps:
        a, r = _row(vocab), _row(vocab)
        m.fill_mask(a)
        p.fill_bitmask(r)
        assert np.array_equal(a, r)
        assert m.accept_token(t) and p.accept_token(t)
    assert m.is_accepting() and p.is_accepting()
    built2, hits2 = _core.seg_entry_stats()
    # the head's positions: k = 0 .. 90, of which k <= 90 - L share (need 0 or L..., budget L)
    assert hits2 - hits >= 90 - 2 * L - 3
    assert built2 - built <= 2 * L + 8  # one entry a distinct pair near a bound, one far from both
    assert built2 > built


def test_entries_are_keyed_by_the_count() -> None:
    """One unit a step from 0 to hi, with tokens of exactly L bytes that close the string after
    L - 1 units or read L units: the entry at lo - k = L must differ from the one at L - 1, and
    at hi - k = L from L - 1, so a key clipped one lower fails here.  Every mask the unrolled
    grammar's, and two matchers of one grammar at different counts read alternately."""
    lo, hi = 10, 30
    g = grammar(root=seq(_string(chars("az"), lo, hi), lit("!")))
    extra = [b"abcd", b'aaaa"', b'aaa"!', b"abcde"]
    tokens: list[bytes | None] = [bytes([b]) for b in range(256)] + extra + [None]
    vocab = cfgmask.Vocabulary.from_token_bytes(tokens, stop_token_ids=[len(tokens) - 1])
    L = max(len(t) for t in extra)
    gh = _handle(segment_form(g, ON), vocab)
    p = cfgmask.compile(g, vocab)
    m, q = _core.MatcherHandle(gh), cfgmask.Matcher(p)
    other, other_q = _core.MatcherHandle(gh), cfgmask.Matcher(p)
    assert m.accept_bytes(b'"') and q.accept_bytes(b'"')
    assert other.accept_bytes(b'"' + b"b" * (hi - L)) and other_q.accept_bytes(b'"' + b"b" * (hi - L))
    seen = {}
    for k in range(hi + 1):
        for mm, qq in ((m, q), (other, other_q)):
            a, r = _row(vocab), _row(vocab)
            mm.fill_mask(a)
            qq.fill_bitmask(r)
            assert np.array_equal(a, r), k
        a = _row(vocab)
        m.fill_mask(a)
        seen[k] = {vocab.decode([t]) for t in _allowed(a, vocab.size)}
        if k < hi:
            assert m.accept_bytes(b"a") and q.accept_bytes(b"a")
    assert b'aaaa"' in seen[lo - L + 1] and b'aaaa"' not in seen[lo - L]
    assert b"abcde" in seen[hi - L] and b"abcde" not in seen[hi - L + 1]


SCHEMAS = [
    {"type": "string", "minLength": 3, "maxLength": 40},
    {
        "type": "object",
        "properties": {
            "name": {"type": "string", "minLength": 2, "maxLength": 30},
            "code": {"type": "string", "minLength": 5, "maxLength": 5},
            "tags": {"type": "array", "items": {"type": "string", "maxLength": 12}},
        },
        "required": ["name"],
    },
    {
        "type": "object",
        "properties": {"a": {"type": "string", "maxLength": 200}},
        "additionalProperties": {"type": "string", "maxLength": 16},
    },
]


@pytest.fixture(scope="module")
def llama3() -> cfgmask.Vocabulary:
    return cfgmask.Vocabulary.llama3()


@pytest.mark.parametrize("i", range(len(SCHEMAS)))
def test_json_schema_strings_with_llama3(llama3: cfgmask.Vocabulary, i: int) -> None:
    """Bounded JSON Schema strings, counters on (segments) against off (unrolled), Llama-3: the
    same masks along random walks of allowed tokens (words of the schema preferred), with forks
    and rollbacks, and the keyed entries found again."""
    g = cfgmask.Grammar.from_json_schema(json.dumps(SCHEMAS[i])).ir
    assert segment_form(g, ON).segments
    built, hits = _core.seg_entry_stats()
    words = [b"abc", b"hello", b" world", b"x", b'"', b'",', b'":', b' "', b"name", b"tags", b"code", b"a"]
    assert _compare_walks(g, llama3, 11 + i, n_walks=4, length=40, prefer=words) > 0
    assert _compare_walks(g, llama3, 21 + i, n_walks=2, length=30, prefer=words, strategy=EAGER) > 0
    built2, hits2 = _core.seg_entry_stats()
    assert built2 > built and hits2 > hits


def test_no_mask_memo_or_verdict_store_reads_a_count() -> None:
    """The same state at two counts in two matchers of one grammar, read alternately (the whole-
    mask memo, the stack verdict store and the closing verdicts would answer one with the
    other's): every mask still the unrolled grammar's."""
    g = grammar(
        root=seq(lit("["), _string(chars("az"), 2, 20), lit(","), _string(chars("az"), 2, 20), lit("]"))
    )
    vocab = cfgmask.Vocabulary.from_token_bytes(
        [bytes([b]) for b in range(256)] + [b'ab","', b'abc"]', b'"]', b"abcdefghij", None],
        stop_token_ids=[260],
    )
    gh = _handle(segment_form(g, ON), vocab, EAGER)
    p = cfgmask.compile(g, vocab)
    texts = [b'["a', b'["abcdefghijabcdefg', b'["ab","', b'["ab","abcdefghijabcdefghij', b'["abcdefghija']
    for _ in range(3):
        for text in texts:
            m = _core.MatcherHandle(gh)
            q = cfgmask.Matcher(p)
            assert m.accept_bytes(text) and q.accept_bytes(text)
            a, r = _row(vocab), _row(vocab)
            m.fill_mask(a)
            q.fill_bitmask(r)
            assert np.array_equal(a, r), text


def test_closing_tokens_are_decided_with_counts() -> None:
    """A segment that ends a called rule and whose unit reads the byte that follows the call
    (`)`): tokens that may close it are uncertain, and an automaton read without counts (the
    closing verdicts' split) or a verdict kept by stack (the stack verdict store) would take
    `aa)` past hi or `)` below lo.  With both eager, every mask the unrolled grammar's."""
    v = alt(seq(lit("<"), rep(chars("a", ")"), 2, 8)), seq(lit("["), ref("v"), lit("]")))
    g = grammar(root=seq(lit("("), ref("v"), lit(")"), lit("!")), v=v)
    form = segment_form(g, ON)
    assert [(s.lo, s.hi) for s in form.segments] == [(2, 8)]
    extra = [b"aa)!", b"a)!", b")!", b"aaa)", b"a)a", b"))!", b"aaaaaa", b"aa)"]
    tokens: list[bytes | None] = [bytes([b]) for b in range(256)] + extra + [None]
    vocab = cfgmask.Vocabulary.from_token_bytes(tokens, stop_token_ids=[len(tokens) - 1])
    for strategy in (EAGER, DEFAULT):
        gh = _handle(form, vocab, strategy)
        p = cfgmask.compile(g, vocab)
        for _ in range(3):
            for n in range(9):
                text = b"(<" + b"a" * n
                m, q = _core.MatcherHandle(gh), cfgmask.Matcher(p)
                assert m.accept_bytes(text) and q.accept_bytes(text)
                a, r = _row(vocab), _row(vocab)
                m.fill_mask(a)
                q.fill_bitmask(r)
                assert np.array_equal(a, r), text


def test_warm_and_entry_copies_are_refused() -> None:
    """Entries of segment states are keyed by counts: warm and entry copies (by state) refuse."""
    g = grammar(root=_string(chars("az"), 1, 12))
    form = segment_form(g, ON)
    assert form.segments and 12 >= MIN_HI
    vocab = cfgmask.Vocabulary.from_token_bytes([bytes([b]) for b in range(256)])
    gh = _handle(form, vocab)
    with pytest.raises(MatcherError, match="counted segments"):
        gh.warm()
    with pytest.raises(MatcherError, match="counted segments"):
        gh.entry(0)
