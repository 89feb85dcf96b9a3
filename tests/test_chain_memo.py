"""Chain analyses kept by their rows (csrc/chains.c's memos, filed by the vocabulary).

A counted chain's analysis (the shift, the orbits, the model checked on every state, the form) is
kept with the chain's rows, and a chain met later -- in the same grammar or another compiled for
the same vocabulary, its states numbered otherwise -- whose rows are the same up to renaming takes
it instead of analysing again.  The references: every state's entry with the memos on equal to
the memos off (``_core.chain_memo_enable(False)``: every chain analysed) and to plain walks
(``count_chains=False``); and the memos used exactly where the rows are equal (a chain one
transition apart from a kept one analyses its own).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import cfgmask
from cfgmask import _core, ir
from cfgmask.compile.strategy import Strategy

from .helpers import alt, chars, core_switch, grammar, lit, masks_along, ref, rep, seq
from .strategies import Vocab, vocabularies
from .test_engine_differential import _vocab
from .test_repeats import CHAIN_PIECES, UNITS, _entries

CORPORA = Path(__file__).parent / "corpora"
WHOLE = cfgmask.CompileLimits(unroll_budget=1024, unroll_whole=0)


def _memos(on: bool) -> AbstractContextManager[None]:
    return core_switch(_core.chain_memo_enable, on)


def _taken() -> int:
    """Chain analyses taken from memos: whole chains' and first positions' (prefix memos)."""
    return _core.chain_memo_hits() + _core.chain_prefix_hits()


def _all_entries(
    g: ir.Grammar, vocab: cfgmask.Vocabulary, **strategy: bool
) -> list[tuple[np.ndarray, np.ndarray]]:
    return _entries(cfgmask.compile(g, vocab, limits=WHOLE, _strategy=Strategy(**strategy)))


def _assert_same(a: list[tuple[np.ndarray, np.ndarray]], b: list[tuple[np.ndarray, np.ndarray]]) -> None:
    assert len(a) == len(b)
    for s, (x, y) in enumerate(zip(a, b, strict=True)):
        assert np.array_equal(x[0], y[0]), f"state {s}: accepted tokens differ"
        assert np.array_equal(x[1], y[1]), f"state {s}: uncertain tokens differ"


def _string(unit: ir.Expr, lo: int, hi: int) -> ir.Expr:
    return seq(lit('"'), rep(unit, lo, hi), lit('"'))


def _two_values(unit: ir.Expr, lo: int, hi: int, prefix: str) -> ir.Grammar:
    """``prefix`` then two strings of the same count: the second's chain repeats the first's
    rows under other state ids (and ``prefix`` moves both in another grammar)."""
    return grammar(root=seq(lit(prefix), _string(unit, lo, hi), lit(","), _string(unit, lo, hi)))


def _entries_after(
    a: ir.Grammar, b: ir.Grammar, vocab: cfgmask.Vocabulary
) -> list[tuple[np.ndarray, np.ndarray]]:
    """b's entries with a's memos kept before, which b takes none of: it takes as many memos as
    alone (its own, of a chain it meets twice)."""
    with _memos(True):
        hits = _core.chain_memo_hits()
        _all_entries(b, vocab)
        alone = _core.chain_memo_hits() - hits
    with _memos(True):
        _all_entries(a, vocab)
        hits = _core.chain_memo_hits()
        on = _all_entries(b, vocab)
        assert _core.chain_memo_hits() - hits == alone
    return on


VOCAB = Vocab(
    [
        b"a",
        b"c",
        b"ac",
        b"aaaa",
        b'"',
        b'a"',
        b",",
        b'",',
        b'","',
        "\u00e9".encode(),
        b"\\n",
        b"{",
        "\u20ac".encode(),
    ],
    (),
    (),
)


@pytest.mark.parametrize("unit", sorted(UNITS))
@pytest.mark.parametrize(("lo", "hi"), [(0, 20), (1, 20), (3, 40), (0, 64)])
def test_memo_entries_equal_analysed_and_plain(unit: str, lo: int, hi: int) -> None:
    """Two grammars, each with the same count twice: with the memos on, the chains of the second
    (its states numbered otherwise) take the analysis from the first's memos, and every state's
    entry is the one with every chain analysed and a plain walk's."""
    vocab = _vocab(VOCAB)
    first, second = _two_values(UNITS[unit], lo, hi, ""), _two_values(UNITS[unit], lo, hi, "{{")
    with _memos(False):
        ref_first, ref_second = _all_entries(first, vocab), _all_entries(second, vocab)
    plain_first = _all_entries(first, vocab, count_chains=False)
    plain_second = _all_entries(second, vocab, count_chains=False)
    with _memos(True):
        hits = _taken()
        on_first = _all_entries(first, vocab)
        between = _taken()
        on_second = _all_entries(second, vocab)
        after = _taken()
    _assert_same(on_first, ref_first)
    _assert_same(on_second, ref_second)
    _assert_same(on_first, plain_first)
    _assert_same(on_second, plain_second)
    assert after >= between >= hits
    if unit in ("letters", "escaped"):  # (the others' chains may be analysed from a later position)
        assert after > between, (hits, between, after)


@pytest.mark.parametrize(
    ("kept", "other"),
    [
        ((3, 30), (2, 30)),  # the closing quote alive from one position earlier
        ((0, 30), (0, 31)),  # one position more
        ((1, 30), (0, 30)),  # the quote alive at the first position
    ],
)
def test_memo_not_taken_one_transition_apart(kept: tuple[int, int], other: tuple[int, int]) -> None:
    """A chain whose rows differ from a kept one's in one transition analyses its own, though it
    is looked for among the same memos (the hint, its main byte's steps, may be equal): its
    entries are those of plain walks."""
    vocab = _vocab(VOCAB)
    unit = UNITS["escaped"]
    a = grammar(root=_string(unit, *kept))
    b = grammar(root=seq(lit("{"), _string(unit, *other)))
    _assert_same(_entries_after(a, b, vocab), _all_entries(b, vocab, count_chains=False))


def test_memo_not_taken_one_class_apart() -> None:
    """The same count of a|c and of [a-c]: where the kept chain's byte b is dead, the other's
    leads on (its rows differ in one byte); it does not take the kept analysis."""
    vocab = _vocab(Vocab([b"a", b"b", b"c", b"ab", b"bc", b'"', b'b"'], (), ()))
    a = grammar(root=_string(alt(lit("a"), lit("c")), 0, 25))
    b = grammar(root=seq(lit("{"), _string(chars("ac"), 0, 25)))  # the range a-c
    _assert_same(_entries_after(a, b, vocab), _all_entries(b, vocab, count_chains=False))


def test_memo_not_taken_one_class_apart_reversed() -> None:
    """The kept chain [a-c] (one class of the memo's against two of ours: a row's check skips a
    pair whose targets are the previous pair's, here only the first is): where ours has b dead
    the memo's leads on, so it analyses its own, with plain walks' entries."""
    vocab = _vocab(Vocab([b"a", b"b", b"c", b"ab", b"bc", b'"', b'b"'], (), ()))
    a = grammar(root=_string(chars("ac"), 0, 25))
    b = grammar(root=seq(lit("{"), _string(alt(lit("a"), lit("c")), 0, 25)))
    _assert_same(_entries_after(a, b, vocab), _all_entries(b, vocab, count_chains=False))


@st.composite
def repeated(draw: st.DrawFn) -> tuple[ir.Grammar, ir.Grammar]:
    """Two grammars sharing a count (of a letter, an escape, multi-byte characters, a byte
    pair), each with other rules around it, the count inline or a rule of its own."""
    unit = UNITS[draw(st.sampled_from(sorted(UNITS)))]
    lo = draw(st.sampled_from((0, 0, 1, 3)))
    hi = lo + draw(st.integers(16, 40))
    body = rep(unit, lo, hi)

    def one(prefix: str) -> ir.Grammar:
        if draw(st.booleans()):
            return grammar(
                root=seq(lit(prefix), lit('"'), ref("body"), lit('"'), alt(lit(","), lit("a"))), body=body
            )
        return grammar(root=seq(lit(prefix), lit('"'), body, lit('"'), rep(lit(","), 0, 1)))

    return one(draw(st.sampled_from(("", "{", "{{")))), one(draw(st.sampled_from(("", "a", ",,"))))


@given(repeated(), vocabularies(CHAIN_PIECES))
def test_memo_entries_equal_plain_walks(case: tuple[ir.Grammar, ir.Grammar], v: Vocab) -> None:
    """Hypothesis grammars compiled one after the other for one vocabulary (the second may take
    the first's memos): every entry with the memos on equals the memos off and plain walks."""
    vocab = _vocab(v)
    with _memos(False):
        ref = [_all_entries(g, vocab) for g in case]
    with _memos(True):
        on = [_all_entries(g, vocab) for g in case]
    for g, x, y in zip(case, on, ref, strict=True):
        _assert_same(x, y)
        _assert_same(x, _all_entries(g, vocab, count_chains=False))


def test_llama3_long_string_takes_the_pinned_memo() -> None:
    """A maxLength-255 string with a minimum (its chain's memo made with the vocabulary's pins)
    in a new schema after ``clear_caches()``: its analysis comes from the memo and every mask
    along a value is the one with every chain analysed."""
    vocab = cfgmask.Vocabulary.llama3()
    vocab._handle()
    schema = {
        "type": "object",
        "properties": {"n": {"type": "string", "minLength": 1, "maxLength": 255}},
        "required": ["n"],
    }
    quicktok = pytest.importorskip("quicktok")
    tokens = quicktok.get_encoding("llama3").encode_ordinary(
        '{"n":"Example Data Table is a long text \u00e9 here \u20ac"}'
    )
    masks = {}
    for on in (False, True):
        with _memos(on):
            cfgmask.clear_caches()  # no entry kept from the other pass: this one analyses its chain
            hits = _core.chain_memo_hits()
            c = cfgmask.compile(cfgmask.Grammar.from_json_schema(schema), vocab)
            masks[on] = masks_along(c, tokens, final=True)
            assert (_core.chain_memo_hits() > hits) == on
    assert all(np.array_equal(x, y) for x, y in zip(masks[False], masks[True], strict=True))


def _replay(c: cfgmask.CompiledGrammar, docs: list[list[int]]) -> list[np.ndarray]:
    """Every mask along each document's tokens (up to one the grammar rejects) on fresh matchers."""
    out = []
    mask = cfgmask.allocate_bitmask(1, c.vocab.size)
    for tokens in docs:
        m = cfgmask.Matcher(c)
        for t in [*tokens, None]:
            m.fill_bitmask(mask)
            out.append(mask.copy())
            if t is None or not m.accept_token(t):
                break
    return out


def _assert_references(gs: list[ir.Grammar], vocab: cfgmask.Vocabulary, on: list, *others: list) -> None:
    """Each grammar's entries in `on` equal its entries in each of `others`, with every chain
    analysed (memos off) and by plain walks."""
    with _memos(False):
        ref = [_all_entries(g, vocab) for g in gs]
    for g, x, *ys in zip(gs, on, *others, ref, strict=True):
        for y in ys:
            _assert_same(x, y)
        _assert_same(x, _all_entries(g, vocab, count_chains=False))


def _assert_same_masks(masks: dict[str, list[np.ndarray]]) -> None:
    """The masks with memos off and on equal the plain walks'."""
    for mode in ("off", "on"):
        assert len(masks[mode]) == len(masks["plain"])
        for i, (x, y) in enumerate(zip(masks["plain"], masks[mode], strict=True)):
            assert np.array_equal(x, y), f"{mode}: mask {i} differs"


@pytest.mark.parametrize("hi", [40, 100, 140, 145, 150, 200, 255, 256])
@pytest.mark.parametrize("shape", ["one", "nullable", "two"])
def test_llama3_first_positions_from_the_pinned_rows(hi: int, shape: str) -> None:
    """A string of a bound no memo was kept for: longer than a token (Llama-3: 128 bytes), its
    first positions are checked against the first rows of the pinned maxLength-255 string (a
    prefix memo); shorter, its chain against a pinned longer one's later positions (the 140 one
    copied into its caller, the 255 one a rule of its own); not analysed whole.  Every mask
    along values of many lengths (past the positions kept from the check, up to and past the
    bound, escapes and multi-byte characters) equals the plain walks' (``count_chains=False``)
    and every chain analysed (memos off)."""
    vocab = cfgmask.Vocabulary.llama3()
    vocab._handle()
    quicktok = pytest.importorskip("quicktok")
    enc = quicktok.get_encoding("llama3")
    string = {"type": ["string", "null"] if shape == "nullable" else "string", "maxLength": hi}
    props = {"n": string, "m": {"type": "string", "maxLength": hi - 1}} if shape == "two" else {"n": string}
    schema = {"type": "object", "properties": props, "required": sorted(props)}
    texts = ["", "x", "Example Data Table is a long text \u00e9 here \u20ac", 'ab\\u00e9\\"c\\n' * 12]
    texts += ["word " * (k // 5) + "y" * (k % 5) for k in (40, hi - 20, hi - 1, hi, hi + 3)]
    docs = ["{" + ",".join(f'"{k}":"{t}"' for k in sorted(props)) + "}" for t in texts]
    masks: dict[str, list[np.ndarray]] = {}
    for mode in ("plain", "off", "on"):
        with _memos(mode != "off"):
            hits, prefix = _taken(), _core.chain_prefix_hits()
            strategy = Strategy(count_chains=mode != "plain")
            c = cfgmask.compile(cfgmask.Grammar.from_json_schema(schema), vocab, _strategy=strategy)
            masks[mode] = _replay(c, [enc.encode_ordinary(doc) for doc in docs])
            if mode == "on":  # (two strings in one object: their chains' rows are not the pinned one's)
                assert _taken() > hits or shape == "two"
                assert _core.chain_prefix_hits() > prefix or shape == "two" or hi == 140  # (140: pinned)
            else:
                assert _taken() == hits
    _assert_same_masks(masks)


def _start_from_pins(schema: dict, prefix: bytes, docs: list[str], taken: Callable[[], int], n: int) -> None:
    """The first mask after ``prefix`` takes ``n`` analyses from the pins (counted by ``taken``),
    and every mask along ``docs`` equals the plain walks' and every chain analysed (memos off)."""
    vocab = cfgmask.Vocabulary.llama3()
    vocab._handle()
    quicktok = pytest.importorskip("quicktok")
    enc = quicktok.get_encoding("llama3")
    masks: dict[str, list[np.ndarray]] = {}
    for mode in ("plain", "off", "on"):
        with _memos(mode != "off"):
            strategy = Strategy(count_chains=mode != "plain")
            c = cfgmask.compile(cfgmask.Grammar.from_json_schema(schema), vocab, _strategy=strategy)
            if mode == "on":
                m = cfgmask.Matcher(c)
                assert m.accept_bytes(prefix)
                hits = taken()
                m.fill_bitmask(cfgmask.allocate_bitmask(1, vocab.size))
                assert taken() - hits == n
            masks[mode] = _replay(c, [enc.encode_ordinary(doc) for doc in docs])
    _assert_same_masks(masks)


def test_llama3_blocked_string_start_from_the_pin() -> None:
    """Snowplow sp_0's first property, a nullable ``maxLength`` 1024 string cut into blocks whose
    count is a rule of its own (its first position may end it): that position (the first block's
    call left out, the inline tail) takes both chains' analyses pinned with the vocabulary instead
    of analysing the tail's, and every mask along values across block ends (escapes, multi-byte
    characters) equals the plain walks' and every chain analysed (memos off)."""
    rows = (CORPORA / "jsonschemabench" / "Snowplow.jsonl").read_text().splitlines()
    schema = next(r["schema"] for r in map(json.loads, rows) if r["id"].startswith("Snowplow/sp_0_"))
    texts = ["", "x", 'ab\\u00e9\\"c\\n' * 9, "Example \u00e9 \u20ac " * 12]
    texts += ["word " * (k // 5) + "y" * (k % 5) for k in (44, 45, 46, 90, 300)]
    docs = [f'{{"adgroup_name":"{t}","app_id":"a1"}}' for t in texts]
    _start_from_pins(schema, b'{"adgroup_name":"', docs, _core.chain_memo_hits, 2)


@pytest.mark.parametrize("hi", [50, 100, 128])
def test_llama3_shared_string_rule_from_the_pin(hi: int) -> None:
    """A bounded string's value rule shared by two properties (quotes and all: Snowplow's
    ``maxLength`` 128 strings): its first position takes its chain's analysis from the pinned
    128 one (the same rows, or a later position's on), not analysed or walked again, and every
    mask along values of many lengths equals the plain walks' and every chain analysed."""
    string = {"type": "string", "maxLength": hi}
    schema = {"type": "object", "properties": {"p": string, "q": string}, "required": ["p"]}
    texts = ["", "x", "Example \u00e9 \u20ac " * 3, 'ab\\"c\\n' * 4]
    texts += ["word " * (k // 5) + "y" * (k % 5) for k in (hi - 20, hi - 1, hi, hi + 3)]
    docs = [f'{{"p":"{t}","q":"{t[:9]}"}}' for t in texts]
    _start_from_pins(schema, b'{"p":"', docs, _taken, 1)


def test_llama3_long_string_before_an_array_from_the_pin() -> None:
    """A long string (cut into blocks) before a property whose value is an array (o9813's
    ``description``): the state after its closing quote is not the pinned strings', so its first
    position's inline tail takes the analysis pinned for that shape; every mask along values
    across block ends equals the plain walks' and every chain analysed."""
    items = {"type": "object", "properties": {"name": {"type": "string"}}}
    props = {"d": {"type": "string", "maxLength": 32767}, "c": {"type": "array", "items": items}}
    schema = {"type": "object", "properties": props, "required": ["d"]}
    texts = ["", "x", 'ab\\"c\\n' * 9, "Example \u00e9 \u20ac " * 12]
    texts += ["word " * (k // 5) + "y" * (k % 5) for k in (44, 45, 46, 90, 300)]
    docs = [f'{{"d":"{t}","c":[{{"name":"n"}}]}}' for t in texts]
    _start_from_pins(schema, b'{"d":"', docs, _core.chain_memo_hits, 2)
