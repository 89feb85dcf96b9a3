"""vLLM integration: a v1 ``LogitsProcessor`` that keeps each request inside its own grammar.

Installed with ``pip install 'cfgmask[vllm]'`` it registers itself under the entry-point group
``vllm.logits_processors``, so ``LLM(model)`` and the OpenAI server load it with no argument.
A request asks for a grammar through ``SamplingParams.extra_args`` (the server's
``vllm_xargs``), with flat keys::

    json_schema | gbnf | lark | regex | json | ebnf | structural_tag   (exactly one)
    whitespace, canonical, strict, start                            (options of that kind)
    reasoning_end                                                   (free text until it)

A request without these keys is left alone.  See docs/vllm.md.

How a row is followed: ``update_state`` records vLLM's batch changes (removed, then added, then
moved, as ``BatchUpdate`` says); each added request gets a fresh matcher and the *live* list of
its output tokens.  ``apply`` first feeds every row the tokens its list gained since the last
step (a preempted request comes back with its whole output, which is replayed into the fresh
matcher; async scheduling's ``-1`` placeholders are left for the next step), then fills the
bitmasks and masks the logits.  A finished grammar allows only the request's stop ids, which are
exactly those vLLM stops on (``eos_token_id`` and ``stop_token_ids`` of the request, after vLLM
merged the generation config into them), so it never runs on unconstrained.
"""

from __future__ import annotations

import collections
import logging
import os
import sys
import threading
import time
import weakref
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

import numpy as np
import torch
from vllm.v1.sample.logits_processor import BatchUpdate, LogitsProcessor, MoveDirectionality

from .bitmask import apply_bitmask_inplace, fill_bitmasks
from .compile import CompiledGrammar
from .errors import CfgmaskError, GrammarError
from .grammar_cache import KINDS, GrammarCache
from .matcher import Matcher, bitmask_words
from .vocab import Vocabulary

__all__ = ["CfgmaskLogitsProcessor", "GrammarRequest", "StepStats", "grammar_request", "processors"]

log = logging.getLogger("cfgmask.vllm")

OPTION_KEYS = ("whitespace", "canonical", "strict", "start")
_BOOLS = {"true": True, "false": False, "1": True, "0": False}


@dataclass(frozen=True)
class GrammarRequest:
    """What a request's ``extra_args`` ask for."""

    kind: str
    source: Any
    options: dict[str, Any]
    reasoning_end: str | None = None


def grammar_request(params: Any) -> GrammarRequest | None:
    """The grammar a ``SamplingParams`` asks for (None: an unconstrained request).  Raises
    :class:`GrammarError` (a ValueError: vLLM answers 400) for a malformed request."""
    args = getattr(params, "extra_args", None) or {}
    kinds = [k for k in KINDS if k in args]
    options = {k: args[k] for k in OPTION_KEYS if k in args}
    reasoning_end = args.get("reasoning_end")
    if not kinds:
        if options or reasoning_end is not None:
            named = ", ".join([*options, *(["reasoning_end"] if reasoning_end is not None else [])])
            raise GrammarError(f"{named} given without a grammar (one of {', '.join(KINDS)})")
        return None
    if len(kinds) > 1:
        raise GrammarError(f"one grammar per request, got {', '.join(kinds)}")
    if getattr(params, "structured_outputs", None) is not None:
        raise GrammarError(f"{kinds[0]} (cfgmask) and structured_outputs (vLLM's backend) both given")
    kind = kinds[0]
    source = args[kind]
    if kind == "json":
        source = ""  # any JSON value; the key's value is not used
    elif kind in ("json_schema", "structural_tag"):
        if not isinstance(source, str | dict | bool):
            raise GrammarError(f"{kind} must be JSON text or an object, not {type(source).__name__}")
    elif not isinstance(source, str):
        raise GrammarError(f"{kind} must be text, not {type(source).__name__}")
    for name in ("canonical", "strict"):
        v = options.get(name)
        if isinstance(v, str) and v.lower() in _BOOLS:
            options[name] = _BOOLS[v.lower()]
        elif isinstance(v, int) and not isinstance(v, bool) and v in (0, 1):
            options[name] = bool(v)
    if reasoning_end is not None and (not isinstance(reasoning_end, str) or not reasoning_end):
        raise GrammarError(f"reasoning_end must be a non-empty string, not {reasoning_end!r}")
    if getattr(params, "ignore_eos", False) and not getattr(params, "stop_token_ids", None):
        raise GrammarError("ignore_eos leaves the grammar no stop token to end on: pass stop_token_ids")
    return GrammarRequest(kind, source, options, reasoning_end)


# ---- what the processes share ---------------------------------------------------------------

_CACHE: GrammarCache | None = None
_CACHE_LOCK = threading.Lock()


def shared_cache() -> GrammarCache:
    """The process's grammar cache: ``$CFGMASK_VLLM_CACHE_SIZE`` entries (default 256) in memory,
    and ``$CFGMASK_VLLM_CACHE_DIR`` on disk (default ``~/.cache/cfgmask/grammars``; empty:
    memory only).  The front end compiles each request's grammar while validating it; with
    the directory, the engine process reads those tables back instead of compiling again."""
    global _CACHE
    with _CACHE_LOCK:
        if _CACHE is None:
            directory = os.environ.get("CFGMASK_VLLM_CACHE_DIR")
            if directory is None:
                from .cli import cache_dir

                directory = str(cache_dir() / "grammars")
            size = int(os.environ.get("CFGMASK_VLLM_CACHE_SIZE", "256"))
            _CACHE = GrammarCache(max_entries=size, directory=directory or None)
        return _CACHE


class _Vocabularies:
    """One cfgmask Vocabulary per (tokenizer, logit width, stop-id set); the C trie is built once
    per entry, and requests with vLLM's usual stop ids share one."""

    def __init__(self, tokenizer: Any, size: int) -> None:
        self.tokenizer = tokenizer
        self.size = size
        self._by_stops: dict[frozenset[int], Vocabulary] = {}
        self._lock = threading.Lock()

    def get(self, stops: frozenset[int]) -> Vocabulary:
        with self._lock:
            v = self._by_stops.get(stops)
            if v is None:
                base = next(iter(self._by_stops.values()), None)
                if base is None:
                    v = Vocabulary.from_huggingface(
                        self.tokenizer, stop_token_ids=sorted(stops), size=self.size
                    )
                else:
                    v = Vocabulary(
                        base.tokens,
                        stop_token_ids=sorted(stops),
                        special_token_ids=base.special_ids,
                        size=base.size,
                        scheme=base.scheme,
                    )
                self._by_stops[stops] = v
            return v


_FRONTEND_VOCABS: dict[int, tuple[Any, _Vocabularies]] = {}


def _frontend_vocabularies() -> tuple[_Vocabularies, Any] | None:
    """The tokenizer of the vLLM front end validating this request.  ``validate_params`` gets
    only the SamplingParams, so look for vLLM's InputProcessor among the callers (it holds the
    tokenizer and the generation config).  None when not found: validation is then the front end
    only, and the engine compiles."""
    frame: FrameType | None = sys._getframe(2)
    for _ in range(8):
        if frame is None:
            return None
        obj = frame.f_locals.get("self")
        if obj is not None and hasattr(obj, "generation_config_fields") and hasattr(obj, "tokenizer"):
            tok = obj.tokenizer
            if tok is None:
                return None
            got = _FRONTEND_VOCABS.get(id(tok))
            if got is None or got[0] is not tok:
                size = int(obj.model_config.get_vocab_size())
                got = (tok, _Vocabularies(tok, size))
                _FRONTEND_VOCABS[id(tok)] = got
            return got[1], obj
        frame = frame.f_back
    return None


def _eos_ids(generation_config: dict[str, Any] | None) -> set[int]:
    eos = (generation_config or {}).get("eos_token_id")
    if eos is None:
        return set()
    return {eos} if isinstance(eos, int) else set(eos)


def request_stop_ids(params: Any) -> frozenset[int]:
    """The ids vLLM stops this request on (``check_stop``: the EOS unless ``ignore_eos``, and
    ``stop_token_ids``, into which vLLM has merged the generation config's EOS ids)."""
    stops = set(params.stop_token_ids or ())
    if params.eos_token_id is not None:
        stops.add(params.eos_token_id)
    return frozenset(stops)


# ---- one row --------------------------------------------------------------------------------


class _Row:
    """A request in the batch: its matcher and where it is in its output."""

    def __init__(
        self,
        req: GrammarRequest,
        compiled: CompiledGrammar | None,
        output: list[int],
        stops: frozenset[int],
        error: str = "",
    ) -> None:
        self.req = req
        self.stops = stops
        self.compiled = compiled
        self.output = output  # vLLM's live list
        self.error = error  # set: the row may only stop (compile failed, or forced off the grammar)
        self.marker = req.reasoning_end.encode() if req.reasoning_end else b""
        self.restart()

    def restart(self) -> None:
        self.matcher = Matcher(self.compiled) if self.compiled is not None else None
        self.consumed = 0
        self.in_grammar = not self.marker or bool(self.error)  # a broken row stops at once
        self.tail = b""  # output bytes not yet searched for the marker

    def advance(self) -> None:
        out = self.output
        n = len(out)
        while n and out[n - 1] < 0:  # async scheduling's placeholders: not sampled yet
            n -= 1
        if n < self.consumed:  # vLLM dropped tokens (a failed KV load): replay what is left
            self.restart()
        for t in out[self.consumed : n]:
            self._feed(t)
        self.consumed = n

    def _feed(self, t: int) -> None:
        m = self.matcher
        if self.error or m is None:
            return
        vocab = m.compiled.vocab
        if not self.in_grammar:
            data = self.tail + (vocab.tokens[t] if 0 <= t < vocab.size else b"")
            at = data.find(self.marker)
            if at < 0:
                self.tail = data[-(len(self.marker) - 1) :] if len(self.marker) > 1 else b""
                return
            self.in_grammar = True
            rest = data[at + len(self.marker) :]
            if rest and not m.accept_bytes(rest):
                self._off(f"the bytes {rest!r} after reasoning_end")
            return
        if m.is_terminated():
            return
        if not (0 <= t < vocab.size and m.accept_token(t)):
            self._off(f"token {t}")

    def _off(self, what: str) -> None:
        self.error = f"{what} left the grammar (chosen by something other than this mask)"
        log.error(
            "cfgmask: a request was forced off its %s grammar: %s; it may only stop now", self.req.kind, what
        )


@dataclass
class StepStats:
    """``apply`` calls, masked rows, the seconds of the last ``keep`` calls, and ``replays``:
    requests added back with output already generated (vLLM preempted them)."""

    steps: int = 0
    rows: int = 0
    replays: int = 0
    keep: int = 100_000
    seconds: collections.deque[float] = field(default_factory=collections.deque)

    def add(self, rows: int, seconds: float) -> None:
        self.steps += 1
        self.rows += rows
        self.seconds.append(seconds)
        if len(self.seconds) > self.keep:
            self.seconds.popleft()


_INSTANCES: weakref.WeakSet[CfgmaskLogitsProcessor] = weakref.WeakSet()


def processors() -> list[CfgmaskLogitsProcessor]:
    """The live processors of this process (the engine's, when it runs in this process:
    ``VLLM_ENABLE_V1_MULTIPROCESSING=0``); for benchmarks and tests."""
    return list(_INSTANCES)


try:  # vLLM's Model Runner V2 has its own processor interface and refuses plugins without it
    from vllm.v1.worker.gpu.sample.logits_processor.interface import LogitsProcessor as _V2Processor
except ImportError:  # pragma: no cover - older vLLM
    _V2Processor = object  # type: ignore[misc,assignment]

V2_UNSUPPORTED = (
    "cfgmask's vLLM plugin implements the V1 model runner's logits-processor interface only; "
    "start vLLM with VLLM_USE_V2_MODEL_RUNNER=0 for grammar requests"
)


class CfgmaskLogitsProcessor(LogitsProcessor, _V2Processor):  # type: ignore[misc]
    """Grammar-constrained decoding for vLLM's v1 model runner (see the module docstring).

    ``$CFGMASK_VLLM_THREADS`` (default 1) threads fill a step's bitmasks: vLLM pins its own
    threads to cores, and more fill threads would take time from them.

    Under Model Runner V2 (``__init__(vllm_config, req_states)``) the class loads, so that vLLM
    starts and serves free requests, but grammar requests are refused with a 400 in
    ``validate_params``; one that got past it is ended at once (stop ids only), never served free.
    """

    def __init__(self, vllm_config: Any, *args: Any) -> None:
        self.v2 = len(args) == 1
        self.rows: dict[int, _Row] = {}
        self.v2_rows: dict[int, frozenset[int]] = {}
        self.stats = StepStats()
        self._bitmask = np.zeros((0, 0), dtype=np.int32)
        self._stop_rows: dict[frozenset[int], np.ndarray] = {}
        if self.v2:
            log.warning("cfgmask: %s", V2_UNSUPPORTED)
            return
        from vllm.tokenizers.registry import cached_tokenizer_from_config

        model_config = vllm_config.model_config
        tokenizer = cached_tokenizer_from_config(model_config)
        self.vocabs = _Vocabularies(tokenizer, int(model_config.get_vocab_size())) if tokenizer else None
        self.threads = int(os.environ.get("CFGMASK_VLLM_THREADS", "1"))
        self.cache = shared_cache()
        _INSTANCES.add(self)

    # ---- the interface ---------------------------------------------------------------------

    @classmethod
    def validate_params(cls, sampling_params: Any) -> None:
        """Parse the request's grammar (and compile it, when the front end's tokenizer can be
        found: then every error a compile can raise is a 400 here, and the engine finds the
        grammar in the cache).  Raises a ValueError with cfgmask's message."""
        try:
            req = grammar_request(sampling_params)
            if req is None:
                return
            if getattr(sampling_params, "min_tokens", 0):
                # vLLM's min-tokens processor blocks the stop ids before ours runs: a grammar that
                # is complete earlier would leave its row no allowed token
                raise _RequestError(
                    "cfgmask: min_tokens cannot be combined with a grammar (the grammar decides "
                    "where the output ends); drop min_tokens or put a length bound in the grammar"
                )
            found = _frontend_vocabularies()
            if found is None:
                from .grammar_cache import parse_grammar

                parse_grammar(req.kind, req.source, req.options)
                return
            vocabs, processor = found
            if getattr(getattr(processor, "vllm_config", None), "use_v2_model_runner", False):
                raise GrammarError(V2_UNSUPPORTED)
            stops = set(sampling_params.stop_token_ids or ())
            if not sampling_params.ignore_eos:
                eos = processor.renderer.get_eos_token_id()
                stops |= _eos_ids(processor.generation_config_fields) | ({eos} if eos is not None else set())
            shared_cache().get(req.kind, req.source, vocabs.get(frozenset(stops)), req.options)
        except CfgmaskError as e:
            raise _RequestError(f"cfgmask: {e}") from None

    def is_argmax_invariant(self) -> bool:
        return False  # the mask changes which token is largest

    def update_state(self, batch_update: BatchUpdate | None) -> None:
        if batch_update is None:
            return
        for index in batch_update.removed:
            self.rows.pop(index, None)
        for index, params, _prompt, output in batch_update.added:
            row = self._new_row(params, output)
            if row is None:
                self.rows.pop(index, None)
            else:
                self.rows[index] = row
        for a, b, direction in batch_update.moved:
            ra, rb = self.rows.pop(a, None), self.rows.pop(b, None)
            if ra is not None:
                self.rows[b] = ra
            if rb is not None and direction == MoveDirectionality.SWAP:
                self.rows[a] = rb

    def add_request(self, req_idx: int, sampling_params: Any) -> bool:
        """Model Runner V2: a grammar request that got past validation may only stop."""
        try:
            req = grammar_request(sampling_params)
        except CfgmaskError:
            req = GrammarRequest("regex", "", {})
        if req is None:
            self.v2_rows.pop(req_idx, None)
            return False
        log.error("cfgmask: a grammar request under Model Runner V2 is ended: %s", V2_UNSUPPORTED)
        self.v2_rows[req_idx] = request_stop_ids(sampling_params)
        return True

    def apply(self, logits: torch.Tensor, ctx: Any = None) -> torch.Tensor:
        if ctx is not None:
            return self._apply_v2(logits, ctx)
        if not self.rows:
            return logits
        t0 = time.perf_counter()
        n, width = logits.shape
        self._ensure_bitmask(n, width)
        live: list[Matcher] = []
        live_rows: list[int] = []
        masked: list[int] = []
        for index, row in self.rows.items():
            if index >= n:
                continue
            row.advance()
            if not row.in_grammar:
                continue  # still reasoning: free text
            masked.append(index)
            m = row.matcher
            if row.error or m is None or m.is_terminated():
                self._bitmask[index] = self._stop_mask(row.stops)
            else:
                live.append(m)
                live_rows.append(index)
        if live:
            fill_bitmasks(live, self._bitmask, rows=live_rows, threads=self.threads)
        if masked:
            apply_bitmask_inplace(logits, self._bitmask[:n], masked)
        self.stats.add(len(masked), time.perf_counter() - t0)
        return logits

    def _apply_v2(self, logits: torch.Tensor, ctx: Any) -> torch.Tensor:
        if not self.v2_rows:
            return logits
        slots = ctx.expanded_idx_mapping.tolist()
        rows = [r for r, slot in enumerate(slots) if slot in self.v2_rows]
        if rows:
            self._ensure_bitmask(logits.shape[0], logits.shape[1])
            for r in rows:
                self._bitmask[r] = self._stop_mask(self.v2_rows[slots[r]])
            apply_bitmask_inplace(logits, self._bitmask[: logits.shape[0]], rows)
        return logits

    def _ensure_bitmask(self, n: int, width: int) -> None:
        if self._bitmask.shape[0] < n or self._bitmask.shape[1] != bitmask_words(width):
            self._bitmask = np.zeros((max(n, 2 * self._bitmask.shape[0]), bitmask_words(width)), np.int32)

    # ---- helpers -----------------------------------------------------------------------

    def _new_row(self, params: Any, output: list[int]) -> _Row | None:
        try:
            req = grammar_request(params)
        except CfgmaskError as e:  # validate_params let it through: never serve it unconstrained
            return _Row(GrammarRequest("regex", "", {}), None, output, request_stop_ids(params), str(e))
        if req is None:
            return None
        if any(t >= 0 for t in output):
            self.stats.replays += 1
        if self.vocabs is None:
            no_tok = "vLLM runs without a tokenizer (skip_tokenizer_init)"
            return _Row(req, None, output, request_stop_ids(params), no_tok)
        stops = request_stop_ids(params)
        vocab = self.vocabs.get(stops)
        row_error = ""
        compiled = None
        try:
            compiled = self.cache.get(req.kind, req.source, vocab, req.options)
        except CfgmaskError as e:
            row_error = f"the grammar did not compile in the engine: {e}"
            log.error("cfgmask: %s; the request may only stop", row_error)
        return _Row(req, compiled, output, stops, row_error)

    def _stop_mask(self, stops: frozenset[int]) -> np.ndarray:
        mask = self._stop_rows.get(stops)
        if mask is None:
            mask = np.zeros(self._bitmask.shape[1], dtype=np.int32)
            bits = mask.view(np.uint32)
            for s in stops:
                if s // 32 < len(bits):
                    bits[s // 32] |= np.uint32(1 << (s % 32))
            self._stop_rows[stops] = mask
        return mask


class _RequestError(ValueError):
    """A bad request (vLLM turns a ValueError from validate_params into HTTP 400)."""
