"""A flat walk's run past a transition not computed whose byte no item of the configuration reads
(csrc/flat.c, flat_run_g; `_core.flat_run_reads_enable`).

Where the run met a cell not computed it stopped for flat_step, whose first test is the
configuration's reads row: most such cells (9,562 of the mid set's 12,595 steps) die there, and
the stop (a return, flat_walk_from's stop, a call) cost more than the check.  The run now marks
the cell dead itself and skips its subtree, as it skips a known dead cell's, unless an exit lies
on the path (then the subtree's entries are uncertain: flat_walk_from's stop takes them).  Here
every state's entry with it on equals it off (the stop), on small vocabularies under hypothesis
and on Llama-3, every mask along corpus documents too, and `_core.flat_run_reads_dead()` shows it
was taken.
"""

from __future__ import annotations

import json

from hypothesis import given

import cfgmask
from cfgmask import _core

from .strategies import Vocab, vocabularies
from .test_direct_loops import assert_corpus_masks_same_taken
from .test_engine_differential import _vocab
from .test_entries import ROOT, assert_switch_same_entries
from .test_loop_exit_ends import llama3  # noqa: F401  (the fixture)

# JSON's strings and keys: their configurations read few bytes, and a string's end exits (the
# entries past it that die are uncertain, not skipped).
JSON = (ROOT / "grammars" / "json.gbnf").read_text()
PIECES = (
    b'{"', b'"ab"', b'"a', b'ab', b'":', b'": ', b'",', b'"}', b'"]', b'1', b'12', b'1.', b'c"',
    b'"c', b'a"b', b'"\\', b'\\n', b'\\u', b'tr', b'true', b'nu', b' "', b'[1', b'-', b'e+',
)  # fmt: skip


def _same_entries(g: cfgmask.Grammar, vocab: cfgmask.Vocabulary) -> int:
    """Every state's entry equal on, off and by whole walks; the cells the run marked dead."""
    return assert_switch_same_entries(
        _core.flat_run_reads_enable, _core.flat_run_reads_dead, g, vocab, what="the run's stop", plain=True
    )


@given(vocabularies(PIECES))
def test_json_same_entries(v: Vocab) -> None:
    _same_entries(cfgmask.Grammar.from_gbnf(JSON), _vocab(v))


def test_taken_same_entries(llama3: cfgmask.Vocabulary) -> None:  # noqa: F811
    """json.gbnf on its own bytes and pieces; on Llama-3 a schema of listed keys, an enum, a
    patterned string and numbers: configurations that read a few bytes.  Taken in both."""
    small = cfgmask.Vocabulary.from_token_bytes(
        list(dict.fromkeys([bytes([c]) for c in b'{}[]",: \nabc012.-+etrunl\\'])) + list(PIECES)
    )
    props = {
        "name": {"type": "string", "maxLength": 8},
        "kind": {"enum": ["alpha", "beta", "gamma"]},
        "code": {"type": "string", "pattern": "^[A-F0-9]{2,4}$"},
        "n": {"type": "integer"},
        "x": {"type": "number"},
    }
    schema = {"type": "object", "properties": props, "required": ["name", "kind"]}
    moved = [
        _same_entries(cfgmask.Grammar.from_gbnf(JSON), small),
        _same_entries(cfgmask.Grammar.from_json_schema(json.dumps(schema)), llama3),
    ]
    assert min(moved) > 0, moved


def test_corpus_masks_same() -> None:
    """Llama-3 masks along corpus schemas' first documents (40 tokens each), the same on and off;
    the counter moved on only."""
    assert_corpus_masks_same_taken(_core.flat_run_reads_enable, _core.flat_run_reads_dead)
