"""The C engine as a plain recognizer, for spec tables (``helpers.check(using=EngineRecognizer)``)."""

from __future__ import annotations

import functools
import json

import cfgmask
from cfgmask import ir

BYTE_VOCAB = cfgmask.Vocabulary.from_token_bytes(
    [bytes([b]) for b in range(256)] + [None], stop_token_ids=[256]
)


class EngineRecognizer:
    """Compiles once; ``accepts`` runs a fresh matcher over the bytes."""

    def __init__(self, grammar: ir.Grammar | cfgmask.Grammar) -> None:
        self.compiled = cfgmask.compile(grammar, BYTE_VOCAB)

    def accepts(self, data: bytes) -> bool:
        m = cfgmask.Matcher(self.compiled)
        return m.accept_bytes(data) and m.is_accepting()

    def is_prefix(self, data: bytes) -> bool:
        return cfgmask.Matcher(self.compiled).accept_bytes(data)


class EmptyLanguage:
    """The recognizer of an empty language (the compiler refuses to build one)."""

    def accepts(self, data: bytes) -> bool:
        return False


@functools.lru_cache(maxsize=64)
def schema_recognizer(text: str, canonical: bool, resources: str = "{}") -> EngineRecognizer | EmptyLanguage:
    """A JSON Schema's recognizer (cached by its text, mode and resources, as JSON text); a
    schema whose language the compiler finds empty gives :class:`EmptyLanguage`."""
    from cfgmask.errors import GrammarError
    from cfgmask.frontends.json_schema import schema_to_grammar

    g, report = schema_to_grammar(json.loads(text), canonical=canonical, resources=json.loads(resources))
    assert report.exact or canonical
    try:
        return EngineRecognizer(g)
    except GrammarError as e:
        assert "language is empty" in str(e)
        return EmptyLanguage()
