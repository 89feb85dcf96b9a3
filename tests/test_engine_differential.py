"""The C engine against the pure-Python reference, bit for bit.

Random grammars (left recursion, nullable rules, nested repetition, UTF-8
classes, unproductive rules), random vocabularies (split UTF-8, invalid UTF-8,
duplicates, special and stop tokens) and random viable prefixes.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import cfgmask
from cfgmask import ir
from cfgmask.compile.strategy import Strategy

from .reference import ReferenceMatcher
from .strategies import Vocab, ebnf_macro_grammars, grammar_alphabet, grammars, token_walks, vocabularies


def _vocab(v: Vocab) -> cfgmask.Vocabulary:
    return cfgmask.Vocabulary.from_token_bytes(
        v.tokens, stop_token_ids=v.stop_ids, special_token_ids=v.special_ids
    )


def _compile_or_none(g: ir.Grammar, vocab: cfgmask.Vocabulary, ref: ReferenceMatcher):
    """Compile; an empty language must be a GrammarError, and only then."""
    if not ref.is_prefix(b""):
        with pytest.raises(cfgmask.GrammarError, match="language is empty"):
            cfgmask.compile(g, vocab)
        return None
    return cfgmask.compile(g, vocab)


def _setup(g: ir.Grammar, v: Vocab):
    """The reference, the vocabulary and the compiled grammar (None for an empty language)."""
    ref = ReferenceMatcher(g)
    vocab = _vocab(v)
    return ref, vocab, _compile_or_none(g, vocab, ref)


def _replay_against_reference(compiled, ref: ReferenceMatcher, v: Vocab, walk) -> None:
    """Along the walk (and after its last token), mask and acceptance equal the reference's."""
    m = cfgmask.Matcher(compiled)
    prefix = b""
    for t in [*walk.token_ids, None]:
        expected = ref.mask(prefix, v.tokens, v.stop_ids, v.special_ids)
        assert _mask_bools(m, compiled.vocab.size) == expected, f"prefix {prefix!r}"
        assert m.is_accepting() == ref.accepts(prefix)
        if t is None:
            break
        assert m.accept_token(t)
        prefix += v.tokens[t] or b""


def _mask_bools(m: cfgmask.Matcher, size: int) -> list[bool]:
    mask = cfgmask.allocate_bitmask(1, size)
    m.fill_bitmask(mask)
    bits = np.unpackbits(mask.view(np.uint8), bitorder="little")[:size]
    return [bool(b) for b in bits]


class ReferenceWalk:
    """A walk of token ids and the masks the reference gives after each of its prefixes: what a
    matcher (a fork, one rolled back, another of the grammar) must give along it."""

    def __init__(self, ref_m: ReferenceMatcher, v: Vocab, vocab: cfgmask.Vocabulary, ids: list[int]) -> None:
        self.ref_m, self.v, self.size, self.ids = ref_m, v, vocab.size, ids

    def expect(self, n: int) -> list[bool]:
        prefix = b"".join(self.v.tokens[t] or b"" for t in self.ids[:n])
        return self.ref_m.mask(prefix, self.v.tokens, self.v.stop_ids, self.v.special_ids)

    def follow(self, matcher: cfgmask.Matcher, start: int, stop: int | None = None) -> None:
        """The masks after ids[:start] .. ids[:stop], accepting ids[start:stop]; stop None: to
        the walk's end, its last mask included."""
        end = len(self.ids) if stop is None else stop
        for i in range(start, end):
            assert _mask_bools(matcher, self.size) == self.expect(i), f"after {i} tokens"
            assert matcher.accept_token(self.ids[i])
        if stop is None:
            assert _mask_bools(matcher, self.size) == self.expect(end), f"after {end} tokens"


@st.composite
def cases(draw: st.DrawFn):
    g = draw(grammars())
    v = draw(vocabularies(grammar_alphabet(g) or [b"a"]))
    return g, v


@given(cases(), st.data())
def test_masks_equal_reference(case, data) -> None:
    g, v = case
    ref, vocab, compiled = _setup(g, v)
    if compiled is None:
        return
    _replay_against_reference(compiled, ref, v, data.draw(token_walks(ref, v)))


@st.composite
def ebnf_cases(draw: st.DrawFn):
    g = draw(ebnf_macro_grammars())
    v = draw(vocabularies(grammar_alphabet(g) or [b"a"]))
    return g, v


@given(ebnf_cases(), st.data())
def test_ebnf_macro_masks_equal_reference(case, data) -> None:
    """TagDispatch, Substring and json_string regexes, as the EBNF front end writes them."""
    g, v = case
    ref, vocab, compiled = _setup(g, v)
    if compiled is None:
        return
    _replay_against_reference(compiled, ref, v, data.draw(token_walks(ref, v)))


@given(cases(), st.data())
def test_rejected_tokens_leave_state_unchanged(case, data) -> None:
    g, v = case
    ref, vocab, compiled = _setup(g, v)
    if compiled is None:
        return
    m = cfgmask.Matcher(compiled)
    before = _mask_bools(m, vocab.size)
    for t, ok in enumerate(before):
        if not ok:
            assert not m.accept_token(t)
    assert _mask_bools(m, vocab.size) == before


@given(cases(), st.data())
def test_rollback_and_fork_restore_masks(case, data) -> None:
    g, v = case
    ref, vocab, compiled = _setup(g, v)
    if compiled is None:
        return
    walk = data.draw(token_walks(ref, v))
    m = cfgmask.Matcher(compiled)
    masks = [_mask_bools(m, vocab.size)]
    forks = [m.fork()]
    for t in walk.token_ids:
        assert m.accept_token(t)
        masks.append(_mask_bools(m, vocab.size))
        forks.append(m.fork())
    for k in range(len(walk.token_ids), 0, -1):
        m.rollback(1)
        assert _mask_bools(m, vocab.size) == masks[k - 1]
    for f, expected in zip(forks, masks, strict=True):
        assert _mask_bools(f, vocab.size) == expected


@given(cases(), st.randoms(use_true_random=False))
def test_random_logit_generation_stays_in_language(case, rnd) -> None:
    g, v = case
    ref, vocab, compiled = _setup(g, v)
    if compiled is None:
        return
    m = cfgmask.Matcher(compiled)
    out = b""
    for _ in range(12):
        allowed = np.flatnonzero(_mask_bools(m, vocab.size))
        if allowed.size == 0:
            # Only possible when this vocabulary cannot spell any continuation.
            assert not any(ref.mask(out, v.tokens, v.stop_ids, v.special_ids)), out
            return
        logits = np.array([rnd.gauss(0, 1) for _ in range(vocab.size)])
        t = int(allowed[np.argmax(logits[allowed])])
        assert m.accept_token(t)
        if t in vocab.stop_ids:
            assert ref.accepts(out)
            assert m.is_terminated()
            return
        out += vocab.tokens[t]
        assert ref.is_prefix(out)
    assert ref.is_prefix(out)


@given(
    grammars(), st.lists(st.binary(min_size=2, max_size=4), max_size=20), st.randoms(use_true_random=False)
)
def test_byte_complete_vocabulary_never_reaches_an_empty_mask(g, extra, rnd) -> None:
    """With every single byte in the vocabulary, some token always continues a viable prefix."""
    tokens: list[bytes | None] = [None, *[bytes([b]) for b in range(256)], *extra]
    vocab = cfgmask.Vocabulary.from_token_bytes(tokens, stop_token_ids=[0])
    ref = ReferenceMatcher(g)
    compiled = _compile_or_none(g, vocab, ref)
    if compiled is None:
        return
    m = cfgmask.Matcher(compiled)
    out = b""
    for _ in range(16):
        allowed = np.flatnonzero(_mask_bools(m, vocab.size))
        assert allowed.size > 0, f"empty mask after {out!r}"
        t = int(allowed[rnd.randrange(allowed.size)])
        assert m.accept_token(t)
        if t == 0:
            assert ref.accepts(out)
            return
        out += tokens[t] or b""
    assert ref.is_prefix(out)


@given(cases(), st.data())
def test_direct_walk_masks_equal_reference(case, data) -> None:
    """``direct_walk_states=1``: every mask walks the trie with the real chart (the path wide,
    ambiguous sets take) instead of the per-state cache."""
    g, v = case
    ref, vocab, compiled = _setup(g, v)
    if compiled is None:
        return
    direct = cfgmask.compile(g, vocab, _strategy=Strategy(direct_walk_states=1))
    _replay_against_reference(direct, ref, v, data.draw(token_walks(ref, v)))


@given(cases(), st.data())
def test_waiter_index_masks_equal_reference(case, data) -> None:
    """``index_min_items=1``: every closed set that receives a second completion is indexed by
    called rule (the path big sets of expression grammars take), through both the cache walks
    and the run-time checks; masks must not change."""
    g, v = case
    ref, vocab, compiled = _setup(g, v)
    if compiled is None:
        return
    for limits in (
        Strategy(index_min_items=1),
        Strategy(index_min_items=1, direct_walk_states=1),
    ):
        indexed = cfgmask.compile(g, vocab, _strategy=limits)
        _replay_against_reference(indexed, ref, v, data.draw(token_walks(ref, v)))


@given(cases(), st.data())
def test_mask_memo_masks_equal_reference(case, data) -> None:
    """``mask_memo_min_items=1``: every mask goes through the grammar's whole-mask memo, keyed
    by the chart's reachable structure.  Later walks on the same compiled grammar hit what
    earlier walks stored wherever their charts have the same structure, and every mask must
    still equal the reference's."""
    g, v = case
    ref, vocab, compiled = _setup(g, v)
    if compiled is None:
        return
    memo = cfgmask.compile(g, vocab, _strategy=Strategy(mask_memo_min_items=1))
    for _ in range(3):
        _replay_against_reference(memo, ref, v, data.draw(token_walks(ref, v)))


def test_mask_memo_hits_on_equal_structure() -> None:
    """Two different texts whose charts have the same structure share one memo entry: after
    ``a,`` and after ``bb,`` the parser is in the same place (origins renumbered), so the
    second mask is a hit, and it equals a fresh computation."""
    g = cfgmask.Grammar.from_gbnf('root ::= item ("," item)* "."\nitem ::= [a-z]+ | "(" root ")"')
    vocab = cfgmask.Vocabulary.from_token_bytes([b"a", b"bb", b",", b".", b"(", b")", b"a,", b""])
    memo = cfgmask.compile(g, vocab, _strategy=Strategy(mask_memo_min_items=1))
    plain = cfgmask.compile(g, vocab, _strategy=Strategy(mask_memo_min_items=2**63))
    hits = []
    for text in (b"a,", b"bb,", b"(a,", b"(bb,"):
        m, p = cfgmask.Matcher(memo), cfgmask.Matcher(plain)
        assert m.accept_bytes(text) and p.accept_bytes(text)
        assert _mask_bools(m, vocab.size) == _mask_bools(p, vocab.size), text
        hits.append(m._h.mask_stats()["memo_hit"])
        assert not p._h.mask_stats()["memo_hit"]
    assert hits == [False, True, False, True]


@given(cases(), st.data())
def test_mask_memo_by_candidates_masks_equal_reference(case, data) -> None:
    """``mask_memo_min_candidates=1``: masks that leave any candidate to check go through the
    memo after their cached parts were gathered (the lookup then replaces them)."""
    g, v = case
    ref, vocab, compiled = _setup(g, v)
    if compiled is None:
        return
    limits = Strategy(mask_memo_min_items=2**63, mask_memo_min_candidates=1)
    memo = cfgmask.compile(g, vocab, _strategy=limits)
    for _ in range(3):
        _replay_against_reference(memo, ref, v, data.draw(token_walks(ref, v)))


LOOP_COPIES = cfgmask.Grammar.from_gbnf(
    'root ::= "{" s ":" s ("," s ":" s)* "}" | "[" s "]"\n'
    's ::= "\\"" ([^"\\\\] | "\\\\" ["\\\\nu] | "\\\\u" [0-9a-f] [0-9a-f])* "\\""'
).ir


@given(
    vocabularies(
        (b"{", b"}", b"[", b"]", b'"', b":", b",", b"\\", b"u", b"n", b"a", b"0", b'a"', b'":"', b'","')
    ),
    st.data(),
)
def test_shared_loop_walks_equal_reference(v, data) -> None:
    """Copies of one string loop inlined in many places (keys, values, array items) share the
    part of their cache walks that stays inside the loop; each continues its own exits.  With
    sharing (the default) and without, masks equal the reference's."""
    ref, vocab, compiled = _setup(LOOP_COPIES, v)
    assert compiled is not None
    unshared = cfgmask.compile(LOOP_COPIES, vocab, _strategy=Strategy(share_loop_walks=False))
    for c in (compiled, unshared):
        _replay_against_reference(c, ref, v, data.draw(token_walks(ref, v, max_steps=10)))


RETURNS = cfgmask.Grammar.from_gbnf(
    'root ::= "(" e ")" | "[" e "];" | e "!"\ne ::= t ("+" t)*\nt ::= [ab]+ | "(" e ")" | "-" t'
).ir


@given(
    vocabularies(
        (b"(", b")", b"[", b"]", b";", b"!", b"+", b"-", b"a", b"b", b"a)", b"b];", b"a!", b")+", b"];")
        + (b"a)a", b"b]!", b"a!!", b"a)(", b"b+)")  # leave e or t, then no caller reads on
        # rests that read on from a whole shorter one (`)+` then `)+a`, `)+(`): the filter only
        # checks a rest's last byte, and scans it again for the longer rest
        + (b"a)+", b"a)+a", b"a)+(", b"b)+b)", b"a))!", b"a))")
    ),
    st.data(),
)
def test_filter_uncertain_equal_reference(v, data) -> None:
    """`e` and `t` return to several callers, so tokens such as ``a)`` or ``b];`` leave the rule
    mid-token; ``a)a`` or ``b]!`` leave it, and then no caller can go on reading.  Cache entries
    drop those (the rule's upward chart dies on them); with the filter (the default) and without,
    masks equal the reference's.  The filter builds no set for a rest's last byte (it only checks
    that some item reads it): ``a)+`` then ``a)+a`` read on past such a byte."""
    ref, vocab, compiled = _setup(RETURNS, v)
    assert compiled is not None
    unfiltered = cfgmask.compile(RETURNS, vocab, _strategy=Strategy(filter_uncertain=False))
    for c in (compiled, unfiltered):
        _replay_against_reference(c, ref, v, data.draw(token_walks(ref, v, max_steps=10)))
