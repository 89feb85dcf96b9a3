"""The C engine as a plain recognizer, for spec tables (``helpers.check(using=EngineRecognizer)``)."""

from __future__ import annotations

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
