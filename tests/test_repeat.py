"""A solo state takes an earlier solo state's entry where a joint walk of the trie through both
automata proves every token's outcome the same and none uncertain (csrc/repeat.c,
``_core.repeat_enable``).

The siblings of a JSON Schema object (a number's start in the root rule and in a property's rule,
the `,` after a value with different keys left) differ as automata only past the ends of the
vocabulary's tokens.  The references: every state's entry equal with the sharing on, off and to
the plain walks (no composition, flat walks or loop walks, sharing off), over calculate_area's
object and hypothesis objects on small vocabularies, and Llama-3's masks equal along the first
documents of median JSONSchemaBench schemas, where proofs held.

The checks before a proof (``_core.repeat_checks_enable``: a state whose first two bytes reach a
state that is not solo takes no part, a pair that a token of at most two bytes tells apart is not
walked) only skip proofs that would fail: every entry and mask the same with them on and off,
here and along bench_gbnf's C and SQL documents, whose whitespace states they rule out."""

from __future__ import annotations

from contextlib import AbstractContextManager

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cfgmask
from cfgmask import _core

from .helpers import core_switch, masks_along, same_document_masks
from .test_donor_mode_bytes import DATE_TIME, KEYS, PIECES, _schema, llama3_document
from .test_entries import WALKS_ONLY, _longest_tokens, entries, shipped
from .test_listed_reuse import _same


def _on(on: bool) -> AbstractContextManager[None]:
    return core_switch(_core.repeat_enable, on)


def _checks(on: bool) -> AbstractContextManager[None]:
    return core_switch(_core.repeat_checks_enable, on)


def _check(g: cfgmask.Grammar, toks: list[bytes]) -> int:
    """Every entry equal with the sharing on (the checks on and off), off and the plain walks';
    the proofs that held with the checks on."""
    toks = list(dict.fromkeys(t for t in toks if t))
    vocab = cfgmask.Vocabulary.from_token_bytes([*toks, b""], stop_token_ids=[len(toks)])
    with _on(True):
        h0 = _core.repeat_counts()[1]
        on = entries(cfgmask.compile(g, vocab))
        hits = _core.repeat_counts()[1] - h0
    with _on(True), _checks(False):
        unchecked = entries(cfgmask.compile(g, vocab))
    with _on(False):
        h0 = _core.repeat_counts()
        off = entries(cfgmask.compile(g, vocab))
        plain = entries(cfgmask.compile(g, vocab, _strategy=WALKS_ONLY))
        assert _core.repeat_counts() == h0
    _same(on, off, "the sharing off")
    _same(on, unchecked, "the checks off")
    _same(on, plain, "plain walks")
    return hits


VALUES = [{"type": "number"}, {"type": "integer"}, {"type": "string"}, DATE_TIME, {"type": "boolean"}]


def test_optional_numbers_entries_same() -> None:
    """calculate_area's object (five optional numbers): every entry equal with the sharing on,
    off and plain walks'; on, proofs held (the numbers' starts)."""
    props = {k: {"type": "number"} for k in KEYS[:5]}
    assert _check(_schema(props, [], True), PIECES) > 0


@settings(max_examples=50, deadline=None)
@given(
    props=st.dictionaries(st.sampled_from(KEYS), st.sampled_from(VALUES), min_size=1, max_size=5),
    n_required=st.integers(0, 5),
    extra=st.booleans(),
    toks=st.lists(st.sampled_from(PIECES), min_size=6, max_size=30)
    | st.lists(st.binary(min_size=1, max_size=6).map(bytes), min_size=6, max_size=30),
    words=st.lists(st.text('abeghilnrstwx_"{},:.-0129', min_size=1, max_size=6), max_size=12),
)
def test_objects_entries_same(
    props: dict[str, dict], n_required: int, extra: bool, toks: list[bytes], words: list[str]
) -> None:
    """Hypothesis: objects of optional and required properties (numbers, integers, strings,
    date-times, booleans; additional properties or not) over small vocabularies of the pieces or
    of random bytes, with words whose tokens reach past the siblings' differences or not: every
    entry equal with the sharing on, off and the plain walks'."""
    _check(_schema(props, list(props)[:n_required], extra), [*toks, *(w.encode() for w in words)])


@settings(max_examples=30, deadline=None)
@given(
    n=st.integers(2, 6),
    kinds=st.lists(st.sampled_from(VALUES[:3]), min_size=6, max_size=6),
    words=st.lists(st.text("0123456789.-eE,}", min_size=1, max_size=5), min_size=1, max_size=40),
)
def test_number_siblings_entries_same(n: int, kinds: list[dict], words: list[str]) -> None:
    """Hypothesis: objects of n numbers and integers over vocabularies of digit runs with the
    bytes that end a number in them (`1,`, `2}`: uncertain tokens, which decline), every entry
    equal with the sharing on, off and the plain walks'."""
    props = {f"p{i}": kinds[i] for i in range(n)}
    _check(_schema(props, [], False), [b'{"', b'":', b",", b'"', b"}", *(w.encode() for w in words)])


def test_llama3_first_documents_masks_same() -> None:
    """Llama-3 along the first documents of calculate_area, create_calendar_event and wp_121:
    every mask equal with the sharing on and off; on, proofs held in each."""
    for split, sid in [
        ("Glaiveai2K", "calculate_area_2540405e"),
        ("Glaiveai2K", "create_calendar_event_33766336"),
        ("WashingtonPost", "wp_121_Normalized"),
    ]:
        g, vocab, tokens = llama3_document(split, sid)
        masks = {}
        for on in (False, True):
            with _on(on):
                h0 = _core.repeat_counts()[1]
                masks[on] = masks_along(cfgmask.compile(g, vocab), tokens)
                assert (_core.repeat_counts()[1] > h0) == on, sid
        same_document_masks([masks[False]], [masks[True]], [tokens])


@pytest.mark.parametrize("name", ["c", "sql"])
def test_gbnf_documents_checks_masks_same(name: str) -> None:
    """bench_gbnf's cold pass over the first documents of c.gbnf and sql.gbnf with Llama-3 (their
    whitespace states reach calls at ` )`: proofs that failed after ~500 trie entries each):
    every mask the same with the checks on, off and the sharing off; proofs walked both ways."""
    from benchmarks.documents import DOCUMENTS

    vocab = cfgmask.Vocabulary.llama3()
    g = shipped(f"{name}.gbnf")
    docs = [_longest_tokens(vocab, d.encode()) for d in DOCUMENTS[name]()[:3]]
    out, tries = {}, {}
    for sharing, checks in [(True, True), (True, False), (False, True)]:
        with _on(sharing), _checks(checks):
            t0 = _core.repeat_counts()[0]
            compiled = cfgmask.compile(g, vocab)
            out[sharing, checks] = [masks_along(compiled, doc) for doc in docs]
            tries[sharing, checks] = _core.repeat_counts()[0] - t0
    same_document_masks(out[True, True], out[True, False], docs)
    same_document_masks(out[True, True], out[False, True], docs)
    assert tries[True, True] > 0 and tries[True, False] > 0 and tries[False, True] == 0, tries
