"""Token terminals named by their text (``ir.NamedToken``: llguidance's ``<|eot_id|>``) are
resolved against the vocabulary when a grammar is compiled for it: the IR says *which* token,
only the vocabulary says *which id*.

A name resolves to the special ids whose bytes are exactly the name (several ids with the same
text all count); if no special token has that text, to the non-special ids that do (an added
token such as Qwen's ``<think>`` is not always marked special).  A name no id has is a
:class:`~cfgmask.errors.GrammarError` naming it.  Front ends that write ``NamedToken`` nodes
list the names in ``meta["token_names"]``, so grammars without any are not walked.
"""

from __future__ import annotations

import threading
import weakref

from .. import ir
from ..errors import GrammarError
from ..vocab import Vocabulary

META_KEY = "token_names"

# Per vocabulary object (by identity: hashing a Vocabulary digests every token): the ids of
# each token text that can name a token (special ids, and text tokens starting with "<"),
# built on first use so a compile does not scan the vocabulary once per name.
_Index = dict[bytes, tuple[tuple[int, ...], tuple[int, ...]]]
_BY_TEXT: dict[int, _Index] = {}
_LOCK = threading.Lock()


def _forget(key: int) -> None:
    with _LOCK:
        _BY_TEXT.pop(key, None)


def _index(vocab: Vocabulary) -> _Index:
    with _LOCK:
        index = _BY_TEXT.get(id(vocab))
    if index is None:
        special: dict[bytes, list[int]] = {}
        text: dict[bytes, list[int]] = {}
        for i in sorted(vocab.special_ids):
            if vocab.tokens[i]:
                special.setdefault(vocab.tokens[i], []).append(i)
        for i, t in enumerate(vocab.tokens):
            if t[:1] == b"<" and i not in vocab.special_ids:
                text.setdefault(t, []).append(i)
        index = {t: (tuple(special.get(t, ())), tuple(text.get(t, ()))) for t in special.keys() | text.keys()}
        with _LOCK:
            if id(vocab) not in _BY_TEXT:
                weakref.finalize(vocab, _forget, id(vocab))
            _BY_TEXT[id(vocab)] = index
    return index


def token_ids(name: str, vocab: Vocabulary) -> tuple[int, ...]:
    """The ids ``name`` stands for in ``vocab`` (see the module docstring)."""
    data = name.encode("utf-8")
    special, text = _index(vocab).get(data, ((), ()))
    found = special or text
    if not found:
        raise GrammarError(f"special token {name} is not in the vocabulary")
    return found


def resolve_token_names(grammar: ir.Grammar, vocab: Vocabulary) -> ir.Grammar:
    """``grammar`` with every ``ir.NamedToken`` replaced by the ``ir.Token`` of its ids."""
    names = grammar.meta.get(META_KEY)
    if not names:
        return grammar
    ids = {n: token_ids(n, vocab) for n in names}  # type: ignore[attr-defined]
    memo: dict[int, ir.Expr] = {}

    def walk(e: ir.Expr) -> ir.Expr:
        out = memo.get(id(e))
        if out is not None:
            return out
        if isinstance(e, ir.NamedToken):
            if e.name not in ids:
                ids[e.name] = token_ids(e.name, vocab)
            out = ir.Token(ids[e.name])
        elif isinstance(e, ir.Seq):
            out = ir.Seq(tuple(walk(x) for x in e.items))
        elif isinstance(e, ir.Alt):
            out = ir.Alt(tuple(walk(x) for x in e.items))
        elif isinstance(e, ir.Repeat):
            out = ir.Repeat(walk(e.item), e.lo, e.hi)
        else:
            out = e
        memo[id(e)] = out
        return out

    rules = {name: walk(body) for name, body in grammar.rules.items()}
    meta = {k: v for k, v in grammar.meta.items() if k != META_KEY}
    return ir.Grammar(rules, grammar.start, meta=meta)
