"""cfgmask: grammar-constrained decoding masks from a C core."""

from .errors import CfgmaskError, GrammarError, LimitError, MatcherError, VocabularyError
from .grammar import Grammar

__all__ = [
    "CfgmaskError",
    "Grammar",
    "GrammarError",
    "LimitError",
    "MatcherError",
    "VocabularyError",
]
