"""A chain position's exits replayed from their first walk (csrc/chains.c, ``push_exits``).

Every position of a counted chain walks each exit alive there (the subtree of the exit's byte,
from the out state it leads to), and its entry then filters the exits' uncertain tokens.  Both
read only the exit and its target, never the position, so each exit's walk (accepted ids and
uncertain tokens) and the tokens the filter keeps of it are kept by rule and exit the first time
and replayed at the rule's later positions.  The references: with the memo off
(``_core.chain_exit_memo_enable(False)``: every exit walked and filtered at each position) every
entry and mask is the same, and equal to every chain analysed and to plain walks.
"""

from __future__ import annotations

import itertools
from contextlib import AbstractContextManager

import numpy as np
import pytest
from hypothesis import given

import cfgmask
from cfgmask import _core, ir
from cfgmask.compile.strategy import Strategy

from .helpers import core_switch, masks_along
from .strategies import Vocab, vocabularies
from .test_chain_memo import VOCAB, _assert_same, _two_values, repeated
from .test_engine_differential import _vocab
from .test_kept_batch import assert_switch_changes_nothing
from .test_past_positions import _first_document
from .test_repeats import CHAIN_PIECES, UNITS

Entry = tuple[np.ndarray, np.ndarray]


def _memo(on: bool) -> AbstractContextManager[None]:
    return core_switch(_core.chain_exit_memo_enable, on)


def test_entries_equal_with_memo_off() -> None:
    """Grammars with a count twice, of each unit and two bounds: every entry the same with the
    memo on and off, and equal to every chain analysed and to plain walks."""
    vocab = _vocab(VOCAB)
    for unit, (lo, hi) in itertools.product(sorted(UNITS), [(0, 20), (3, 40)]):
        gs = [_two_values(UNITS[unit], lo, hi, prefix) for prefix in ("", "{{")]
        assert_switch_changes_nothing(_core.chain_exit_memo_enable, _core.chain_exit_memo_hits, gs, vocab)


@given(repeated(), vocabularies(CHAIN_PIECES))
def test_random_entries_equal_plain_walks(case: tuple[ir.Grammar, ir.Grammar], v: Vocab) -> None:
    """Hypothesis grammars with counts: every entry equal, memo on or off, to every chain analysed
    and to plain walks."""
    gs, vocab = list(case), _vocab(v)
    assert_switch_changes_nothing(_core.chain_exit_memo_enable, _core.chain_exit_memo_hits, gs, vocab)


def _state_entries(c: cfgmask.CompiledGrammar) -> list[Entry]:
    return [tuple(c._handle.entry(s)) for s in range(c.tables.n_states)]  # type: ignore[misc]


@pytest.mark.parametrize(
    "sid", ["Snowplow/sp_4_Normalized", "Github_medium/o9764", "Github_medium/o6766", "Github_medium/o61627"]
)
def test_llama3_documents_masks_and_entries(sid: str) -> None:
    """JSONSchemaBench documents with long strings, replayed cold with Llama-3 (sp_4's user agent
    walks 189 exits at each of its positions): the masks along the document the same with the
    memo on and off, then every state's entry; exits replayed with the memo on only."""
    schema, tokens = _first_document(sid)
    vocab = cfgmask.Vocabulary.llama3()
    masks, entries = [], []
    for on in (True, False):
        hits = _core.chain_exit_memo_hits()
        with _memo(on):
            c = cfgmask.compile(cfgmask.Grammar.from_json_schema(schema), vocab)
            masks.append(masks_along(c, tokens, final=True))
            entries.append(_state_entries(c))
        assert (_core.chain_exit_memo_hits() > hits) == on
    assert len(masks[0]) == len(masks[1])
    for i, (a, b) in enumerate(zip(*masks, strict=True)):
        assert np.array_equal(a, b), f"mask {i} differs"
    _assert_same(entries[0], entries[1])


@pytest.mark.parametrize("hi", [60, 200, 1000])
def test_llama3_strings_masks(hi: int) -> None:
    """Llama-3 strings of three bounds in two properties, values of many lengths (closed early,
    at a block's end, at the bound): every mask the same with the memo on and off and with plain
    walks."""
    quicktok = pytest.importorskip("quicktok")
    enc = quicktok.get_encoding("llama3")
    vocab = cfgmask.Vocabulary.llama3()
    s = {"type": "string", "maxLength": hi}
    schema = {"type": "object", "properties": {"a": s, "b": s, "n": {"type": "integer"}}, "required": ["a"]}
    texts = ["x", "Mozilla/5.0 (Windows NT 10.0; Win64; x64) \u00e9", 'ab\\"c\\n' * 9]
    texts += ["word " * (k // 5) + "y" * (k % 5) for k in (45, 46, 47, hi - 1, hi)]
    docs = [enc.encode_ordinary(f'{{"a":"{t}","b":"{t[:50]}","n":1}}') for t in texts]
    masks: dict[str, list[np.ndarray]] = {}
    for mode in ("plain", "off", "on"):
        with _memo(mode == "on"):
            strategy = Strategy(count_chains=mode != "plain")
            c = cfgmask.compile(cfgmask.Grammar.from_json_schema(schema), vocab, _strategy=strategy)
            masks[mode] = [m for d in docs for m in masks_along(c, d, final=True)]
    for mode in ("off", "on"):
        assert len(masks[mode]) == len(masks["plain"])
        for i, (x, y) in enumerate(zip(masks["plain"], masks[mode], strict=True)):
            assert np.array_equal(x, y), f"{mode}: mask {i} differs"
