"""The engines of ``bench_model_schemas``, each built from a model's Hugging Face tokenizer:
a JSON Schema -> a compiled grammar -> a matcher that fills an int32 bitmask (bit t%32 of word
t//32: token t allowed) and accepts tokens.  Each engine uses its own defaults for JSON Schema
and its own Hugging Face tokenizer adapter; the stop tokens and the vocabulary width (the
model's logits) are the caller's, the same for every engine.

``common.py`` holds the Llama-3 engines of the replay benchmarks; these differ in what they are
built from and in taking a schema rather than a grammar text.
"""

from __future__ import annotations

import inspect
import json
from typing import Any

from .common import CfgmaskMatcherOps, LlguidanceMatcherOps, _dist_version


class CfgmaskEngine(CfgmaskMatcherOps):
    name = "cfgmask"

    def __init__(self, tok: Any, n_vocab: int, stops: list[int]) -> None:
        import cfgmask

        self.cm = cfgmask
        self.version = cfgmask.__version__
        self.vocab = cfgmask.Vocabulary.from_huggingface(tok, stop_token_ids=stops, size=n_vocab)
        self.n_vocab = n_vocab

    def compile(self, schema: Any) -> Any:
        return self.cm.compile(self.cm.Grammar.from_json_schema(schema), self.vocab)

    def matcher(self, compiled: Any) -> Any:
        return self.cm.Matcher(compiled)

    def new_mask(self) -> Any:
        return self.cm.allocate_bitmask(1, self.n_vocab)

    def error(self, m: Any) -> str:
        return ""


class XGrammarEngine:
    name = "xgrammar"

    def __init__(self, tok: Any, n_vocab: int, stops: list[int]) -> None:
        import xgrammar as xgr

        self.xgr = xgr
        self.version = _dist_version("xgrammar")
        info = xgr.TokenizerInfo.from_huggingface(tok, vocab_size=n_vocab, stop_token_ids=stops)
        self.compiler = xgr.GrammarCompiler(info, max_threads=1, cache_enabled=False)
        self.n_vocab = n_vocab

    def compile(self, schema: Any) -> Any:
        return self.compiler.compile_json_schema(json.dumps(schema))

    def matcher(self, compiled: Any) -> Any:
        return self.xgr.GrammarMatcher(compiled)

    def new_mask(self) -> Any:
        return self.xgr.allocate_token_bitmask(1, self.n_vocab)

    def fill(self, m: Any, mask: Any) -> None:
        m.fill_next_token_bitmask(mask, 0)

    def accept(self, m: Any, token: int) -> bool:
        return bool(m.accept_token(token))

    def is_accepting(self, m: Any) -> bool:
        return bool(m.is_completed())

    def error(self, m: Any) -> str:
        return ""


class LlguidanceEngine(LlguidanceMatcherOps):
    name = "llguidance"

    def __init__(self, tok: Any, n_vocab: int, stops: list[int]) -> None:
        import llguidance
        import llguidance.hf
        import llguidance.numpy as llnp

        self.llg, self.llnp = llguidance, llnp
        self._llnp = llnp
        self.version = llguidance.__version__
        self.tokenizer = llguidance.hf.from_tokenizer(tok, n_vocab=n_vocab, eos_token=stops)
        self.n_vocab = n_vocab

    def compile(self, schema: Any) -> Any:
        grammar = self.llg.LLMatcher.grammar_from_json_schema(schema)
        m = self.llg.LLMatcher(self.tokenizer, grammar, log_level=0)
        if m.is_error():
            raise RuntimeError(m.get_error())
        return m

    def new_mask(self) -> Any:
        return self.llnp.allocate_token_bitmask(1, self.n_vocab)


class CfgmaskLegacyEngine(CfgmaskEngine):
    """cfgmask with ``canonical=False``: JSON Schema's whole language (any key order, keys the
    schema does not list, escaped spellings), to set beside the default.  Opt-in."""

    name = "cfgmask-legacy"

    def __init__(self, tok: Any, n_vocab: int, stops: list[int]) -> None:
        super().__init__(tok, n_vocab, stops)
        if "canonical" not in inspect.signature(self.cm.Grammar.from_json_schema).parameters:
            raise ImportError("this cfgmask has no canonical= switch")

    def compile(self, schema: Any) -> Any:
        return self.cm.compile(self.cm.Grammar.from_json_schema(schema, canonical=False), self.vocab)


ENGINE_CLASSES = {e.name: e for e in (CfgmaskEngine, XGrammarEngine, LlguidanceEngine, CfgmaskLegacyEngine)}
