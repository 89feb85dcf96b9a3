"""llama.cpp's GBNF vectors and grammars through the C engine (not only the reference)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import cfgmask

from .engine import BYTE_VOCAB, EngineRecognizer
from .helpers import check

CORPUS = Path(__file__).parent / "corpora" / "llama.cpp"
ALL = json.loads((CORPUS / "vectors" / "grammar_integration.json").read_text())
RECORDS = [r for r in ALL if r["kind"] == "gbnf" and not r.get("requires_token_ids")]
TOKEN_RECORDS = [r for r in ALL if r["kind"] == "gbnf" and r.get("requires_token_ids")]

# ids 0-99 are special tokens "<tN>" (99 the stop token), byte b is token 100 + b
TOKEN_VOCAB = cfgmask.Vocabulary.from_token_bytes(
    [f"<t{i}>".encode() for i in range(100)] + [bytes([b]) for b in range(256)],
    special_token_ids=range(100),
    stop_token_ids=[99],
)


@pytest.mark.parametrize("record", RECORDS, ids=[r["name"] for r in RECORDS])
def test_integration_vectors(record) -> None:
    g = cfgmask.Grammar.from_gbnf(record["grammar"])
    check(g.ir, accepts=record["pass"], rejects=record["fail"], using=EngineRecognizer)


@pytest.mark.parametrize("record", RECORDS, ids=[r["name"] for r in RECORDS])
def test_incomplete_strings_are_prefixes_not_matches(record) -> None:
    rec = EngineRecognizer(cfgmask.Grammar.from_gbnf(record["grammar"]))
    for s in record.get("incomplete", []):
        assert rec.is_prefix(s.encode()) and not rec.accepts(s.encode())


@pytest.mark.parametrize("path", sorted((CORPUS / "grammars").glob("*.gbnf")), ids=lambda p: p.name)
def test_corpus_grammars_compile(path) -> None:
    compiled = cfgmask.compile(cfgmask.Grammar.from_gbnf(path.read_text()), BYTE_VOCAB)
    m = cfgmask.Matcher(compiled)
    assert m.allowed_tokens().size > 0


def _token_ids(segments) -> list[int]:
    out: list[int] = []
    for seg in segments:
        out += [seg["token"]] if isinstance(seg, dict) else [100 + b for b in seg.encode()]
    return out


def _mask_agrees_with_accept(m: cfgmask.Matcher) -> None:
    """Every token the mask allows is accepted, every other one rejected (state kept)."""
    allowed = set(m.allowed_tokens().tolist())
    for t in range(TOKEN_VOCAB.size):
        ok = m.accept_token(t)
        if ok:
            m.rollback(1)
        assert ok == (t in allowed), t


@pytest.mark.parametrize("record", TOKEN_RECORDS, ids=[r["name"] for r in TOKEN_RECORDS])
def test_token_terminal_vectors(record) -> None:
    compiled = cfgmask.compile(cfgmask.Grammar.from_gbnf(record["grammar"]), TOKEN_VOCAB)
    for segments, expected in [(s, True) for s in record["pass"]] + [(s, False) for s in record["fail"]]:
        m = cfgmask.Matcher(compiled)
        ok = all(m.accept_token(t) for t in _token_ids(segments)) and m.is_accepting()
        assert ok == expected, segments


@pytest.mark.parametrize("record", TOKEN_RECORDS, ids=[r["name"] for r in TOKEN_RECORDS])
def test_token_terminal_masks_agree_with_accept(record) -> None:
    compiled = cfgmask.compile(cfgmask.Grammar.from_gbnf(record["grammar"]), TOKEN_VOCAB)
    for segments in record["pass"][:2]:
        m = cfgmask.Matcher(compiled)
        for t in _token_ids(segments):
            _mask_agrees_with_accept(m)
            assert m.accept_token(t)
        _mask_agrees_with_accept(m)
        assert m.is_accepting()


def test_token_terminal_masks() -> None:
    compiled = cfgmask.compile(cfgmask.Grammar.from_gbnf("root ::= <[10]> ( !<[11]> )* <[11]>"), TOKEN_VOCAB)
    m = cfgmask.Matcher(compiled)
    assert m.allowed_tokens().tolist() == [10]
    assert m.jump_forward_bytes() == b""
    assert m.accept_token(10)
    allowed = set(m.allowed_tokens().tolist())
    assert 11 in allowed and 10 in allowed and 100 + ord("x") in allowed
    assert 99 not in allowed  # stop tokens only end the text
    assert m.accept_token(11) and m.is_accepting()
    assert m.allowed_tokens().tolist() == [99]


def test_token_terminal_out_of_range_is_a_grammar_error() -> None:
    g = cfgmask.Grammar.from_gbnf("root ::= <[100000]>")
    with pytest.raises(cfgmask.GrammarError, match="out of range"):
        cfgmask.compile(g, TOKEN_VOCAB)
