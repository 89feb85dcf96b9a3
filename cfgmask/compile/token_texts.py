"""Token terminals named by their text (``ir.TokenText``), resolved against a vocabulary.

llama.cpp's GBNF writes a special token by its text, ``<|im_end|>``, and looks it up in the
model's vocabulary when the grammar is loaded: the text must be exactly one token.  The IR keeps
the text (``ir.TokenText``) so that a grammar can be parsed without a vocabulary; ``compile``
calls :func:`resolve_token_texts` first, which rewrites every such node into the ``ir.Token`` of
the id whose bytes are that text.  A special token wins over an ordinary one with the same bytes
(llama.cpp tokenizes the text with special tokens enabled); among equals the lowest id.

Any front end may write ``ir.TokenText``: it records the texts it wrote in
``ir.Grammar.meta[ir.TOKEN_TEXTS]`` (text -> offset in the source), which is what tells
``compile`` to run this pass and where to point an error for a text the vocabulary lacks.
"""

from __future__ import annotations

from collections.abc import Mapping

from .. import ir
from ..errors import GrammarError
from ..vocab import Vocabulary

META_KEY = ir.TOKEN_TEXTS


def token_id_of_text(vocab: Vocabulary, text: bytes) -> int | None:
    """The id a token terminal written as ``text`` stands for, or None."""
    found: int | None = None
    for i, t in enumerate(vocab.tokens):
        if t == text:
            if i in vocab.special_ids:
                return i
            if found is None:
                found = i
    return found


def resolve_token_texts(grammar: ir.Grammar, vocab: Vocabulary, source: str = "") -> ir.Grammar:
    """``grammar`` with every ``ir.TokenText`` replaced by the ``ir.Token`` of its id.

    Raises GrammarError (at the text's first use in ``source``, when known) for a text that
    is not exactly one token of ``vocab``.  A grammar without token texts is returned as is."""
    offsets = grammar.meta.get(META_KEY)
    if not offsets:
        return grammar
    if not isinstance(offsets, Mapping):
        raise TypeError(f"meta[{META_KEY!r}] must map token texts to source offsets")
    ids: dict[bytes, int] = {}
    for text, offset in offsets.items():
        found = token_id_of_text(vocab, text)
        if found is None:
            shown = text.decode("utf-8", "replace")
            message = f"token {shown!r} is not a single token of the vocabulary"
            if source and isinstance(offset, int):
                raise GrammarError.at(message, source, offset)
            raise GrammarError(message)
        ids[text] = found
    memo: dict[int, ir.Expr] = {}
    rules = {name: _rewrite(body, ids, memo) for name, body in grammar.rules.items()}
    meta = {k: v for k, v in grammar.meta.items() if k != META_KEY}
    meta["token_text_ids"] = {t.decode("utf-8", "replace"): i for t, i in ids.items()}
    return ir.Grammar(rules, grammar.start, meta)


def _rewrite(e: ir.Expr, ids: dict[bytes, int], memo: dict[int, ir.Expr]) -> ir.Expr:
    got = memo.get(id(e))
    if got is not None:
        return got
    out: ir.Expr = e
    if isinstance(e, ir.TokenText):
        if e.text not in ids:
            raise GrammarError(f"token {e.text!r} is not listed in the grammar's token texts")
        out = ir.Token((ids[e.text],), e.negated)
    elif isinstance(e, (ir.Seq, ir.Alt)):
        items = tuple(_rewrite(x, ids, memo) for x in e.items)
        if any(a is not b for a, b in zip(items, e.items, strict=True)):
            out = type(e)(items)
    elif isinstance(e, ir.Repeat):
        item = _rewrite(e.item, ids, memo)
        if item is not e.item:
            out = ir.Repeat(item, e.lo, e.hi)
    memo[id(e)] = out
    return out
