"""Counted repetitions cut into blocks: masks against the reference, with and without wraps.

``x{lo,hi}`` past the unroll budget becomes blocks ``B = x^b`` counted by helper rules
(cfgmask/compile/repeats.py).  A token that crosses the end of a block depends on the count; the entry of a
block state keeps those that go on inside the next block (``wrap_bits``) and a mask takes them
whole where the real chart lets the block start again (``Strategy.wrap_repeats``;
csrc/wrap.c).  Here tiny unroll budgets force blocks of a
few units on random bounds and vocabularies, and every mask along random walks must equal the
pure-Python reference's (which unrolls), with the wraps forced on every entry and with them off.

The unrolled positions of a count (a block, or a whole ``x{0,64}`` under the budget) form a
chain; with ``Strategy.count_chains`` their entries come from one shared walk of the chain's
loop by how far each position is from the end (csrc/chains.c).  Every state's entry -- accepted
and uncertain tokens -- must be the one each position's own walk gives: on random counts of
ASCII, multi-byte and escaped units, nested counts, GBNF and regex ``{m,n}``, and maxLength /
minLength JSON strings with Llama-3.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import cfgmask
from cfgmask import _core, ir
from cfgmask.compile.strategy import Strategy

from .helpers import (
    alt,
    chars,
    core_switch,
    grammar,
    lit,
    masks_along,
    ref,
    rep,
    same_block_entries,
    seq,
    walk_agrees,
)
from .reference import ReferenceMatcher
from .strategies import Vocab, grammars, token_walks, vocabularies
from .test_engine_differential import _mask_bools, _vocab

ROOT = Path(__file__).resolve().parent.parent

# x: a letter, or an escape of two bytes, or a two-byte character
UNIT = alt(chars("ac"), lit("\\n"), chars("\u00e9"))
PIECES = (b"a", b"b", b"c", b"ab", b"abca", b"aaaaaaa", b"\\n", b"\\", "\u00e9".encode(), b'"', b'a"', b'"a')


@st.composite
def bounded(draw: st.DrawFn) -> tuple[ir.Grammar, int]:
    lo = draw(st.sampled_from((0, 0, 1, 2, 5)))
    hi = lo + draw(st.integers(4, 40))
    # UNIT weighs 7: blocks of one item, or (16, 24) of two and three, where a minimum of 1 or
    # 2 falls inside the first block (RepeatRewriter.helpers' low_min)
    budget = draw(st.sampled_from((2, 3, 4, 8, 16, 24)))
    tail = draw(st.sampled_from(("quote", "list")))
    body = rep(UNIT, lo, hi)
    if tail == "quote":  # a JSON string's shape
        return grammar(root=seq(lit('"'), body, lit('"'))), budget
    # several bounded strings in a row: the blocks' rule is shared
    return grammar(root=seq(lit('"'), body, lit('"'), rep(seq(lit(","), ref("root")), 0, 1))), budget


def _compile(
    g: ir.Grammar, vocab: cfgmask.Vocabulary, budget: int, wrap: int, chains: bool = True
) -> cfgmask.CompiledGrammar:
    limits = cfgmask.CompileLimits(unroll_budget=budget, unroll_whole=0)
    no_memo = {"mask_memo_min_items": 2**63, "mask_memo_min_candidates": 2**63}
    strategy = Strategy(wrap_repeats=wrap, count_chains=chains, **no_memo)
    return cfgmask.compile(g, vocab, limits=limits, _strategy=strategy)


@given(bounded(), vocabularies(PIECES), st.data())
def test_blocks_masks_equal_reference(case: tuple[ir.Grammar, int], v: Vocab, data: st.DataObject) -> None:
    g, budget = case
    ref_m = ReferenceMatcher(g)
    vocab = _vocab(v)
    wrapped = _compile(g, vocab, budget, wrap=1)  # every block entry with an uncertain token wraps
    plain = _compile(g, vocab, budget, wrap=0, chains=False)  # and every position walks the trie
    walk = data.draw(token_walks(ref_m, v, max_steps=14))
    walk_agrees(
        ref_m,
        v.tokens,
        v.stop_ids,
        v.special_ids,
        walk.token_ids,
        wraps_on=cfgmask.Matcher(wrapped),
        wraps_off=cfgmask.Matcher(plain),
    )


def test_snowplow_strings_wrap_with_llama3() -> None:
    """Snowplow's maxLength strings with Llama-3: the same masks with wraps on and off along the
    schema's valid instances, and far fewer tokens left to check near the ends of blocks."""
    quicktok = __import__("pytest").importorskip("quicktok")
    enc = quicktok.get_encoding("llama3")
    bench = ROOT / "tests" / "corpora" / "jsonschemabench" / "Snowplow.jsonl"
    case = next(json.loads(x) for x in bench.read_text().splitlines() if '"Snowplow/sp_13_Normalized"' in x)
    vocab = cfgmask.Vocabulary.llama3()
    # the whole language: every escape of every character, the widest strings to wrap
    g = cfgmask.Grammar.from_json_schema(case["schema"], whitespace="compact", canonical=False)
    no_memo = {"mask_memo_min_items": 2**63, "mask_memo_min_candidates": 2**63}
    on = cfgmask.compile(g, vocab, _strategy=Strategy(**no_memo))
    off = cfgmask.compile(g, vocab, _strategy=Strategy(wrap_repeats=0, **no_memo))
    a, b = cfgmask.allocate_bitmask(1, vocab.size), cfgmask.allocate_bitmask(1, vocab.size)
    worst = {"on": 0, "off": 0}
    docs = [json.dumps(t["data"], separators=(",", ":")) for t in case["tests"] if t["valid"]]
    assert docs
    for doc in docs:
        m, p = cfgmask.Matcher(on), cfgmask.Matcher(off)
        for t in [*enc.encode_ordinary(doc), None]:
            m.fill_bitmask(a)
            p.fill_bitmask(b)
            assert np.array_equal(a, b), doc
            worst["on"] = max(worst["on"], m._h.mask_stats()["checked"])
            worst["off"] = max(worst["off"], p._h.mask_stats()["checked"])
            if t is None:
                break
            assert m.accept_token(t) and p.accept_token(t)
    assert worst["off"] > 10_000 and worst["on"] * 10 < worst["off"], worst


# ---- counted chains: every position's entry from the chain's shared walk ----


def _entries(
    c: cfgmask.CompiledGrammar, order: list[int] | None = None
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Every state's entry, built in ``order`` (default: by state)."""
    n = c.tables.n_states
    built = {s: c._handle.entry(s) for s in (range(n) if order is None else order)}
    return [built[s] for s in range(n)]


def assert_chain_entries(
    g: cfgmask.Grammar | ir.Grammar,
    vocab: cfgmask.Vocabulary,
    limits: cfgmask.CompileLimits | None = None,
    order: list[int] | None = None,
) -> dict:
    """Every state's entry equal with count_chains on (built in ``order``) and off; the stats of
    the chain build."""
    on = cfgmask.compile(g, vocab, limits=limits, _strategy=Strategy())
    off = cfgmask.compile(g, vocab, limits=limits, _strategy=Strategy(count_chains=False))
    if order is not None:
        assert sorted(order) == list(range(on.tables.n_states))
    for s, (a, b) in enumerate(zip(_entries(on, order), _entries(off), strict=True)):
        assert np.array_equal(a[0], b[0]), f"state {s}: accepted tokens differ"
        assert np.array_equal(a[1], b[1]), f"state {s}: uncertain tokens differ"
    assert off.stats["chain_entries"] == 0
    return on.stats


# a letter, an escape, a two-byte and a three-byte character, a byte-pair unit
UNITS = {
    "letters": chars("ac"),
    "escaped": alt(chars("ac"), lit("\\n"), chars("\u00e9")),
    "wide": alt(chars("a"), chars("\u00e9"), chars("\u20ac")),
    "pair": alt(lit("ab"), chars("c")),
}
CHAIN_PIECES = (
    *PIECES,
    "\u20ac".encode(),
    "\u20ac".encode()[:2],
    "\u20ac".encode()[2:],
    "\u00e9".encode()[:1],
    b'aaaa"',
    "\u00e9a".encode(),
    b"ca",
)


# every rule kept apart: a count in a rule of its own has positions where that rule may end
OUTLINED = {"inline_max_states": 0, "inline_shared_states": 0}


@st.composite
def counted(draw: st.DrawFn) -> tuple[ir.Grammar, cfgmask.CompileLimits]:
    unit = UNITS[draw(st.sampled_from(sorted(UNITS)))]
    lo = draw(st.sampled_from((0, 0, 1, 3)))
    hi = lo + draw(st.integers(1, 30))
    budget = draw(st.sampled_from((2, 3, 8, 1024)))  # 1024: the whole count unrolled, one chain
    shape = draw(st.sampled_from(("quote", "list", "nested", "tail", "follow")))
    outlined = draw(st.booleans())
    limits = cfgmask.CompileLimits(unroll_budget=budget, unroll_whole=0, **(OUTLINED if outlined else {}))
    if shape == "nested":  # a count of counts
        count = rep(rep(unit, 1, draw(st.integers(2, 3))), lo, hi)
    else:
        count = rep(unit, lo, hi)
    rules = {"body": count} if outlined else {}
    body = ref("body") if outlined else count
    if shape == "list":
        return grammar(
            root=seq(lit('"'), body, lit('"'), rep(seq(lit(","), ref("root")), 0, 1)), **rules
        ), limits
    if shape == "tail":  # nothing after the count: its last positions accept
        return grammar(root=seq(lit('"'), body), **rules), limits
    if shape == "follow":  # what may follow the count may go on inside it too
        return grammar(root=seq(lit('"'), body, alt(lit("a"), lit('"'))), **rules), limits
    return grammar(root=seq(lit('"'), body, lit('"')), **rules), limits


@given(counted(), vocabularies(CHAIN_PIECES))
def test_chain_entries_equal_plain_walks(case: tuple[ir.Grammar, cfgmask.CompileLimits], v: Vocab) -> None:
    g, limits = case
    assert_chain_entries(g, _vocab(v), limits)


@given(counted(), vocabularies(CHAIN_PIECES), st.randoms(use_true_random=False))
def test_chain_entries_in_any_order_equal_plain_walks(
    case: tuple[ir.Grammar, cfgmask.CompileLimits], v: Vocab, rnd: random.Random
) -> None:
    """Entries built in a random order: a block's later position is often built before its start
    (a mask never looks the start up: it is predicted), so its chain is analysed from there, and
    a chain's positions find an earlier analysis or make their own; the entries are those of
    plain walks all the same."""
    g, limits = case
    vocab = _vocab(v)
    n = cfgmask.compile(g, vocab, limits=limits).tables.n_states
    order = list(range(n))
    rnd.shuffle(order)
    assert_chain_entries(g, vocab, limits, order)


@given(counted(), vocabularies(CHAIN_PIECES), st.data())
def test_chain_masks_equal_reference(
    case: tuple[ir.Grammar, cfgmask.CompileLimits], v: Vocab, data: st.DataObject
) -> None:
    g, limits = case
    ref_m = ReferenceMatcher(g)
    vocab = _vocab(v)
    no_memo = {"mask_memo_min_items": 2**63, "mask_memo_min_candidates": 2**63}
    m = cfgmask.Matcher(cfgmask.compile(g, vocab, limits=limits, _strategy=Strategy(**no_memo)))
    walk = data.draw(token_walks(ref_m, v, max_steps=12))
    prefix = b""
    for t in [*walk.token_ids, None]:
        assert _mask_bools(m, vocab.size) == ref_m.mask(prefix, v.tokens, v.stop_ids, v.special_ids), prefix
        if t is None:
            break
        assert m.accept_token(t)
        prefix += v.tokens[t] or b""


def test_small_vocabulary_chain_is_shared() -> None:
    """``"`` x{0,30} ``"`` unrolled: the positions after the quote take their entries from one walk
    (a state inside an escape may find a chain of its own)."""
    vocab = _vocab(Vocab([b"a", b"c", b"ac", b"aaaa", b'"', b'a"', "\u00e9".encode(), b"\\n"], (), ()))
    g = grammar(root=seq(lit('"'), rep(UNITS["escaped"], 0, 30), lit('"')))
    with core_switch(_core.repeat_enable, False):  # repeat.c would prove positions alike first
        stats = assert_chain_entries(g, vocab)
    assert stats["chain_walks"] <= 2 and stats["chain_entries"] >= 30, stats


@pytest.mark.parametrize(
    "text",
    [
        'root ::= "<" [a-z\u00e9]{0,40} ">"',
        'root ::= [0-9a-f]{2,24} "." [0-9]{1,12}',
        'root ::= ("ab" | "c"){0,20} "!"',
        'root ::= "<" [a-c]{30} ">"',  # an exact count, then the rule's end: no state past it in the chain
    ],
)
def test_gbnf_counts_chain_entries(text: str) -> None:
    pieces = [b"a", b"b", b"ab", b"abc", b"0", b"19", b"ff", b"<", b">", b"!", b".", b"c>"]
    vocab = _vocab(Vocab(pieces, (), ()))
    with core_switch(_core.repeat_enable, False):  # the chain's own count, not repeat.c's proofs
        stats = assert_chain_entries(cfgmask.Grammar.from_gbnf(text), vocab)
    assert stats["chain_entries"] > (30 if "{30}" in text else 0), stats  # {30}: every position


@pytest.mark.parametrize(
    "text",
    [
        # a count in a rule of its own (too big to copy into both callers): each of its positions
        # may end the rule; what follows it cannot go on inside it
        'root ::= "<" s ">" | "[" s "]"\ns ::= [a-z\u00e9]{0,100}',
        'root ::= "<" s ">" | "[" s "]"\ns ::= [a-z]{3,100}',  # below the minimum it may not end
        # what follows may go on inside: the positions walk as before (same entries either way)
        'root ::= "<" s [a-c] | "[" s "]"\ns ::= [a-z]{0,100}',
    ],
    ids=["ends", "min", "follows"],
)
def test_gbnf_count_in_own_rule_chain_entries(text: str) -> None:
    pieces = [
        b"a",
        b"b",
        b"ab",
        b"abc",
        b"zz",
        b"<",
        b">",
        b"[",
        b"]",
        b"c>",
        b"a]",
        b"\xc3",
        b"\xa9",
        b"\xc3\xa9a",
    ]
    vocab = _vocab(Vocab(pieces, (), ()))
    g = cfgmask.Grammar.from_gbnf(text)
    stats = assert_chain_entries(g, vocab)
    if "[a-c]" not in text:
        assert stats["chain_entries"] >= 100, stats


@pytest.mark.parametrize(
    ("text", "chained"),
    [
        ('root ::= "-"? [0-9] "!"', False),  # a number's sign: two positions, left to plain walks
        ('root ::= "<" [a-c]{0,1} ">"', False),
        ('root ::= "<" [a-c]{0,2} ">"', True),  # three positions: one walk serves them
        ('root ::= "<" [a-c]{1,2} ">"', True),
    ],
)
def test_two_positions_are_no_chain(text: str, chained: bool) -> None:
    """An ``x?`` is a chain of two positions whose shared walk would cost what the first
    position's own walk does: it is left to plain walks (the same entries either way)."""
    pieces = [b"a", b"b", b"ab", b"abc", b"-", b"-1", b"1", b"<", b">", b"!", b"c>", b"a!"]
    stats = assert_chain_entries(cfgmask.Grammar.from_gbnf(text), _vocab(Vocab(pieces, (), ())))
    assert (stats["chain_entries"] > 0) == chained, stats


def test_regex_count_chain_entries() -> None:
    vocab = _vocab(Vocab([b"a", b"b", b"ab", b"-", b"ab-", b"12", b"1", b"a1"], (), ()))
    stats = assert_chain_entries(cfgmask.Grammar.from_regex(r"[ab]{3,50}-[0-9]{0,20}"), vocab)
    assert stats["chain_entries"] > 0, stats


# two properties share the string rule of a long maxLength: its positions may end it
SHARED_LONG = {"type": "string", "maxLength": 400}
LLAMA_SCHEMAS = [
    ({"type": "string", "maxLength": 64}, True),
    ({"type": "string", "minLength": 12, "maxLength": 24}, True),  # positions below the minimum too
    ({"type": "string", "minLength": 4, "maxLength": 30}, False),  # every escape of every character
    ({"type": "string", "maxLength": 400}, True),  # blocks (past CompileLimits.unroll_whole)
    ({"type": "string", "maxLength": 255}, True),  # one chain (under unroll_whole)
    (
        {
            "type": "object",
            "properties": {
                "a": {"type": "string", "maxLength": 12},
                "b": {"type": "string", "maxLength": 40},
            },
            "required": ["a", "b"],
        },
        True,
    ),
    (
        {
            "type": "object",
            "properties": {"a": SHARED_LONG, "b": {**SHARED_LONG, "type": ["string", "null"]}},
            "required": ["a"],
        },
        True,
    ),
]


@pytest.mark.parametrize(
    ("schema", "canonical"),
    LLAMA_SCHEMAS,
    ids=["max64", "min12", "full", "blocks", "whole", "object", "shared"],
)
def test_llama3_string_lengths_chain_entries(schema: dict, canonical: bool) -> None:
    vocab = cfgmask.Vocabulary.llama3()
    g = cfgmask.Grammar.from_json_schema(schema, canonical=canonical)
    stats = assert_chain_entries(g, vocab)
    assert stats["chain_entries"] >= 10, stats


@pytest.mark.parametrize(
    "schema",
    [{"type": "string", "maxLength": 400}, {"type": "string", "minLength": 1, "maxLength": 400}, SHARED_LONG],
)
def test_llama3_block_entries_later_positions_first(schema: dict) -> None:
    """Entries built from the last state down, as a document builds a block's (its start is
    predicted, never looked up): each block's chain is analysed from a later position, and every
    entry is still a plain walk's."""
    vocab = cfgmask.Vocabulary.llama3()
    g = cfgmask.Grammar.from_json_schema({"type": "object", "properties": {"a": schema, "b": schema}})
    n = cfgmask.compile(g, vocab).tables.n_states
    stats = assert_chain_entries(g, vocab, order=list(reversed(range(n))))
    assert stats["chain_entries"] >= 10, stats


def test_llama3_number_chains_pinned_with_the_vocabulary() -> None:
    """The digits of a number and of an integer (counts bounding the precision and the int64
    range) are chains whose walks the vocabulary keeps through ``clear_caches()``: a new
    schema's numbers take them from there, with entries still those of plain walks."""
    quicktok = pytest.importorskip("quicktok")
    enc = quicktok.get_encoding("llama3")
    vocab = cfgmask.Vocabulary.llama3()
    vocab._handle()
    cfgmask.clear_caches()
    # optional properties: each value ends a rule of its own, so its digits are no calls' states
    schema = {
        "type": "object",
        "properties": {"a": {"type": "string"}, "x": {"type": "number"}, "n": {"type": "integer"}},
    }
    c = cfgmask.compile(cfgmask.Grammar.from_json_schema(schema), vocab)
    m = cfgmask.Matcher(c)
    mask = cfgmask.allocate_bitmask(1, vocab.size)
    for t in [*enc.encode_ordinary('{"x": 1234.5678e12, "n": 98765}'), None]:
        m.fill_bitmask(mask)
        if t is None:
            break
        assert m.accept_token(t)
    stats = c.stats
    assert stats["chain_walks"] >= 3 and stats["vocab_chain_walks"] == stats["chain_walks"], stats
    assert_chain_entries(cfgmask.Grammar.from_json_schema(schema), vocab)


def _same_masks_along(
    x: cfgmask.CompiledGrammar, y: cfgmask.CompiledGrammar, tokens: list[int]
) -> tuple[cfgmask.Matcher, cfgmask.Matcher]:
    """The masks of ``x`` and ``y`` equal before every token of ``tokens`` and after the last,
    every token accepted by both; the two matchers at the end."""
    size = x.vocab.size
    a, b = cfgmask.allocate_bitmask(1, size), cfgmask.allocate_bitmask(1, size)
    m, p = cfgmask.Matcher(x), cfgmask.Matcher(y)
    for t in [*tokens, None]:
        m.fill_bitmask(a)
        p.fill_bitmask(b)
        assert np.array_equal(a, b)
        if t is None:
            break
        assert m.accept_token(t) and p.accept_token(t)
    return m, p


def test_llama3_block_wraps_from_chains() -> None:
    """A maxLength-400 string is cut into blocks: their entries' wraps come from the chain (one
    bit test a token) with count_chains on, from running each token through the block without.
    The masks along a long document are the same."""
    quicktok = pytest.importorskip("quicktok")
    enc = quicktok.get_encoding("llama3")
    vocab = cfgmask.Vocabulary.llama3()
    g = cfgmask.Grammar.from_json_schema({"type": "string", "maxLength": 400})
    no_memo = {"mask_memo_min_items": 2**63, "mask_memo_min_candidates": 2**63}
    on = cfgmask.compile(g, vocab, _strategy=Strategy(**no_memo))
    off = cfgmask.compile(g, vocab, _strategy=Strategy(count_chains=False, **no_memo))
    text = ("The quick brown fox jumps over the lazy dog, caf\u00e9 \u20ac5. " * 8)[:400]
    _same_masks_along(on, off, enc.encode_ordinary(json.dumps(text, ensure_ascii=False)))
    assert on.stats["chain_entries"] > 20, on.stats


@given(grammars(), st.sampled_from((1, 2, 8, 64, 1024)))
def test_compiled_clean_equals_the_python_walk(g: ir.Grammar, budget: int) -> None:
    """``RepeatRewriter.clean`` (compiled, ``_dag.Clean``) answers as its Python walk
    (``clean_py``) on every interned node, and ``run`` rewrites the same rules into the same
    bodies as a rewriter that sends every rule through ``expr``."""
    from cfgmask.compile import repeats
    from cfgmask.compile.encode import Session

    limits = cfgmask.CompileLimits(unroll_budget=budget, unroll_whole=0)
    sess = Session()
    sess.cids(g.rules)
    compiled = repeats.RepeatRewriter(g.rules, limits, sess)
    python = repeats.RepeatRewriter(g.rules, limits, sess)
    for cid in range(len(sess.interner.keys)):
        assert compiled.clean(cid) == python.clean_py(cid), sess.interner.keys[cid]
    every = repeats.RepeatRewriter(g.rules, limits, sess)
    every.compiled = False  # the loop over every rule, each through expr and clean_py
    try:
        want = every.run()
    except (cfgmask.GrammarError, cfgmask.LimitError) as e:
        with pytest.raises(type(e)):
            repeats.RepeatRewriter(g.rules, limits, sess).run()
        return
    assert repeats.RepeatRewriter(g.rules, limits, sess).run() == want


@given(grammars(), st.sampled_from((1, 2, 8, 64, 1024)))
def test_compiled_clean_sizes_reference_free_items_itself(g: ir.Grammar, budget: int) -> None:
    """``_dag.Clean`` sizes a repeated item that refers to no rule from the interner's sizes
    (the same whatever the rules' sizes), asking its callback only of the others: the same
    answers as ``clean_py``."""
    from cfgmask.compile import _dag, repeats
    from cfgmask.compile.encode import Session
    from cfgmask.compile.limits import whole_budget

    limits = cfgmask.CompileLimits(unroll_budget=budget, unroll_whole=0)
    sess = Session()
    sess.cids(g.rules)
    python = repeats.RepeatRewriter(g.rules, limits, sess)
    asked = []

    def size(item: int) -> int:
        asked.append(item)
        return python._item_size(item)

    clean = _dag.Clean(sess.interner, {}, size, whole_budget(limits))
    for cid in range(len(sess.interner.keys)):
        try:
            got = clean(cid)
        except _dag.Deep:
            continue
        assert got == python.clean_py(cid), sess.interner.keys[cid]
    assert all(sess.interner.refs[item] for item in asked)


@pytest.mark.parametrize(("max_length", "whole"), [(255, True), (400, False)])
def test_unroll_whole_keeps_a_long_count_one_chain(max_length: int, whole: bool) -> None:
    """``CompileLimits.unroll_whole``: a count whose whole unrolled size is under it (a
    maxLength-255 string) is one chain, a bigger one (400) is cut into blocks of
    ``unroll_budget`` as before; either way the masks along a long document equal those of the
    blocks that ``unroll_whole=0`` makes."""
    quicktok = pytest.importorskip("quicktok")
    enc = quicktok.get_encoding("llama3")
    vocab = cfgmask.Vocabulary.llama3()
    g = cfgmask.Grammar.from_json_schema({"type": "string", "minLength": 1, "maxLength": max_length})
    default = cfgmask.compile(g, vocab)
    blocks = cfgmask.compile(g, vocab, limits=cfgmask.CompileLimits(unroll_whole=0))
    assert any("#rep" in n for n in blocks.tables.rule_names)
    assert any("#rep" in n for n in default.tables.rule_names) is not whole
    text = ('Caf\u00e9 \u20ac5, the quick brown fox \\ jumps "over" the lazy dog. ' * 9)[:max_length]
    m, p = _same_masks_along(default, blocks, enc.encode_ordinary(json.dumps(text, ensure_ascii=False)))
    assert m.is_accepting() and p.is_accepting()


def test_llama3_whole_string_chains_pinned_with_the_vocabulary() -> None:
    """A string kept one chain by ``unroll_whole`` (with a minimum or none) takes its chain's walk
    from those the vocabulary keeps through ``clear_caches()``, not a whole walk of its own."""
    vocab = cfgmask.Vocabulary.llama3()
    vocab._handle()
    mask = cfgmask.allocate_bitmask(1, vocab.size)
    for lo, hi in ((0, 255), (1, 255), (2, 200), (1, 120)):
        cfgmask.clear_caches()
        schema = {"type": "string", "minLength": lo, "maxLength": hi}
        c = cfgmask.compile(cfgmask.Grammar.from_json_schema(schema), vocab)
        assert not any("#rep" in n for n in c.tables.rule_names)
        m = cfgmask.Matcher(c)
        assert m.accept_bytes(b'"')
        m.fill_bitmask(mask)
        stats = c.stats
        assert stats["chain_walks"] >= 1 and stats["vocab_chain_walks"] == stats["chain_walks"], (
            lo,
            hi,
            stats,
        )


def _block_entries(
    compiled: cfgmask.CompiledGrammar, direct: bool
) -> list[tuple[np.ndarray, np.ndarray, tuple[np.ndarray, np.ndarray] | None]]:
    """Every state's entry and its wrap split, built with the split made as a wrapping block
    position's entry is assembled (``direct``) or afterwards a token at a time."""

    _core.chain_wrap_direct_enable(direct)
    try:
        h = compiled._handle
        return [(*h.entry(s), h.entry_wrap(s)) for s in range(compiled.tables.n_states)]
    finally:
        _core.chain_wrap_direct_enable(True)


def _assert_same_block_entries(
    g: ir.Grammar | cfgmask.Grammar, vocab: cfgmask.Vocabulary, **kw: object
) -> int:
    """The entries and wrap splits of every state equal with the split made as the entry is
    assembled (csrc/chains.c, push_wrapping) and made afterwards (cm_chain_wrap); the entries
    equal to those of plain walks (no chains, no wraps); how many entries took the new path."""
    from cfgmask import _core

    no_memo = {"mask_memo_min_items": 2**63, "mask_memo_min_candidates": 2**63}
    limits = kw.pop("limits", None)
    # (push_wrapping alone takes the dead rests out of a split too wide to filter: test_split_dead)
    with core_switch(_core.chain_split_dead_enable, False):
        hits = _core.chain_wrap_direct_hits()
        on = _block_entries(
            cfgmask.compile(g, vocab, limits=limits, _strategy=Strategy(**kw, **no_memo)), True
        )
        taken = _core.chain_wrap_direct_hits() - hits
        off = _block_entries(
            cfgmask.compile(g, vocab, limits=limits, _strategy=Strategy(**kw, **no_memo)), False
        )
        walk = Strategy(count_chains=False, share_loop_walks=False, wrap_repeats=0, **no_memo)
        plain = _block_entries(cfgmask.compile(g, vocab, limits=limits, _strategy=walk), False)
    same_block_entries(on, off, plain, "split afterwards")
    return taken


@given(bounded(), vocabularies(PIECES), st.sampled_from((0, 1)))
def test_block_wrap_split_with_the_entry_same_entries(
    case: tuple[ir.Grammar, int], v: Vocab, wrap: int
) -> None:
    """Blocks of random counts and vocabularies: a wrapping block position's entry split as
    it is assembled from the chain's bitsets equals the entry of a plain walk, and its split
    the one made afterwards; with wraps forced on every block entry (1) and by default."""
    g, budget = case
    kw: dict = {"wrap_repeats": 1} if wrap else {}
    _assert_same_block_entries(
        g, _vocab(v), limits=cfgmask.CompileLimits(unroll_budget=budget, unroll_whole=0), **kw
    )


@pytest.mark.parametrize("max_length", [400, 1000])
def test_llama3_block_wrap_split_with_the_entry(max_length: int) -> None:
    """maxLength strings cut into blocks with Llama-3 (near a block's end 10^5 tokens wrap):
    the entries split as they are assembled, equal to plain walks' and to the split made
    afterwards, and the masks along a document that fills the string (its last block cannot
    repeat) the same either way."""
    quicktok = pytest.importorskip("quicktok")
    from cfgmask import _core

    enc = quicktok.get_encoding("llama3")
    vocab = cfgmask.Vocabulary.llama3()
    g = cfgmask.Grammar.from_json_schema({"type": "string", "maxLength": max_length})
    assert _assert_same_block_entries(g, vocab) > 0
    no_memo = {"mask_memo_min_items": 2**63, "mask_memo_min_candidates": 2**63}
    text = ("The quick brown fox jumps over the lazy dog, caf\u00e9 \u20ac5. " * 20)[:max_length]
    tokens = enc.encode_ordinary(json.dumps(text, ensure_ascii=False))
    masks = []
    for direct in (True, False):  # (entries are built as the masks are filled)
        _core.chain_wrap_direct_enable(direct)
        try:
            c = cfgmask.compile(g, vocab, _strategy=Strategy(**no_memo))
            masks.append(masks_along(c, tokens, final=True))
        finally:
            _core.chain_wrap_direct_enable(True)
    assert all(np.array_equal(a, b) for a, b in zip(*masks, strict=True))
