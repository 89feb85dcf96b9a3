"""Loop exits whose every token ends with the exit's byte, accepted without a walk (csrc/loops.c,
cm_loop_entry; `_core.loop_exit_ends_enable`).

A loop's shared walk records each trie subtree whose prefix leaves the loop; each state's entry
walked every one on from the byte's target.  About half of a JSON string's exits at Llama-3 are a
token that closes the string and ends there (`s"`, `."`): it ends alive, so it is accepted at
once.  Here every state's entry with the shortcut on equals it off and whole walks, on small
vocabularies under hypothesis and on Llama-3 (json.gbnf, a JSON Schema of the corpus), and
`_core.loop_exit_ends_taken()` shows the shortcut was taken.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from hypothesis import given

import cfgmask
from cfgmask import _core

from .strategies import Vocab, vocabularies
from .test_engine_differential import _vocab
from .test_entries import ROOT, assert_switch_same_entries

# A string inside an object, closed by `"` and followed by `,` or `}`; an escape keeps the loop
# of two states.
STRINGS = r"""root ::= "{" pair ("," pair)* "}"
pair ::= "\"k\":" value
value ::= "\"" ( [a-c .] | "\\" ["\\n] )* "\"" | [0-9]+
"""
STRING_PIECES = (
    b'"', b'a"', b'ab"', b'."', b' "', b'",', b'"}', b'a",', b'c"}', b'\\"', b'\\n"', b'"k":',
    b'{"k":"', b'ab', b'a b', b'1', b'12', b'",\n', b'"a', b'b"', b'. "',
)  # fmt: skip


def _check(g: cfgmask.Grammar, vocab: cfgmask.Vocabulary, *, plain: bool = True) -> int:
    return assert_switch_same_entries(
        _core.loop_exit_ends_enable,
        _core.loop_exit_ends_taken,
        g,
        vocab,
        what="every exit walked",
        plain=plain,
    )


def test_string_exits_taken_same_entries() -> None:
    vocab = cfgmask.Vocabulary.from_token_bytes(
        list(dict.fromkeys([bytes([c]) for c in b'{}",:\\kabcn .019'])) + list(STRING_PIECES)
    )
    assert _check(cfgmask.Grammar.from_gbnf(STRINGS), vocab) > 0


@given(vocabularies(STRING_PIECES))
def test_string_exits_same_entries(v: Vocab) -> None:
    _check(cfgmask.Grammar.from_gbnf(STRINGS), _vocab(v))


@pytest.fixture(scope="module")
def llama3() -> cfgmask.Vocabulary:
    pytest.importorskip("quicktok")
    return cfgmask.Vocabulary.llama3()


def json_gbnf() -> cfgmask.Grammar:
    return cfgmask.Grammar.from_gbnf((ROOT / "grammars" / "json.gbnf").read_text())


def mixed_schema() -> cfgmask.Grammar:
    """An object of a string, an array of bounded strings, a pattern and an integer: string loops
    of every kind a JSON Schema makes (the loop tests' Llama-3 case)."""
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "tags": {"type": "array", "items": {"type": "string", "maxLength": 8}},
            "id": {"type": "string", "pattern": "^[a-z]+-[0-9]+$"},
            "n": {"type": "integer"},
        },
        "required": ["name", "n"],
    }
    return cfgmask.Grammar.from_json_schema(json.dumps(schema))


def assert_llama3_cases(check: Callable[..., int]) -> None:
    """``check(grammar, vocab, plain=...)`` (entries the same with a loop switch on and off, the
    count it took) at Llama-3 on json.gbnf and ``mixed_schema``, each taking the path."""
    pytest.importorskip("quicktok")
    vocab = cfgmask.Vocabulary.llama3()
    assert check(json_gbnf(), vocab) > 0
    assert check(mixed_schema(), vocab, plain=False) > 0


def test_json_gbnf_llama3_same_entries(llama3: cfgmask.Vocabulary) -> None:
    assert _check(json_gbnf(), llama3) > 0


def test_json_schema_llama3_same_entries(llama3: cfgmask.Vocabulary) -> None:
    assert _check(mixed_schema(), llama3, plain=False) > 0
