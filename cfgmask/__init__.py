"""cfgmask: grammar-constrained decoding masks from a C core.

vocab = cfgmask.Vocabulary.from_huggingface(tokenizer)
compiled = cfgmask.compile(cfgmask.Grammar.from_gbnf(text), vocab)
matcher = cfgmask.Matcher(compiled)
mask = cfgmask.allocate_bitmask(1, vocab.size)
matcher.fill_bitmask(mask, 0); ...; matcher.accept_token(t)
cfgmask.clear_caches()  # the next compile starts cold
"""

from .bitmask import apply_bitmask_inplace, fill_bitmasks
from .compile import CompiledGrammar, CompileLimits, MatcherLimits, clear_caches, compile
from .errors import CfgmaskError, GrammarError, LimitError, MatcherError, VocabularyError
from .grammar import Grammar
from .grammar_cache import GrammarCache
from .matcher import Matcher, allocate_bitmask
from .vocab import Vocabulary

__version__ = "0.1.0"

__all__ = [
    "CfgmaskError",
    "CompileLimits",
    "CompiledGrammar",
    "Grammar",
    "GrammarCache",
    "GrammarError",
    "GrammarLogitsProcessor",
    "LimitError",
    "Matcher",
    "MatcherError",
    "MatcherLimits",
    "Vocabulary",
    "VocabularyError",
    "allocate_bitmask",
    "apply_bitmask_inplace",
    "clear_caches",
    "compile",
    "fill_bitmasks",
]


def __getattr__(name: str) -> object:
    # Lazy, so that ``import cfgmask`` never imports torch or transformers.
    if name == "GrammarLogitsProcessor":
        from .transformers import GrammarLogitsProcessor

        return GrammarLogitsProcessor
    raise AttributeError(f"module 'cfgmask' has no attribute {name!r}")
