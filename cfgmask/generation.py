"""A constrained decoding loop over a transformers causal LM, with jump-forward.

``generate_stream`` is what ``cfgmask generate`` runs: one sequence, the KV cache kept between
steps, the mask applied to the logits before temperature, and jump-forward: when the grammar
forces the next bytes (``Matcher.jump_forward_bytes``), their tokens are appended without
sampling and the model reads them in one batched forward pass instead of one pass each.

Prefetch (on by default): once a step's tokens are accepted, the next mask is started on a
worker thread (``Matcher.prefetch``) and the model's forward pass runs meanwhile; the sampler
then copies the mask, waiting only for what the forward pass did not hide.  The masks, and so
the output, are the same as without it.  The statistics keep the two apart: ``mask_seconds``
is what the masks cost (as one thread would pay it), ``mask_wait_seconds`` what the sampler
waited for.

Jump-forward must not push the model into token splits it would never produce.  The forced
bytes are tokenized on their own by the model's tokenizer; only a tokenization that spells
the bytes exactly, has no special token and that the matcher accepts is used.  Its last token
might merge with what follows (``":"`` + ``J`` could be one token ``":"J``), so it is taken
only when the grammar allows no longer token that starts with its bytes at that point;
otherwise the model samples it, under the mask, free to pick the longer token.  (The first
forced token cannot merge backwards into a token already emitted: that split is kept.)
"""

from __future__ import annotations

import inspect
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from .bitmask import apply_bitmask_inplace
from .compile import CompiledGrammar
from .errors import MatcherError
from .matcher import Matcher, allocate_bitmask

__all__ = ["GenerationStats", "generate_stream"]


@dataclass
class GenerationStats:
    tokens: int = 0  # tokens appended to the output (stop token not counted)
    sampled: int = 0  # of which sampled under the mask
    jump_tokens: int = 0  # of which appended by jump-forward
    jumps: int = 0  # jump-forward events
    forward_passes: int = 0  # forward passes after the prompt
    forward_seconds: float = 0.0
    prefill_seconds: float = 0.0
    mask_steps: int = 0
    mask_seconds: float = 0.0  # computing (on the worker when prefetched) and applying the masks
    mask_step_seconds: list[float] = field(default_factory=list, repr=False)  # each mask's time
    prefetch_started: int = 0  # masks started on the prefetch worker before a forward pass
    prefetched: int = 0  # of them, computed there (not cancelled and filled in line)
    mask_wait_seconds: float = 0.0  # the sampler's time on the masks: waiting, copying, applying
    mask_wait_step_seconds: list[float] = field(default_factory=list, repr=False)
    mask_blocked_seconds: float = 0.0  # of it, blocked on a worker still filling
    prefetch_submit_seconds: float = field(default=0.0, repr=False)  # of the next mask, so far
    prefetch_submit_total: float = 0.0  # starting the prefetches (counted in mask_wait_seconds)
    jump_seconds: float = 0.0  # finding jump-forward tokens (forced bytes, tokenizing, checks)
    first_token_seconds: float = 0.0  # from the call to the first output token (prefill included)
    total_seconds: float = 0.0  # the whole call
    stop: str = ""  # "stop token" or "max tokens"
    accepting: bool = False  # the output is a complete string of the grammar

    @property
    def forward_passes_saved(self) -> int:
        """Passes a token-by-token loop would have made in addition (one per jumped token,
        less the one batched pass each jump still costs)."""
        return self.jump_tokens - self.jumps

    @property
    def tokens_per_second(self) -> float:
        """Output tokens per second after the first one (the decode rate, prefill excluded)."""
        after = self.total_seconds - self.first_token_seconds
        return (self.tokens - 1) / after if self.tokens > 1 and after > 0 else 0.0

    def summary(self) -> str:
        ms = 1e3 * self.forward_seconds / max(1, self.tokens)
        us = 1e6 * self.mask_seconds / max(1, self.mask_steps)
        # the mean carries the first visits of parser states (each builds its mask-cache
        # entry, up to milliseconds); the median is the steady cost
        median = 1e6 * statistics.median(self.mask_step_seconds) if self.mask_step_seconds else 0.0
        jump = (
            f"{self.jump_tokens} by jump-forward in {self.jumps} jumps, saving "
            f"{self.forward_passes_saved} forward passes and {self.jump_tokens} masked samples"
        )
        ttft, rate = self.first_token_seconds, self.tokens_per_second
        speed = f"time to first token {ttft:.2f} s, then {rate:.1f} tokens/s" if self.tokens else "no token"
        overlap = ""
        if self.prefetch_started:
            waited = 1e6 * self.mask_wait_seconds / max(1, self.mask_steps)
            wmedian = 1e6 * statistics.median(self.mask_wait_step_seconds)
            overlap = (
                f"; {self.prefetched} of {self.mask_steps} masks prefetched during the forward pass, "
                f"the sampler waited {waited:.0f} µs/token for them (median {wmedian:.0f} µs)"
            )
        return (
            f"{self.tokens} tokens ({self.sampled} sampled, {jump}); {speed}; forward {ms:.1f} ms/token "
            f"({self.forward_passes} passes, prefill {1e3 * self.prefill_seconds:.0f} ms); "
            f"mask {us:.0f} µs/token (median {median:.0f} µs){overlap}; stopped at {self.stop}"
            + ("" if self.accepting else " (output incomplete: a prefix of the grammar's language)")
        )


class _Model:
    """The model with its KV cache: ``feed(ids)`` returns the next-token logits."""

    def __init__(self, model: Any, stats: GenerationStats) -> None:
        self.model = model
        self.past: Any = None
        self.stats = stats
        self.device = next(model.parameters()).device
        params = inspect.signature(model.forward).parameters
        # transformers >= 5.2x calls the KV cache ``cache``; earlier ones ``past_key_values``
        self.cache_arg = "cache" if "cache" in params else "past_key_values"
        self.extra = {"logits_to_keep": 1} if "logits_to_keep" in params else {}

    @torch.no_grad()
    def feed(self, ids: Sequence[int], *, prefill: bool = False) -> torch.Tensor:
        t0 = time.perf_counter()
        x = torch.tensor([list(ids)], dtype=torch.long, device=self.device)
        out = self.model(input_ids=x, use_cache=True, **{self.cache_arg: self.past}, **self.extra)
        self.past = out["cache"] if "cache" in out.keys() else out["past_key_values"]
        logits = out.logits[0, -1].float()
        dt = time.perf_counter() - t0
        if prefill:
            self.stats.prefill_seconds += dt
        else:
            self.stats.forward_passes += 1
            self.stats.forward_seconds += dt
        return logits


def generate_stream(
    model: Any,
    compiled: CompiledGrammar,
    prompt_ids: Sequence[int],
    *,
    max_tokens: int = 256,
    temperature: float = 0.0,
    seed: int | None = None,
    encode: Callable[[str], list[int]] | None = None,
    on_bytes: Callable[[bytes], None] | None = None,
    prefetch: bool = True,
) -> tuple[bytes, GenerationStats]:
    """Decode one sequence under ``compiled``; returns the output bytes and statistics.

    ``temperature`` 0 is greedy.  ``encode`` (text -> token ids, no special tokens) enables
    jump-forward; ``on_bytes`` receives each piece of output as it is produced.  ``prefetch``
    computes each mask during the forward pass before it (same output either way).
    """
    if not prompt_ids:
        raise ValueError("the prompt is empty")
    vocab = compiled.vocab
    stats = GenerationStats()
    t_start = time.perf_counter()
    lm = _Model(model, stats)
    gen = torch.Generator().manual_seed(seed) if seed is not None else None
    matcher = Matcher(compiled)
    mask = allocate_bitmask(1, vocab.size)
    out: list[bytes] = []

    def emit(tokens: list[int]) -> None:
        data = vocab.decode(tokens)
        out.append(data)
        if not stats.tokens:
            stats.first_token_seconds = time.perf_counter() - t_start
        stats.tokens += len(tokens)
        if on_bytes is not None:
            on_bytes(data)

    jumper = _Jumper(vocab, encode) if encode is not None else None

    def plan() -> list[int]:
        """After the state changed, before the forward pass: the next step's jump-forward
        tokens (accepted), or else the start of its mask on the prefetch worker."""
        if matcher.is_terminated() or stats.tokens >= max_tokens:
            return []
        jump = jumper.tokens(matcher, max_tokens - stats.tokens) if jumper else []
        if not jump and prefetch:
            t0 = time.perf_counter()
            matcher.prefetch()
            stats.prefetch_started += 1
            stats.prefetch_submit_seconds += time.perf_counter() - t0  # waking the worker
        return jump

    jump = plan()
    logits = lm.feed(prompt_ids, prefill=True)
    while True:
        if matcher.is_terminated():
            stats.stop = "stop token"
            break
        if stats.tokens >= max_tokens:
            stats.stop = "max tokens"
            break
        if jump:
            stats.jumps += 1
            stats.jump_tokens += len(jump)
            emit(jump)
            fed, jump = jump, plan()
            logits = lm.feed(fed)
            continue
        _mask_step(matcher, mask, logits, stats)
        token = _sample(logits, temperature, gen)
        if not matcher.accept_token(token):  # the mask forbids this; never expected
            raise MatcherError(f"sampled token {token} was rejected by the grammar")
        if token in vocab.stop_ids:
            continue
        stats.sampled += 1
        emit([token])
        jump = plan()
        logits = lm.feed([token])
    stats.accepting = matcher.is_accepting()
    stats.jump_seconds = jumper.seconds if jumper else 0.0
    stats.total_seconds = time.perf_counter() - t_start
    return b"".join(out), stats


def _mask_step(matcher: Matcher, mask: Any, logits: torch.Tensor, stats: GenerationStats) -> None:
    """Fill (or take the prefetched) mask and apply it, counting what it cost and what the
    sampler waited for."""
    t0 = time.perf_counter()
    matcher.fill_bitmask(mask)
    t1 = time.perf_counter()
    apply_bitmask_inplace(logits, mask)
    t2 = time.perf_counter()
    timing = matcher.prefetch_timing
    if timing is not None:
        stats.prefetched += 1
        stats.mask_blocked_seconds += timing.wait_seconds
        cost = timing.compute_seconds + (t2 - t1)
    else:
        cost = t2 - t0
    stats.mask_steps += 1
    stats.mask_seconds += cost
    stats.mask_step_seconds.append(cost)
    # the sampler's time on this mask: taking it and applying it, and starting it (before the
    # forward pass: on a busy machine, waking the worker can cost the caller a time slice)
    submit, stats.prefetch_submit_seconds = stats.prefetch_submit_seconds, 0.0
    stats.prefetch_submit_total += submit
    stats.mask_wait_seconds += t2 - t0 + submit
    stats.mask_wait_step_seconds.append(t2 - t0 + submit)


def _sample(logits: torch.Tensor, temperature: float, gen: torch.Generator | None) -> int:
    if temperature <= 0:
        return int(torch.argmax(logits))
    probs = torch.softmax(logits / temperature, dim=-1)
    return int(torch.multinomial(probs.cpu(), 1, generator=gen))


class _Jumper:
    """Turns forced bytes into tokens that are safe to append without sampling."""

    def __init__(self, vocab: Any, encode: Callable[[str], list[int]]) -> None:
        import numpy as np

        self.vocab = vocab
        self.encode = encode
        text_ids = [i for i, _ in vocab.iter_text_tokens()]
        text_ids.sort(key=lambda i: vocab.tokens[i])
        self.order = np.array(text_ids, dtype=np.int64)
        self.keys = [vocab.tokens[i] for i in text_ids]
        self.mask = allocate_bitmask(1, vocab.size)
        self.seconds = 0.0

    def tokens(self, matcher: Matcher, budget: int) -> list[int]:
        """Accept and return the tokens to append, or ``[]`` (matcher unchanged)."""
        t0 = time.perf_counter()
        try:
            return self._tokens(matcher, budget)
        finally:
            self.seconds += time.perf_counter() - t0

    def _tokens(self, matcher: Matcher, budget: int) -> list[int]:
        forced = matcher.jump_forward_bytes()
        if not forced or budget <= 0:
            return []
        text = _utf8_prefix(forced)
        if not text:
            return []
        tokens = self.encode(text)
        vocab = self.vocab
        if not tokens or any(not 0 <= t < vocab.size or t in vocab.special_ids for t in tokens):
            return []
        if vocab.decode(tokens) != text.encode():
            return []
        tokens = tokens[:budget]
        *head, last = tokens
        if head and not matcher.accept_tokens(head):
            return []
        # The last token is taken only when the model could not have chosen a longer token
        # starting with the same bytes here; otherwise the model samples it, under the mask.
        if matcher.accept_token(last):
            matcher.rollback(1)
            if not self._extendable(matcher, vocab.tokens[last]):
                matcher.accept_token(last)
                head.append(last)
        return head

    def _extendable(self, matcher: Matcher, prefix: bytes) -> bool:
        """Does the matcher allow some token strictly longer than ``prefix`` that starts with it?"""
        import bisect

        import numpy as np

        lo = bisect.bisect_right(self.keys, prefix)  # past the equal keys: strictly longer ones
        hi = bisect.bisect_left(self.keys, _prefix_end(prefix), lo) if _prefix_end(prefix) else len(self.keys)
        if lo >= hi:
            return False
        matcher.fill_bitmask(self.mask)
        ids = self.order[lo:hi]
        words = self.mask[0].view(np.uint32)[ids >> 5]
        return bool(((words >> (ids & 31).astype(np.uint32)) & 1).any())


def _prefix_end(prefix: bytes) -> bytes:
    """The smallest byte string greater than every string that starts with ``prefix``
    (empty when there is none: ``prefix`` is all 0xFF)."""
    stripped = prefix.rstrip(b"\xff")
    if not stripped:
        return b""
    return stripped[:-1] + bytes([stripped[-1] + 1])


def _utf8_prefix(data: bytes) -> str:
    """The longest prefix of ``data`` that is whole UTF-8 characters."""
    for cut in range(len(data), max(-1, len(data) - 4), -1):
        try:
            return data[:cut].decode("utf-8")
        except UnicodeDecodeError:
            continue
    return ""
