"""The closing-verdict split's candidates read on from the one before (csrc/mask.c, ``check_split``).

The uncertain candidates of a mask come in trie order, so each shares its first bytes with the
one before; the split's automata after those bytes are kept (rows) and the candidate reads on
from there, asking again only the rest verdicts at the accepting states of the shared bytes, in
the order a read from the start asks them.  Every verdict is the one the read from the start
gives, so every mask must stay the same with the switch off
(``_core.mask_split_resume_enable(False)``: each candidate from the split's states) and equal to
the pure-Python reference along random walks with a rollback and a fork.
"""

from __future__ import annotations

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
    mask_bools,
    masks_along,
    opt,
    ref,
    rep,
    seq,
    stop_vocab,
)
from .reference import ReferenceMatcher
from .strategies import Vocab, vocabularies
from .test_past_positions import _first_document
from .test_split_late import LONG, follow_with_rollback_and_fork
from .test_verdicts import NO_MEMO, PIECES, shared_strings


@given(shared_strings(), vocabularies(PIECES + LONG), st.booleans(), st.data())
def test_random_masks_equal_reference_with_rollback_and_fork(
    case: tuple[ir.Grammar, int], v: Vocab, on: bool, data: st.DataObject
) -> None:
    """JSON-like values whose strings are one rule, bounded or not, the split made at every mask
    with a candidate: with the resume on and off, the masks along a random walk, with a rollback
    into it and a fork, are the reference's."""
    with core_switch(_core.mask_split_late_enable, 2, 1), core_switch(_core.mask_split_resume_enable, on):
        follow_with_rollback_and_fork(case, v, data)


# A word read past its accepting states, called where the caller reads on with a byte the word
# reads too: after "<a", the rest "q1" of ``aq1`` closes ``tagged`` only from the row after the
# first byte, where the word may end; the candidate before it in trie order, ``aq,``, dies at
# its third byte with rows 1 and 2 kept, so ``aq1`` resumes at row 2 and must ask row 1's rest
# again (JSON strings never test this: they die right after their accepting state, the quote).
WORDS = grammar(
    root=ref("value"),
    word=rep(chars("a", "b", "q"), 1, None),
    tagged=seq(lit("<"), ref("word"), lit("q1")),
    value=alt(ref("word"), ref("tagged"), ref("array")),
    array=seq(lit("["), opt(seq(ref("value"), rep(seq(lit(","), ref("value"))))), lit("]")),
)
WORD_PIECES = (b"<", b"a", b"aq,", b"aq1", b"aqa,", b"[", b"]", b",", b"q", b"1")


def test_rests_asked_again_at_the_shared_rows_accepting_states() -> None:
    """A word rule that reads on past its accepting states (its own automaton: not inlined into
    its two callers, whose follows differ), the split made at every mask with a candidate: along
    ``[<aaq1,aaq,<aaq1]`` the masks are the reference's with the resume on and off, ``aq1``
    allowed after ``<a`` though it resumes past the row whose rest allows it; and the resume
    fired."""
    vocab, texts = stop_vocab(WORD_PIECES)
    ref_m = ReferenceMatcher(WORDS)
    doc = [b"[", b"<", b"a", b"aq1", b",", b"a", b"aq,", b"<", b"a", b"aq1", b"]"]
    limits = cfgmask.CompileLimits(unroll_budget=64, unroll_whole=0, inline_shared_states=0)
    skipped = []
    for on in (False, True):
        before = _core.mask_split_resumed()
        with core_switch(_core.mask_split_late_enable, 2, 1), core_switch(_core.mask_split_resume_enable, on):
            c = cfgmask.compile(
                WORDS, vocab, limits=limits, _strategy=Strategy(closing_verdicts=1, **NO_MEMO)
            )
            m = cfgmask.Matcher(c)
            for i in range(len(doc) + 1):
                prefix = b"".join(doc[:i])
                want = ref_m.mask(prefix, texts, [len(WORD_PIECES)], ())
                assert mask_bools(m, vocab.size) == want, f"resume {on}, after {prefix!r}"
                if i < len(doc):
                    assert m.accept_token(WORD_PIECES.index(doc[i]))
        skipped.append(_core.mask_split_resumed() - before)
    assert skipped[0] == 0
    assert skipped[1] > 0


def _same_masks_on_and_off(schema: dict, tokens: list[int], late: int) -> int:
    """The masks along ``tokens`` (Llama-3, compiled cold, the late split in mode ``late``) the
    same with the resume on and off; the bytes the resumes skipped (none when off)."""
    vocab = cfgmask.Vocabulary.llama3()
    masks, skipped = [], []
    for on in (False, True):
        before = _core.mask_split_resumed()
        late_on = core_switch(_core.mask_split_late_enable, late, 1)
        with late_on, core_switch(_core.mask_split_resume_enable, on):
            c = cfgmask.compile(cfgmask.Grammar.from_json_schema(schema), vocab)
            masks.append(masks_along(c, tokens, final=True))
        skipped.append(_core.mask_split_resumed() - before)
    assert skipped[0] == 0
    assert len(masks[0]) == len(masks[1])
    for i, (a, b) in enumerate(zip(masks[0], masks[1], strict=True)):
        assert np.array_equal(a, b), f"mask {i} differs"
    return skipped[1]


@pytest.mark.parametrize(
    "sid",
    ["Github_medium/o9813", "Snowplow/sp_333_Normalized", "Snowplow/sp_4_Normalized", "Github_medium/o61627"],
)
@pytest.mark.parametrize("late", [1, 2])
def test_llama3_documents_masks(sid: str, late: int) -> None:
    """JSONSchemaBench documents with wide string masks and block strings, replayed cold with
    Llama-3, the split made by the steps (1) or at every mask's first check (2): the masks along
    the document the same with the resume on and off; the resume skips bytes where splits are made
    (o61627 makes none by the steps)."""
    schema, tokens = _first_document(sid)
    skipped = _same_masks_on_and_off(schema, tokens, late)
    if late == 2 or sid != "Github_medium/o61627":
        assert skipped > 0


def test_llama3_long_runs_near_a_block_end() -> None:
    """A string of maxLength 300 cut into blocks, filled with words up to each block's end and
    past it (candidates of long runs that share most of their bytes): every mask the same with
    the resume on and off."""
    pytest.importorskip("quicktok")
    import quicktok

    enc = quicktok.get_encoding("llama3")
    schema = {"type": "object", "properties": {"d": {"type": "string", "maxLength": 300}}, "required": ["d"]}
    text = " ".join(["This is an example data table"] * 9)[:290]
    tokens = enc.encode_ordinary('{"d":"' + text + '"}')
    assert _same_masks_on_and_off(schema, tokens, 2) > 0
