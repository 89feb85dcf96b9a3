"""The upward filter's lazy verdict memo (csrc/walk.c, ``follow_lazy_state``; ``Strategy.lazy_follow``).

The filter's verdicts (does a rule's upward chart survive a token's rest after the rule exits
inside it?) were hashed into a memo as they were made, for the rule's later filters to read; a
compact JSON document filters one state of its `ws` rule and never reads the ~4,000 it wrote.
With the switch on, the first filter of a rule that asks keeps its verdicts as they were asked
(no hash, lookup or growth of the memo) and they are hashed into the memo only when a second
filter of the same rule comes (an indented document's next `ws` state; sql.lark's rules' many
states).

Every state's entry with the switch on must equal it off, and whole walks'; on JSON Schemas
whose `ws` rule has many states (indentation) and on sql.lark the memo must be read after the
lazy insert (``_core.follow_memo_counts()``: held, inserted, hits), and the masks along an
indented document the same either way; random grammars' masks along random walks equal the
reference matcher's."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cfgmask
from cfgmask import _core
from cfgmask.compile.limits import CompileLimits
from cfgmask.compile.strategy import Strategy

from .helpers import core_switch, masks_along, same_entries, walk_agrees
from .reference import ReferenceMatcher
from .strategies import Vocab, token_walks, vocabularies
from .test_engine_differential import _vocab
from .test_entries import WALKS_ONLY, _longest_tokens, entries, shipped
from .test_filter_pairs import ANY_VALUES as PAIR_VALUES

LAZY = Strategy(lazy_follow=True)
EAGER = Strategy(lazy_follow=False)
WHOLE = Strategy(
    lazy_follow=False, compose_entries=WALKS_ONLY.compose_entries, flat_walks=False, share_loop_walks=False
)


def _counts() -> tuple[int, int, int]:
    return _core.follow_memo_counts()


def _entries(g: cfgmask.Grammar, vocab: cfgmask.Vocabulary, strategy: Strategy, **kw: Any) -> list:
    cfgmask.clear_caches()
    return entries(cfgmask.compile(g, vocab, _strategy=strategy, **kw))


def assert_same_entries(
    g: cfgmask.Grammar, vocab: cfgmask.Vocabulary, *, whole: bool = True, **kw: Any
) -> tuple[int, ...]:
    """Every state's entry with the lazy memo equal to the eager memo's and (whole) to whole walks';
    the counters' moves in the lazy build (held, inserted, hits)."""
    before = _counts()
    lazy = _entries(g, vocab, LAZY, **kw)
    moved = tuple(a - b for a, b in zip(_counts(), before, strict=True))
    before = _counts()
    same_entries(lazy, _entries(g, vocab, EAGER, **kw), "eager memo")
    after = _counts()
    assert after[:2] == before[:2], "verdicts held while the switch was off"
    if whole:
        same_entries(lazy, _entries(g, vocab, WHOLE, **kw), "whole walks")
    return moved


# test_filter_pairs's values of every kind after `ws` (blank-led tokens leave it with a rest
# each), and a required object of two more.
ANY_VALUES = {
    **PAIR_VALUES,
    "properties": {
        **PAIR_VALUES["properties"],
        "e": {"type": "object", "properties": {"x": {"type": "null"}, "y": {"type": "number"}}},
    },
    "required": [*PAIR_VALUES["required"], "e"],
}
INSTANCE = {"a": True, "b": [1, {"k": None}], "c": [1, 2], "d": "the end", "e": {"x": None, "y": 2.5}}


@pytest.mark.parametrize("schema", [ANY_VALUES, {"type": "array", "items": {"type": "boolean"}}])
def test_json_schema_ws_states_same_entries_memo_read(schema: dict) -> None:
    """The `ws` rule's many states (one per indentation) ask about the same rests: the first
    holds its verdicts, the second hashes them in, the later ones read them.  The same entries
    with every shortcut on; the counts with cx48's triple stops off, which kill rests such as
    `` fabrication`` on their third byte before they are asked (on the booleans' array only 49 of
    283 held verdicts are then read again: too few asks left to show the memo read)."""
    g = cfgmask.Grammar.from_json_schema(json.dumps(schema))
    vocab = cfgmask.Vocabulary.llama3()
    assert_same_entries(g, vocab)
    with core_switch(_core.filter_triples_enable, False):
        held, inserted, hits = assert_same_entries(g, vocab)
    assert held > 100 and inserted > 100 and hits > 100, (held, inserted, hits)


def test_indented_document_masks_same_memo_read() -> None:
    """The masks along an indented document (caches cleared: each `ws` state filtered at its first
    use) with the lazy memo equal to the eager memo's; the document's second `ws` state hashes
    the first one's verdicts, and later ones read them."""
    g = cfgmask.Grammar.from_json_schema(json.dumps(ANY_VALUES))
    vocab = cfgmask.Vocabulary.llama3()
    tokens = _longest_tokens(vocab, json.dumps(INSTANCE, indent=2).encode())
    cfgmask.clear_caches()
    before = _counts()
    lazy = masks_along(cfgmask.compile(g, vocab, _strategy=LAZY), tokens, final=True)
    held, inserted, hits = (a - b for a, b in zip(_counts(), before, strict=True))
    assert held > 0 and inserted > 0 and hits > 0, (held, inserted, hits)
    cfgmask.clear_caches()
    eager = masks_along(cfgmask.compile(g, vocab, _strategy=EAGER), tokens, final=True)
    for i, (a, b) in enumerate(zip(lazy, eager, strict=True)):
        assert np.array_equal(a, b), f"mask {i} differs"


def test_compact_document_holds_without_hashing() -> None:
    """A compact document filters its `ws` rule's start state only: its verdicts stay held (none
    hashed for that rule), and the masks are the eager memo's."""
    g = cfgmask.Grammar.from_json_schema(json.dumps({"type": "array", "items": {"type": "boolean"}}))
    vocab = cfgmask.Vocabulary.llama3()
    tokens = _longest_tokens(vocab, b"[true,false,true]")
    # (counted with the early pair stops off: they drop the filter's first rests unasked, and
    # with them the verdicts it would hold)
    with core_switch(_core.filter_pairs_early_enable, False):
        before = _counts()
        lazy = masks_along(cfgmask.compile(g, vocab, _strategy=LAZY), tokens, final=True)
        held, inserted, _ = (a - b for a, b in zip(_counts(), before, strict=True))
    assert held > 100 and inserted == 0, (held, inserted)
    cfgmask.clear_caches()
    eager = masks_along(cfgmask.compile(g, vocab, _strategy=EAGER), tokens, final=True)
    for i, (a, b) in enumerate(zip(lazy, eager, strict=True)):
        assert np.array_equal(a, b), f"mask {i} differs"


def test_sql_lark_same_entries_memo_read() -> None:
    """sql.lark: rules called from everywhere (names, blanks) filtered at many states."""
    held, inserted, hits = assert_same_entries(shipped("sql.lark"), cfgmask.Vocabulary.llama3(), whole=False)
    assert held > 0 and inserted > 0 and hits > 0, (held, inserted, hits)


# Each rule its own, so a name's rests go through its callers' upward chart at every state.
OWN_RULES = CompileLimits(inline_max_states=1, inline_shared_states=1)
GRAMMARS = [
    'root ::= item ( "," " "* item )*\nitem ::= name ( "=" [0-9] | ":" "x" name | "(" name ")" )?\n'
    "name ::= [a-z]+",
    'root ::= "[" ws item ( ws "," ws item )* ws "]"\nitem ::= "ab" | "b" [a-b]* | "<" [a-z]* ">"\n'
    'ws ::= " "*',
]
PIECES = (b"ab", b" a", b" ab", b"  b", b"a,", b", a", b"=1", b"(a)", b"<ab>", b"] ", b" ,", b":x")


@settings(max_examples=40, deadline=None)
@given(st.integers(0, len(GRAMMARS) - 1), vocabularies(PIECES))
def test_random_vocabularies_same_entries(index: int, v: Vocab) -> None:
    assert_same_entries(cfgmask.Grammar.from_gbnf(GRAMMARS[index]), _vocab(v), limits=OWN_RULES)


@settings(max_examples=30, deadline=None)
@given(st.integers(0, len(GRAMMARS) - 1), vocabularies(PIECES), st.data())
def test_random_walks_masks_equal_reference(index: int, v: Vocab, data: st.DataObject) -> None:
    """The masks along random walks with the lazy memo: the reference matcher's, and whole walks'."""
    g = cfgmask.Grammar.from_gbnf(GRAMMARS[index])
    ref_m = ReferenceMatcher(g.ir)
    vocab = _vocab(v)
    walk = data.draw(token_walks(ref_m, v, max_steps=12))
    cfgmask.clear_caches()
    lazy = cfgmask.Matcher(cfgmask.compile(g, vocab, _strategy=LAZY, limits=OWN_RULES))
    whole = cfgmask.Matcher(cfgmask.compile(g, vocab, _strategy=WHOLE, limits=OWN_RULES))
    walk_agrees(ref_m, v.tokens, v.stop_ids, v.special_ids, walk.token_ids, lazy=lazy, whole=whole)
