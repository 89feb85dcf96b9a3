"""The reference matcher over whole tokens, for grammars with token terminals (``ir.Token``).

A prefix is a list of token ids of a vocabulary.  A token is read in two ways and the results
are one Earley set, as the C core merges them:

* as text: its bytes, one Earley step each (never for special tokens or tokens without text);
* as a token: every item of the set before it that waits on a ``Tok`` terminal matching its
  id advances over it, into the set its last byte made (or a set of its own).

Stop tokens end the text: allowed where the prefix is complete, and also where a token
terminal lists one by id (then it is read as a token); a negated set never matches them.
Grammars with lookahead markers are out of scope here (a marker before a token would need
its set closed twice: the text's next character, and no character).
"""

from __future__ import annotations

from collections.abc import Sequence

from cfgmask import ir

from .reference import Item, ReferenceMatcher, Tok, _Set


class TokenReferenceMatcher(ReferenceMatcher):
    def __init__(
        self,
        grammar: ir.Grammar,
        tokens: Sequence[bytes | None],
        stop_ids: Sequence[int] = (),
        special_ids: Sequence[int] = (),
    ) -> None:
        super().__init__(grammar)
        if self._lookahead:
            raise NotImplementedError("lookahead markers with token terminals are out of scope")
        self.tokens = tokens
        self.stops = set(stop_ids)
        self.specials = set(special_ids) | self.stops  # stop tokens are special (Vocabulary)

    def chart(self, ids: Sequence[int]) -> list[_Set] | None:
        """The chart after reading ``ids`` (no stop tokens); None once it dies."""
        chart = [self._initial]
        for t in ids:
            if not self._advance(chart, t):
                return None
        return chart

    def accepts_ids(self, ids: Sequence[int]) -> bool:
        chart = self.chart(ids)
        return chart is not None and self._is_final(chart)

    def mask_ids(self, ids: Sequence[int]) -> list[bool]:
        """Which tokens may follow ``ids``."""
        chart = self.chart(ids)
        assert chart is not None, "the prefix is not viable"
        done = self._is_final(chart)
        out = []
        for t in range(len(self.tokens)):
            n = len(chart)
            out.append(self._advance(chart, t) or (t in self.stops and done))
            del chart[n:]
        return out

    def _advance(self, chart: list[_Set], t: int) -> bool:
        """Append the sets token ``t`` makes; whether the last one is non-empty."""
        as_token: list[Item] = [
            (p, d + 1, o, b"")
            for p, d, o, partial in chart[-1].scanning
            if isinstance(sym := self._prods[p].rhs[d], Tok)
            and not partial
            and sym.matches(t)
            and not (sym.negated and t in self.stops)
        ]
        text = self.tokens[t]
        n = len(chart)
        if text and t not in self.specials:
            for b in text[:-1]:
                chart.append(self._step(chart, b))
                if not chart[-1].items:
                    break
            else:
                seeds = self._scan(chart, text[-1]) + as_token
                chart.append(self._close(chart, seeds))
                return bool(chart[-1].items)
            del chart[n:]
        if not as_token:
            return False
        chart.append(self._close(chart, as_token))
        return True
