"""Loop and run walks that take the entries inside the loop's bytes at once (csrc/tokclass.c).

A loop's walk (csrc/loops.c) accepts every trie entry whose bytes all lie in the set X of bytes on
which the loop's states stay inside (and whose multi-byte characters keep them inside), read off
the vocabulary's byte features instead of walked, and walks only the others.  The references:
every state's entry equal to whole trie walks (no shared loop walks at all), with the bulk walks
where they pay (the default, Llama-3), wherever they apply (``_core.tokclass_enable(2)``: small
random vocabularies, narrow classes) and off; and the bulk walks taken where they should be.
"""

from __future__ import annotations

import json
from contextlib import AbstractContextManager

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cfgmask
from cfgmask import _core

from .helpers import core_switch
from .strategies import Vocab, vocabularies
from .test_engine_differential import _vocab
from .test_entries import assert_same_entries


def _llama3() -> cfgmask.Vocabulary:
    pytest.importorskip("quicktok")
    return cfgmask.Vocabulary.llama3()


def _mode(mode: int) -> AbstractContextManager[None]:
    return core_switch(_core.tokclass_enable, mode, 1)


def _string(pattern: str) -> cfgmask.Grammar:
    prop = {"type": "string", "pattern": pattern}
    schema = {"type": "object", "properties": {"s": prop}, "required": ["s"]}
    return cfgmask.Grammar.from_json_schema(json.dumps(schema))


# unanchored patterns (a JSON string's whole automaton around the pattern's progress), class runs,
# classes whose characters leave the loop (a non-ASCII range: a character's middle dies), narrow ones
LLAMA_PATTERNS = [
    "(\\w{2})",
    "[0-9]+.[0-9]+.[0-9]+$",
    "^all|tags$",
    "\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}",
    "^[\\w\\/\\.:-]+$",
    "^([a-z]|[ ])*$",
    "^[0-9a-zA-Z_-]*$",
    "caf\u00e9",
    "^[a-z\u00e0-\u00ff]+$",
]


@pytest.mark.parametrize("pattern", LLAMA_PATTERNS)
def test_llama3_pattern_loops_same_entries(pattern: str) -> None:
    vocab = _llama3()
    with _mode(1):
        assert_same_entries(_string(pattern), vocab)


def test_llama3_bulk_walks_taken() -> None:
    """The unanchored patterns' loops (and a wide run) take a bulk walk at Llama-3's size: by the
    byte features, or by the plain tokens (a loop whose every plain token is accepted walks the
    others only, csrc/loops.c, and is the cheaper of the two)."""
    vocab = _llama3()
    for pattern in ("\\d{4}-\\d{2}-\\d{2}T\\d{2}", "^[\\w\\/\\.:-]+$", "^all|tags$"):
        with _mode(1):
            before = _core.tokclass_walks() + _core.plain_loop_walks()
            compiled = cfgmask.compile(_string(pattern), vocab)
            m = cfgmask.Matcher(compiled)
            assert m.accept_bytes(b'{"s":"')
            m.fill_bitmask(cfgmask.allocate_bitmask(1, vocab.size), 0)
            assert _core.tokclass_walks() + _core.plain_loop_walks() > before, pattern


@pytest.mark.parametrize("pattern", ["^[0-9]+$", "(\\w{2})", "^[\u00e0-\u00ff]+$", "[0-9a-f]{3}"])
def test_llama3_everywhere_and_off_same_entries(pattern: str) -> None:
    """Narrow classes too (mode 2: no size test), and the reference with the bulk walks off."""
    vocab = _llama3()
    for mode in (2, 0):
        with _mode(mode):
            assert_same_entries(_string(pattern), vocab)


SMALL_PATTERNS = ["(\\w{2})", "^a+$", "^[ab\u00e9]*$", "b$", "^(ab|\u00e9)*$", "a.b", "^[^b]*$", "\u00e9{2}"]
PIECES = (b"a", b"b", b"ab", b"ba", b"a\\n", b'"', b'a"', b'"}', b"\\", b"\\u00e9", b"1", b" ")
PIECES += ("\u00e9".encode(),)


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(SMALL_PATTERNS), vocabularies(PIECES))
def test_small_vocabularies_same_entries(pattern: str, v: Vocab) -> None:
    """Every loop and run walk that can take entries at once does (mode 2), on random vocabularies
    with escapes, quotes, characters and their pieces (cut characters, stray bytes)."""
    try:
        with _mode(2):
            assert_same_entries(_string(pattern), _vocab(v))
    except cfgmask.GrammarError:
        return
