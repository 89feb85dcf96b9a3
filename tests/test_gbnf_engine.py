"""llama.cpp's GBNF vectors and grammars through the C engine (not only the reference)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import cfgmask

from .engine import BYTE_VOCAB, EngineRecognizer
from .helpers import check

CORPUS = Path(__file__).parent / "corpora" / "llama.cpp"
RECORDS = [
    r
    for r in json.loads((CORPUS / "vectors" / "grammar_integration.json").read_text())
    # token-id terminals (<[N]>) parse but do not compile yet; their two records are left out
    if r["kind"] == "gbnf" and not r.get("requires_token_ids")
]


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


def test_token_terminals_are_a_clear_compile_error() -> None:
    g = cfgmask.Grammar.from_gbnf("root ::= <[10]> [a-z]* <[11]>")
    with pytest.raises(cfgmask.GrammarError, match="token terminals"):
        cfgmask.compile(g, BYTE_VOCAB)
