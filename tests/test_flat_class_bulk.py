"""A whole flat walk from a count of a class near its end takes the tokens made of the class only
from a table of them by length (csrc/flat.c ``class_bulk``; ``_core.flat_class_bulk_enable``).

An anchored counted class (o61627's ``^[0-9A-Za-z]{8}-[0-9A-Za-z]{4}-...{12}$``) has a state per
count; from the k-th of n, every byte of the class X leads one configuration on, so an X-only token
lives iff its length is at most n - k, and nothing of it is uncertain.  The walk lists those from the
table and walks only the other tokens of X's first bytes.  The references: every state's entry with
the take on equals it off and plain walks', under hypothesis over classes, counts, anchoring and
small vocabularies (the take wherever it applies, mode 2), and Llama-3 masks along o61627's
document with the take on (mode 1, the default) and off."""

from __future__ import annotations

import json
from contextlib import AbstractContextManager

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import cfgmask
from cfgmask import _core

from .helpers import core_switch, masks_along
from .test_entries import WALKS_ONLY, entries
from .test_listed_reuse import _same

UUID = "^[0-9A-Za-z]{8}-[0-9A-Za-z]{4}-[0-9A-Za-z]{4}-[0-9A-Za-z]{4}-[0-9A-Za-z]{12}$"


def _bulk(mode: int) -> AbstractContextManager[None]:
    return core_switch(_core.flat_class_bulk_enable, mode, 1)


def _entries(g: cfgmask.Grammar, vocab: cfgmask.Vocabulary, mode: int, **kw: object) -> tuple[list, int]:
    """Every state's entry, caches cleared, the take in `mode`; how many walks took it."""
    with _bulk(mode):
        n0 = _core.flat_class_bulk_walks()
        got = entries(cfgmask.compile(g, vocab, **kw))
        return got, _core.flat_class_bulk_walks() - n0


def _valued(pattern: str) -> cfgmask.Grammar:
    value = {"type": "string", "pattern": pattern}
    schema = {"type": "object", "properties": {"id": value}, "required": ["id"]}
    return cfgmask.Grammar.from_json_schema(json.dumps(schema))


FILLER = [bytes([a, b]) for a in b"ghkmpqrstuvwyz" for b in b"glnoz_ "]


def _check(g: cfgmask.Grammar, toks: list[bytes]) -> int:
    toks = list(dict.fromkeys(t for t in [*toks, *FILLER] if t))
    vocab = cfgmask.Vocabulary.from_token_bytes([*toks, b""], stop_token_ids=[len(toks)])
    on, hits = _entries(g, vocab, 2)
    off, none = _entries(g, vocab, 0)
    assert none == 0
    _same(on, off, "the take off")
    _same(on, _entries(g, vocab, 2, _strategy=WALKS_ONLY)[0], "plain walks")
    return hits


ALNUM = [b"1", b"12", b"123", b"a", b"ab", b"abc", b"abcd", b"Ab3", b"12345", b"abcdefgh", b"x9y8z7w6v5"]
DASHED = [b"-", b"1-", b"12-", b"ab-", b"-a", b"-12", b"1234-", b"a-b", b"-1234-"]
CLOSE = [b'"', b'"}', b'1"', b'ab"', b'"x', b'12"}', b"}", b'{"', b'{"id":"', b'":"', b"id"]


def test_uuid_entries_same() -> None:
    """o61627's pattern: every state's entry equal with the take on, off and plain walks'; the
    count positions took it."""
    assert _check(_valued(UUID), [*ALNUM, *DASHED, *CLOSE]) > 0


@given(
    cls=st.sampled_from(["[0-9A-Za-z]", "[0-9a-f]", "[a-c]", "[0-9]", "x", "[^a]"]),
    n=st.integers(1, 9),
    m=st.integers(1, 5),
    anchored=st.booleans(),
    picks=st.lists(st.sampled_from([*ALNUM, *DASHED, *CLOSE, b"xx", b"ccc", b"0"]), min_size=4, max_size=24),
    runs=st.lists(st.text('0123abcxAZ-"', min_size=1, max_size=10), max_size=8),
)
def test_counted_classes_entries_same(
    cls: str, n: int, m: int, anchored: bool, picks: list[bytes], runs: list[str]
) -> None:
    """Hypothesis: a value of two counted segments of a class, anchored or not, on small
    vocabularies of class runs, dashes and closing pieces: every entry equal with the take on,
    off and plain walks'."""
    pattern = f"{cls}{{{n}}}-{cls}{{{m}}}"
    _check(_valued(f"^{pattern}$" if anchored else pattern), [*picks, *(r.encode() for r in runs)])


def o61627_document() -> tuple[cfgmask.Grammar, list[int]]:
    """o61627's two UUID values: the grammar and a document's Llama-3 tokens."""
    quicktok = pytest.importorskip("quicktok")
    enc = quicktok.get_encoding("llama3")
    doc = {
        "PayloadCertificateUUID": "12345678-1234-1234-1234-123456789012",
        "PayloadUUID": "2345abcd-2345-EF45-2345-234567890123",
    }
    tokens = enc.encode(json.dumps(doc, separators=(",", ":")))
    value = {"type": "string", "pattern": UUID}
    schema = {"type": "object", "properties": {"PayloadCertificateUUID": value, "PayloadUUID": value}}
    return cfgmask.Grammar.from_json_schema(json.dumps(schema)), tokens


def test_llama3_o61627_masks_same() -> None:
    """Llama-3 along o61627's document (two UUID values): every mask equal with the take on (the
    default mode) and off, and the count positions took it."""
    g, tokens = o61627_document()
    vocab = cfgmask.Vocabulary.llama3()
    masks = {}
    for mode in (0, 1):
        with _bulk(mode):
            n0 = _core.flat_class_bulk_walks()
            masks[mode] = masks_along(cfgmask.compile(g, vocab), tokens)
            assert (_core.flat_class_bulk_walks() - n0 > 5) == (mode == 1)
    for i, (x, y) in enumerate(zip(masks[0], masks[1], strict=True)):
        assert np.array_equal(x, y), f"mask {i} differs"


def test_llama3_uuid_entries_same() -> None:
    """Llama-3, every state's entry of o61627's value equal with the take on and off."""
    vocab = cfgmask.Vocabulary.llama3()
    g = _valued(UUID)
    on, hits = _entries(g, vocab, 1)
    off, _ = _entries(g, vocab, 0)
    assert hits > 0
    _same(on, off, "the take off")


def _tables() -> int:
    return _core.flat_class_tables()


def _reuse(vocab: cfgmask.Vocabulary, pattern: str, mode: int) -> None:
    """After o61627's value on `vocab` (its tables made, or found), a second grammar of the same
    classes makes no table and takes the X-only entries from them; its entries equal with the take off."""
    _, hits = _entries(_valued(UUID), vocab, mode)
    assert hits > 0
    t1 = _tables()
    g2 = _valued(pattern)
    on, hits2 = _entries(g2, vocab, mode)
    assert hits2 > 0 and _tables() == t1
    _same(on, _entries(g2, vocab, 0)[0], "the take off")


def test_second_grammar_reuses_table() -> None:
    """The class tables are the vocabulary's: on a fresh small vocabulary the first grammar makes
    them, a second of the same classes reuses them."""
    toks = list(dict.fromkeys([*ALNUM, *DASHED, *CLOSE, *FILLER]))
    vocab = cfgmask.Vocabulary.from_token_bytes([*toks, b""], stop_token_ids=[len(toks)])
    t0 = _tables()
    _reuse(vocab, "^[0-9A-Za-z]{3}-[0-9A-Za-z]{5}-[0-9A-Za-z]{2}$", 2)
    assert _tables() > t0


def test_llama3_second_grammar_reuses_table() -> None:
    """Llama-3 (the default mode): another count of [0-9A-Za-z] takes the table made for o61627's value."""
    _reuse(cfgmask.Vocabulary.llama3(), "^[0-9A-Za-z]{6}:[0-9A-Za-z]{4}$", 1)


def test_threads_share_tables() -> None:
    """Threads compiling grammars of one class on one fresh vocabulary at once, each making or
    finding its tables: every entry equal to the take off's, computed alone."""
    from concurrent.futures import ThreadPoolExecutor

    toks = list(dict.fromkeys([*ALNUM, *DASHED, *CLOSE, *FILLER]))
    vocab = cfgmask.Vocabulary.from_token_bytes([*toks, b""], stop_token_ids=[len(toks)])
    pats = [UUID, "^[0-9A-Za-z]{3}-[0-9A-Za-z]{5}$", "^[0-9A-Za-z]{7}$", "[0-9A-Za-z]{2}-[0-9A-Za-z]{9}"]
    grammars = [_valued(p) for p in pats * 2]
    with _bulk(0):
        want = [entries(cfgmask.compile(g, vocab)) for g in grammars]
    with _bulk(2), ThreadPoolExecutor(4) as ex:
        got = list(ex.map(lambda g: entries(cfgmask.compile(g, vocab)), grammars))
    for x, y in zip(got, want, strict=True):
        _same(x, y, "the take off")


def test_llama3_wide_class_makes_no_table() -> None:
    """Llama-3 (the default mode): sp_0's `maxLength: 1` strings count a class (the printable
    bytes) whose first bytes open most of the vocabulary, more than CM_FLAT_CLASS_MAX entries: no
    table for it, whose making would cost more than the walks it saves; mode 2, which takes the
    table wherever it applies, makes one, and the entries are the same in both."""
    vocab = cfgmask.Vocabulary.llama3()
    value = {"type": ["string", "null"], "maxLength": 1}
    schema = {"type": "object", "properties": {"is_organic": value, "is_impression_based": value}}
    g = cfgmask.Grammar.from_json_schema(json.dumps(schema))
    t0 = _tables()
    default, hits = _entries(g, vocab, 1)
    assert hits == 0 and _tables() == t0
    forced, hits = _entries(g, vocab, 2)
    assert hits > 0 and _tables() == t0 + 1
    _same(default, forced, "the take forced")
