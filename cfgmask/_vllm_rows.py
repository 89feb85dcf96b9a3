"""How cfgmask's vLLM plugin follows one request's output (cfgmask.vllm; docs/vllm.md).

``Row`` is shared by both model runners: V1 gives it vLLM's live output list, Model Runner V2
the committed tokens it reads with ``TokenHistory``; ``V2Request`` is one request's logits rows
in a V2 step (one per draft token under speculative decoding).  Nothing here imports vLLM.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from .compile import CompiledGrammar
from .matcher import Matcher

if TYPE_CHECKING:
    from .vllm import GrammarRequest

log = logging.getLogger("cfgmask.vllm")


class Row:
    """A request in the batch: its matcher and how much of its output the matcher has seen.

    Both model runners drive it: V1 hands it vLLM's live output list (``output``, read by
    ``advance``), V2 reads the committed tokens from its token buffer and calls ``sync``.
    ``mark``/``try_token``/``undo`` follow a speculative draft without committing to it."""

    def __init__(
        self,
        req: GrammarRequest,
        compiled: CompiledGrammar | None,
        stops: frozenset[int],
        error: str = "",
        output: list[int] | None = None,
    ) -> None:
        self.req = req
        self.stops = stops
        self.compiled = compiled
        self.output = output  # V1: vLLM's live list
        self.error = error  # set: the row may only stop (compile failed, or forced off the grammar)
        self.marker = req.reasoning_end.encode() if req.reasoning_end else b""
        self.restart()

    def restart(self) -> None:
        self.matcher = Matcher(self.compiled) if self.compiled is not None else None
        self.consumed = 0
        self.in_grammar = not self.marker or bool(self.error)  # a broken row stops at once
        self.tail = b""  # output bytes not yet searched for the marker

    def advance(self) -> None:
        """V1: catch up with the live output list."""
        out = self.output
        assert out is not None
        n = len(out)
        while n and out[n - 1] < 0:  # async scheduling's placeholders: not sampled yet
            n -= 1
        self.sync(n, lambda a, b: out[a:b])

    def sync(self, n: int, read: Callable[[int, int], Sequence[int]]) -> None:
        """Advance to the first ``n`` output tokens; ``read(a, b)`` gives output tokens a..b-1."""
        if n < self.consumed:  # vLLM dropped tokens (a failed KV load): replay what is left
            self.restart()
        if n > self.consumed:
            for t in read(self.consumed, n):
                if what := self._step(int(t)):
                    self._off(what)
            self.consumed = n

    def mark(self) -> tuple[bool, bytes, int]:
        return self.in_grammar, self.tail, self.matcher.num_tokens if self.matcher is not None else 0

    def try_token(self, t: int) -> bool:
        """Advance by a draft token if it keeps the row in its grammar (False: it does not)."""
        return t >= 0 and not self._step(t)

    def undo(self, mark: tuple[bool, bytes, int]) -> None:
        """Back to ``mark`` (the drafts tried since are forgotten)."""
        self.in_grammar, self.tail, steps = mark
        if self.matcher is not None:
            self.matcher.rollback(self.matcher.num_tokens - steps)

    def _step(self, t: int) -> str:
        """Follow one output token; on failure say what left the grammar ("" when fine)."""
        m = self.matcher
        if self.error or m is None:
            return ""
        vocab = m.compiled.vocab
        if not self.in_grammar:
            data = self.tail + (vocab.tokens[t] if 0 <= t < vocab.size else b"")
            at = data.find(self.marker)
            if at < 0:
                self.tail = data[-(len(self.marker) - 1) :] if len(self.marker) > 1 else b""
                return ""
            self.in_grammar = True
            rest = data[at + len(self.marker) :]
            if rest and not m.accept_bytes(rest):
                return f"the bytes {rest!r} after reasoning_end"
            return ""
        if m.is_terminated():
            return ""
        if not (0 <= t < vocab.size and m.accept_token(t)):
            return f"token {t}"
        return ""

    def _off(self, what: str) -> None:
        self.error = f"{what} left the grammar (chosen by something other than this mask)"
        log.error(
            "cfgmask: a request was forced off its %s grammar: %s; it may only stop now", self.req.kind, what
        )


class TokenHistory:
    """Model Runner V2's committed tokens (``req_states.all_token_ids``, ``[slots, max_model_len]``)
    read on the host.  vLLM keeps that buffer in pinned host memory mapped into the GPU (UVA;
    ``StagedWriteTensor._uva_buf``), so a span is a plain numpy slice once the stream has
    caught up; when vLLM keeps it dense on the device instead (``use_dense_all_token_ids``,
    for the ngram_gpu speculator), only the requested spans are gathered and copied."""

    def __init__(self, all_token_ids: Any) -> None:
        buf = getattr(all_token_ids, "_uva_buf", None)
        self.dev: torch.Tensor = all_token_ids.gpu
        host = getattr(buf, "np", None)
        if host is None and self.dev.device.type == "cpu":
            host = self.dev.numpy()
        self.host: np.ndarray | None = host

    def read(self, spans: list[tuple[int, int, int]]) -> list[Sequence[int]]:
        """Tokens ``a..b-1`` of slot ``s`` for each ``(s, a, b)``."""
        if self.host is not None:
            return [self.host[s, a:b].tolist() for s, a, b in spans]
        width = self.dev.shape[1]
        index = np.concatenate([np.arange(s * width + a, s * width + b) for s, a, b in spans])
        flat = self.dev.view(-1)[torch.from_numpy(index).to(self.dev.device)].cpu().tolist()
        out: list[Sequence[int]] = []
        at = 0
        for _, a, b in spans:
            out.append(flat[at : at + b - a])
            at += b - a
        return out


def given(tokens: Sequence[int]) -> Callable[[int, int], Sequence[int]]:
    """A ``Row.sync`` reader that has exactly the tokens asked for already."""
    return lambda _a, _b: tokens


@dataclass
class V2Request:
    """One request of a Model Runner V2 step: its row state and its logits rows (the first,
    then one per draft token, whose input ids are ``drafts``)."""

    slot: int
    row: Row
    logit_rows: list[int]
    drafts: list[int]
