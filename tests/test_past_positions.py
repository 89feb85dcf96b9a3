"""Chain positions past every need take an earlier position's walk (csrc/chains.c, assemble_past).

A counted chain's position of budget B reads B in its level of the walk's bitsets, its exits, its
end nodes and its acc points; above the chain's threshold (every need, node budget, level and
exit / acc point shift) none of them changes, so every such position of chains of one walk, one
rule and one set of labels accepting from their start gets the same entry walk.  The first keeps
its uncertain list, the later ones copy it.  ``_core.chain_past_memo_enable(False)`` assembles
each position (the reference); every state's entry must be the same either way and equal to a
plain walk's, the masks the pure-Python reference's, and the counter proves the copies ran.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import cfgmask
from cfgmask import _core, ir
from cfgmask.compile.strategy import Strategy

from .helpers import core_switch, grammar, lit, masks_along, ref, rep, seq, walk_agrees
from .reference import ReferenceMatcher
from .strategies import Vocab, token_walks, vocabularies
from .test_engine_differential import _vocab
from .test_repeats import PIECES, UNIT
from .test_wrap_ranges import LONG, NO_MEMO

ROOT = Path(__file__).resolve().parent.parent
Entry = tuple[np.ndarray, np.ndarray]


def _entries(
    g: ir.Grammar | cfgmask.Grammar, vocab: cfgmask.Vocabulary, on: bool, **kw: object
) -> list[Entry]:
    """Every state's entry with the copies on or off, states built in order (later positions of
    a chain after its first)."""
    limits = kw.pop("limits", None)
    with core_switch(_core.chain_past_memo_enable, on, True):
        c = cfgmask.compile(g, vocab, limits=limits, _strategy=Strategy(**kw, **NO_MEMO))  # type: ignore[arg-type]
        return [tuple(c._handle.entry(s)) for s in range(c.tables.n_states)]  # type: ignore[misc]


def _plain(g: ir.Grammar | cfgmask.Grammar, vocab: cfgmask.Vocabulary, limits: object = None) -> list[Entry]:
    """Every state's entry by a plain walk of its own (no chains, no loop walks)."""
    walk = Strategy(count_chains=False, share_loop_walks=False, wrap_repeats=0, **NO_MEMO)
    c = cfgmask.compile(g, vocab, limits=limits, _strategy=walk)  # type: ignore[arg-type]
    return [tuple(c._handle.entry(s)) for s in range(c.tables.n_states)]  # type: ignore[misc]


def assert_same_entries(g: ir.Grammar | cfgmask.Grammar, vocab: cfgmask.Vocabulary, **kw: object) -> int:
    """Every state's entry the same with the copies on and off and equal to a plain walk's; how
    many positions took a copy."""
    hits = _core.chain_past_hits()
    on = _entries(g, vocab, True, **dict(kw))
    taken = _core.chain_past_hits() - hits
    off = _entries(g, vocab, False, **dict(kw))
    assert _core.chain_past_hits() - hits == taken, "a copy was taken with the copies off"
    plain = _plain(g, vocab, kw.get("limits"))
    for s, (a, b, c) in enumerate(zip(on, off, plain, strict=True)):
        for x, what in ((b, "assembled"), (c, "plain walk")):
            assert np.array_equal(a[0], x[0]), f"state {s}: accepted tokens differ from the {what}"
            assert np.array_equal(a[1], x[1]), f"state {s}: uncertain tokens differ from the {what}"
    return taken


def shared_body(lo: int, hi: int, second: bool = True) -> ir.Grammar:
    """A bounded string body called from two places (Snowplow's `chars-0-256`): the body may end
    at each of its positions, so every position holds acc points."""
    tail = rep(seq(lit(","), lit('"'), ref("body"), lit('"')), 0, 1) if second else lit(",")
    return grammar(root=seq(lit('"'), ref("body"), lit('"'), tail), body=rep(UNIT, lo, hi))


@pytest.mark.parametrize("hi", [40, 90])
def test_shared_body_positions_copied(hi: int) -> None:
    """A shared body of up to 40 or 90 units (the long tokens of LONG need up to 24): every
    state's entry the same with the copies on and off and equal to a plain walk's; the positions
    past every need took copies."""
    v = cfgmask.Vocabulary.from_token_bytes(list(LONG), stop_token_ids=[], special_token_ids=[])
    assert assert_same_entries(shared_body(0, hi), v) > 0


@pytest.mark.parametrize("hi", [12, 40])
def test_bounded_strings_entries_unchanged(hi: int) -> None:
    """Strings of a rule of their own (the closing quote's exit alive from the start: no copy
    may be taken) and shared bodies of minimum 2: entries the same either way and plain walks'."""
    v = cfgmask.Vocabulary.from_token_bytes(list(LONG), stop_token_ids=[], special_token_ids=[])
    assert assert_same_entries(grammar(root=seq(lit('"'), rep(UNIT, 0, hi), lit('"'))), v) == 0
    assert_same_entries(shared_body(2, hi, second=False), v)


@st.composite
def shared_bodies(draw: st.DrawFn) -> ir.Grammar:
    lo = draw(st.sampled_from((0, 0, 1, 2)))
    return shared_body(lo, lo + draw(st.integers(4, 60)), draw(st.booleans()))


@given(shared_bodies(), vocabularies(PIECES))
def test_random_shared_bodies_entries(g: ir.Grammar, v: Vocab) -> None:
    """Random bounded shared bodies and vocabularies: entries the same with the copies on and
    off, and plain walks'."""
    assert_same_entries(g, _vocab(v))


@given(shared_bodies(), vocabularies(PIECES), st.data())
def test_random_shared_bodies_masks_equal_reference(g: ir.Grammar, v: Vocab, data: st.DataObject) -> None:
    """The masks along random walks with the copies on: the reference matcher's, and those of
    plain walks."""
    ref_m = ReferenceMatcher(g)
    vocab = _vocab(v)
    walk = data.draw(token_walks(ref_m, v, max_steps=20))
    with core_switch(_core.chain_past_memo_enable, True, True):
        copied = cfgmask.Matcher(cfgmask.compile(g, vocab, _strategy=Strategy(**NO_MEMO)))
        plain = cfgmask.Matcher(
            cfgmask.compile(
                g, vocab, _strategy=Strategy(count_chains=False, share_loop_walks=False, **NO_MEMO)
            )
        )
        walk_agrees(ref_m, v.tokens, v.stop_ids, v.special_ids, walk.token_ids, copied=copied, plain=plain)


def test_llama3_shared_max_length_entries() -> None:
    """Two maxLength-150 strings with Llama-3 (every position of the shared body past its max
    need of 127 holds 1,373 acc points): every state's entry the same with the copies on and off;
    copies were taken."""
    pytest.importorskip("quicktok")
    vocab = cfgmask.Vocabulary.llama3()
    s = {"type": "string", "maxLength": 150}
    schema = {"type": "object", "properties": {"a": s, "b": s}, "required": ["a", "b"]}
    g = cfgmask.Grammar.from_json_schema(schema)
    hits = _core.chain_past_hits()
    on = _entries(g, vocab, True)
    assert _core.chain_past_hits() > hits
    off = _entries(g, vocab, False)
    for i, (a, b) in enumerate(zip(on, off, strict=True)):
        assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1]), f"state {i}"


def _first_document(sid: str) -> tuple[dict, list[int]]:
    """A JSONSchemaBench schema (by id) and its first valid instance's Llama-3 tokens."""
    quicktok = pytest.importorskip("quicktok")
    enc = quicktok.get_encoding("llama3")
    split = sid.split("/")[0]
    bench = ROOT / "tests" / "corpora" / "jsonschemabench" / f"{split}.jsonl"
    case = next(json.loads(x) for x in bench.read_text().splitlines() if f'"{sid}"' in x)
    doc = next(json.dumps(t["data"], separators=(",", ":")) for t in case["tests"] if t["valid"])
    return case["schema"], enc.encode_ordinary(doc)


@pytest.mark.parametrize("sid", ["Github_medium/o6766", "Github_medium/o82377"])
def test_llama3_documents_masks(sid: str) -> None:
    """JSONSchemaBench documents whose strings' positions lie past every need, replayed cold: the
    masks the same with the copies on and off, and the copies taken with them on only."""
    schema, tokens = _first_document(sid)
    vocab = cfgmask.Vocabulary.llama3()
    masks = []
    for on in (True, False):
        hits = _core.chain_past_hits()
        with core_switch(_core.chain_past_memo_enable, on, True):
            c = cfgmask.compile(cfgmask.Grammar.from_json_schema(schema), vocab)
            masks.append(masks_along(c, tokens, final=True))
        assert (_core.chain_past_hits() > hits) == on
    assert all(np.array_equal(a, b) for a, b in zip(*masks, strict=True))
