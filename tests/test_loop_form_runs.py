"""A loop's byte-level form made by runs of one byte class and kept as its runs of one code
(csrc/loopstore.c, form_by_runs; `_core.loop_form_runs_enable`).

The form is the key under which the vocabulary keeps a loop's shared walk for every grammar
compiled for it.  It was 256 codes a state, read byte by byte; now each state's row is read once a
run of one class and the key is the state's maximal runs of one code, so a JSON string's loop
(~40 class runs) costs a seventh.  Here every state's entry with the switch on equals it off (and
whole walks) on small vocabularies under hypothesis and on Llama-3 (json.gbnf, a JSON Schema, the
first documents of corpus schemas), `_core.loop_form_runs_taken()` shows the runs were taken, and
two grammars whose classes split the bytes differently but whose loops are the same share one walk
through the key (adjacent class runs with one code merged).
"""

from __future__ import annotations

import pytest
from hypothesis import given

import cfgmask
from cfgmask import _core

from .helpers import core_switch, same_entries
from .strategies import Vocab, vocabularies
from .test_direct_loops import assert_corpus_masks_same_taken
from .test_engine_differential import _vocab
from .test_entries import assert_switch_same_entries, entries
from .test_loop_exit_ends import assert_llama3_cases

# A string inside an object, closed by `"` and followed by `,` or `}`; an escape keeps the loop
# of two states.  SPLIT's string is the same loop, but its `b` keyword splits [a-c] in three
# classes: the form's runs must merge them back.
STRINGS = r"""root ::= "{" pair ("," pair)* "}"
pair ::= "\"k\":" value
value ::= "\"" ( [a-c .] | "\\" ["\\n] )* "\"" | [0-9]+
"""
SPLIT = r"""root ::= "{" pair ("," pair)* "}" | "b"
pair ::= "\"k\":" value
value ::= "\"" ( [a-c .] | "\\" ["\\n] )* "\"" | [0-9]+
"""
STRING_PIECES = (
    b'"', b'a"', b'ab"', b'."', b' "', b'",', b'"}', b'a",', b'c"}', b'\\"', b'\\n"', b'"k":',
    b'{"k":"', b'ab', b'a b', b'1', b'12', b'",\n', b'"a', b'b"', b'. "', b'abc', b'b.c',
)  # fmt: skip


def _small() -> cfgmask.Vocabulary:
    singles = [bytes([c]) for c in b'{}",:\\kabcn .019']
    return cfgmask.Vocabulary.from_token_bytes(list(dict.fromkeys(singles + list(STRING_PIECES))))


def _check(g: cfgmask.Grammar, vocab: cfgmask.Vocabulary, *, plain: bool = True) -> int:
    return assert_switch_same_entries(
        _core.loop_form_runs_enable,
        _core.loop_form_runs_taken,
        g,
        vocab,
        what="forms of 256 codes a state",
        plain=plain,
    )


def test_string_forms_by_runs_same_entries() -> None:
    assert _check(cfgmask.Grammar.from_gbnf(STRINGS), _small()) > 0


@given(vocabularies(STRING_PIECES))
def test_string_forms_by_runs_same_entries_any_vocab(v: Vocab) -> None:
    _check(cfgmask.Grammar.from_gbnf(STRINGS), _vocab(v))
    _check(cfgmask.Grammar.from_gbnf(SPLIT), _vocab(v))


@pytest.mark.parametrize("on", [True, False])
def test_split_classes_share_the_walk(on: bool) -> None:
    """SPLIT's loop finds the walk STRINGS' put in the vocabulary's store, with either form: its
    key does not depend on how a grammar's classes split the bytes; its entries are those it
    makes alone."""
    vocab = _small()
    with core_switch(_core.loop_form_runs_enable, on):
        alone = entries(cfgmask.compile(cfgmask.Grammar.from_gbnf(SPLIT), vocab))
        cfgmask.clear_caches()
        n0 = _core.loop_form_runs_taken()
        first = cfgmask.compile(cfgmask.Grammar.from_gbnf(STRINGS), vocab)
        entries(first)
        assert first._handle.build_stats["vocab_loop_walks"] == 0
        second = cfgmask.compile(cfgmask.Grammar.from_gbnf(SPLIT), vocab)
        shared = entries(second)
        assert second._handle.build_stats["vocab_loop_walks"] > 0
        assert (_core.loop_form_runs_taken() > n0) == on
    same_entries(shared, alone, "SPLIT compiled alone")


def test_llama3_same_entries() -> None:
    assert_llama3_cases(_check)


def test_corpus_masks_same() -> None:
    """Llama-3 masks along the first documents of corpus schemas: the same with the forms by runs
    and without, and the runs taken."""
    pytest.importorskip("quicktok")
    assert_corpus_masks_same_taken(_core.loop_form_runs_enable, _core.loop_form_runs_taken)
