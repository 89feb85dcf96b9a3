"""Chart scans kept for the upward filter (csrc/walk.c ``cm_walk_listed_noted``, flat.c ``flat_leave``).

An entry's uncertain tokens go to the upward filter, which scanned each of them again through
the private chart of (state, OUTER) to find where the state's rule exits inside it.  Two walks
have made that very scan already: a composed state's real chart deciding the tokens its parts
leave uncertain (``cm_walk_listed``; sql.lark's chain of one-call levels after ``SELECT``,
~110-150 K instructions a level), and a state's whole flat walk, whose dead subtrees after an
exit are the uncertain tokens (the name state's 2,827 in sql.lark: ~0.8 M).  Each now keeps, for
the tokens it leaves uncertain, the bytes the chart survived and the exit flags after each of
them; the filter reads those instead of scanning.

``_core.scan_notes_enable`` switches it (on by default); ``scan_notes_used()`` counts the tokens
the filter took from a note.  Checked: every state's entry with it on, off and by whole walks on
sql.lark with Llama-3 and on hypothesis Lark grammars of expression levels over random
vocabularies (test_compose_self's family: tokens that end an operand and read on), and the masks
of bench_gbnf's documents of sql.lark cold with it on and off.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import cfgmask
from cfgmask import _core
from cfgmask.compile.strategy import Strategy

from .helpers import core_switch, masks_along, same_document_masks, same_entries
from .strategies import Vocab, vocabularies
from .test_compose_self import IGNORES, OPS, OPS2, PIECES, _grammar, switch_entries, switch_same_entries
from .test_engine_differential import _vocab
from .test_entries import _longest_tokens, shipped


def _entries(g: cfgmask.Grammar, vocab: cfgmask.Vocabulary, on: bool, strategy: Strategy) -> list:
    return switch_entries(g, vocab, _core.scan_notes_enable, on, strategy)


def assert_same_entries(g: cfgmask.Grammar, vocab: cfgmask.Vocabulary) -> int:
    """Every state's entry the same with notes on and off, and equal to whole walks: the tokens
    the filter took from notes with them on."""
    return switch_same_entries(g, vocab, _core.scan_notes_enable, _core.scan_notes_used)


def test_fixed_grammars_use_notes() -> None:
    """The hypothesis family reaches the notes (else the random test would compare the switch's
    absence with itself)."""
    v = Vocab(tokens=[None, *(bytes([b]) for b in range(32, 127)), *PIECES], stop_ids=(0,))
    used = 0
    for op in OPS[:3]:
        for ignore in (IGNORES[0], IGNORES[3]):
            used += assert_same_entries(_grammar(op, OPS2[0], ignore), _vocab(v))
    assert used > 0


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(OPS), st.sampled_from(OPS2), st.sampled_from(IGNORES), vocabularies(PIECES))
def test_random_grammars_same_entries(op: str, op2: str, ignore: str, v: Vocab) -> None:
    assert_same_entries(_grammar(op, op2, ignore), _vocab(v))


def test_sql_lark_same_entries() -> None:
    """Every state of sql.lark with Llama-3, on and off (whole walks: tests/test_entries.py); the
    chain after ``SELECT`` reads its notes."""
    vocab = cfgmask.Vocabulary.llama3()
    before = _core.scan_notes_used()
    on = _entries(shipped("sql.lark"), vocab, True, Strategy())
    assert _core.scan_notes_used() - before > 1000
    same_entries(on, _entries(shipped("sql.lark"), vocab, False, Strategy()), "notes off")


def test_sql_lark_documents_cold_same_masks() -> None:
    """bench_gbnf's cold pass of sql.lark: every mask the same with notes on and off."""
    from benchmarks.documents import DOCUMENTS

    vocab = cfgmask.Vocabulary.llama3()
    docs = [_longest_tokens(vocab, d.encode()) for d in DOCUMENTS["sql"]()]
    out = {}
    for on in (True, False):
        with core_switch(_core.scan_notes_enable, on):
            compiled = cfgmask.compile(shipped("sql.lark"), vocab)
            out[on] = [masks_along(compiled, doc) for doc in docs]
    same_document_masks(out[True], out[False], docs)
    assert all(np.asarray(m).any() for ms in out[True] for m in ms)
