"""vLLM integration: a ``LogitsProcessor`` that keeps each request inside its own grammar, for
both of vLLM's model runners (V1's interface and Model Runner V2's, one class).

Installed with ``pip install 'cfgmask[vllm]'`` it registers itself under the entry-point group
``vllm.logits_processors``, so ``LLM(model)`` and the OpenAI server load it with no argument.
A request asks for a grammar through ``SamplingParams.extra_args`` (the server's
``vllm_xargs``), with flat keys::

    json_schema | gbnf | lark | regex | json | ebnf | structural_tag   (exactly one)
    whitespace, canonical, strict, start                            (options of that kind)
    reasoning_end                                                   (free text until it)

A request without these keys is left alone.  See docs/vllm.md.

How a row is followed under the V1 runner: ``update_state`` records vLLM's batch changes
(removed, then added, then moved, as ``BatchUpdate`` says); each added request gets a fresh
matcher and the *live* list of its output tokens. ``apply`` first feeds every row the tokens its
list gained since the last step (a preempted request comes back with its whole output, which is
replayed into the fresh matcher; async scheduling's ``-1`` placeholders are left for the next
step), then fills the bitmasks and masks the logits. A finished grammar allows only the
request's stop ids, which are exactly those vLLM stops on (``eos_token_id`` and
``stop_token_ids`` of the request, after vLLM merged the generation config into them), so it
never runs on unconstrained.

Under Model Runner V2 a request holds a slot (``add_request``), and ``apply(logits, ctx)`` reads
each row's new committed tokens from vLLM's ``req_states`` and masks draft rows exactly; the row
logic (``Row``) and the mask fill are the same code (see ``_apply_v2`` and docs/vllm.md).
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

from ._vllm_rows import Row, TokenHistory, V2Request, given
from .bitmask import apply_bitmask_inplace, fill_bitmasks
from .errors import CfgmaskError, GrammarError, MatcherError
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


class CfgmaskLogitsProcessor(LogitsProcessor, _V2Processor):  # type: ignore[misc]
    """Grammar-constrained decoding for vLLM's model runners (see the module docstring).

    V1 builds it as ``(vllm_config, device, is_pin_memory)`` and drives ``update_state`` and
    ``apply(logits)``; Model Runner V2 as ``(vllm_config, req_states)`` and drives
    ``add_request(slot, params)`` and ``apply(logits, ctx)`` (see :meth:`_apply_v2`).
    ``$CFGMASK_VLLM_THREADS`` (default 1) threads fill a step's bitmasks: vLLM pins its own
    threads to cores, and more fill threads would take time from them.
    """

    def __init__(self, vllm_config: Any, *args: Any) -> None:
        from vllm.tokenizers.registry import cached_tokenizer_from_config

        self.req_states = args[0] if len(args) == 1 else None  # V2's LogitsProcRequestState
        self.rows: dict[int, Row] = {}  # V1: batch index; V2: request slot
        self.stats = StepStats()
        self._bitmask = np.zeros((0, 0), dtype=np.int32)
        self._stop_rows: dict[frozenset[int], np.ndarray] = {}
        model_config = vllm_config.model_config
        tokenizer = cached_tokenizer_from_config(model_config)
        self.vocabs = _Vocabularies(tokenizer, int(model_config.get_vocab_size())) if tokenizer else None
        self.threads = int(os.environ.get("CFGMASK_VLLM_THREADS", "1"))
        self.cache = shared_cache()
        self._history = TokenHistory(self.req_states.all_token_ids) if self.req_states is not None else None
        _INSTANCES.add(self)

    # ---- the interface ---------------------------------------------------------------------

    @classmethod
    def validate_params(cls, sampling_params: Any) -> None:
        """Parse the request's grammar (and compile it, when the front end's tokenizer can be
        found: then every error a compile can raise is a 400 here, and the engine finds the
        grammar in the cache).  Raises a ValueError with cfgmask's message.  Both runners'
        front ends call it from ``InputProcessor._validate_params`` (V2 through the validator
        of ``build_custom_logits_processors_params_validator``)."""
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
        """V1: follow the batch's removed, added and moved rows."""
        if batch_update is None:
            return
        for index in batch_update.removed:
            self.rows.pop(index, None)
        for index, params, _prompt, output in batch_update.added:
            row = self._new_row(params, output)
            if row is None:
                self.rows.pop(index, None)
                continue
            self.rows[index] = row
            if any(t >= 0 for t in output):
                self.stats.replays += 1
        for a, b, direction in batch_update.moved:
            ra, rb = self.rows.pop(a, None), self.rows.pop(b, None)
            if ra is not None:
                self.rows[b] = ra
            if rb is not None and direction == MoveDirectionality.SWAP:
                self.rows[a] = rb

    def add_request(self, req_idx: int, sampling_params: Any) -> bool:
        """V2: a request takes slot ``req_idx`` (a recycled slot: whatever it held is dropped).
        A request resumed after preemption comes back with its partial output
        (``prefill_len > prompt_len``); its fresh row replays it at the next ``apply``."""
        row = self._new_row(sampling_params)
        if row is None:
            self.rows.pop(req_idx, None)
            return False
        self.rows[req_idx] = row
        rs = self.req_states
        if rs is not None and int(rs.prefill_len.np[req_idx]) > int(rs.prompt_len.np[req_idx]):
            self.stats.replays += 1
        return True

    def apply(self, logits: torch.Tensor, ctx: Any = None) -> torch.Tensor:
        if ctx is not None:
            return self._apply_v2(logits, ctx)
        if not self.rows:
            return logits
        t0 = time.perf_counter()
        n, width = logits.shape
        self._ensure_bitmask(n, width)
        entries: list[tuple[int, Row]] = []
        for index, row in self.rows.items():
            if index < n:
                row.advance()
                entries.append((index, row))
        masked: list[int] = []
        self._fill(entries, masked)
        if masked:
            apply_bitmask_inplace(logits, self._bitmask[:n], masked)
        self.stats.add(len(masked), time.perf_counter() - t0)
        return logits

    def _apply_v2(self, logits: torch.Tensor, ctx: Any) -> torch.Tensor:
        """Model Runner V2: mask the rows of this processor's requests.

        Each request's row catches up with its committed output, ``all_token_ids[slot,
        prompt_len:total_len]`` (only the tokens it has not seen are read; a fresh row of a
        resumed request replays its partial output).  ``total_len`` is copied from the device,
        which also waits for the step that wrote the last tokens.  Under speculative decoding a
        request has a logits row per draft token: row j's mask is the grammar after the
        committed output and drafts 1..j (``ctx.input_ids`` of its rows 1..j), filled layer by
        layer and rolled back afterwards; rows after a draft the grammar rejects copy the row
        before it (the rejection sampler discards them)."""
        slots = ctx.idx_mapping_np.tolist()
        if not any(s in self.rows for s in slots):
            return logits
        t0 = time.perf_counter()
        n, width = logits.shape
        self._ensure_bitmask(n, width)
        reqs = self._v2_layout(n, slots, ctx)
        self._v2_sync(reqs)
        masked: list[int] = []
        marks = [(r.row, r.row.mark()) for r in reqs if len(r.logit_rows) > 1]
        depth, layer = 0, reqs
        while layer:
            self._fill([(r.logit_rows[depth], r.row) for r in layer], masked)
            deeper = []
            for r in layer:
                if depth + 1 >= len(r.logit_rows):
                    continue
                if r.row.try_token(r.drafts[depth]):
                    deeper.append(r)
                    continue
                # the rejection sampler rejects this draft: the rows after it are discarded, but
                # stay finite (the row before's mask, or free if that row was free)
                src, rest = r.logit_rows[depth], r.logit_rows[depth + 1 :]
                if src in masked:
                    self._bitmask[rest] = self._bitmask[src]
                    masked.extend(rest)
            depth, layer = depth + 1, deeper
        for row, mark in marks:
            row.undo(mark)
        if masked:
            apply_bitmask_inplace(logits, self._bitmask[:n], masked)
        self.stats.add(len(masked), time.perf_counter() - t0)
        return logits

    def _v2_layout(self, n: int, slots: list[int], ctx: Any) -> list[V2Request]:
        """This processor's requests in the step, with their logits rows and draft tokens."""
        if n == len(slots):  # one row per request: no drafts (the common case, no device copy)
            return [V2Request(s, self.rows[s], [i], []) for i, s in enumerate(slots) if s in self.rows]
        rows = torch.stack(
            [t.to(torch.int64) for t in (ctx.expanded_idx_mapping, ctx.expanded_local_pos, ctx.input_ids)]
        ).cpu()
        row_slots, local, input_ids = rows.tolist()
        reqs: dict[int, V2Request] = {}
        for i, s in enumerate(row_slots):
            if s not in self.rows:
                continue
            r = reqs.get(s)
            if local[i] == 0:
                reqs[s] = V2Request(s, self.rows[s], [i], [])
            elif r is None or local[i] != len(r.logit_rows):
                raise MatcherError(f"logits row {i}: draft position {local[i]} out of order for slot {s}")
            else:  # row j's input is draft j (row 0's is the last committed token)
                r.logit_rows.append(i)
                r.drafts.append(input_ids[i])
        return list(reqs.values())

    def _v2_sync(self, reqs: list[V2Request]) -> None:
        """Feed each row the committed tokens it has not seen."""
        rs = self.req_states
        assert rs is not None and self._history is not None
        total = rs.total_len.gpu.cpu().numpy()
        prompt = rs.prompt_len.np
        spans: list[tuple[int, int, int]] = []
        todo: list[tuple[Row, int]] = []
        for r in reqs:
            slot, row = r.slot, r.row
            p, t = int(prompt[slot]), int(total[slot])
            n = max(t - p, 0)
            if n < row.consumed:
                row.restart()
            if n > row.consumed:
                spans.append((slot, p + row.consumed, t))
                todo.append((row, n))
        if spans:
            for (row, n), tokens in zip(todo, self._history.read(spans), strict=True):
                row.sync(n, given(tokens))

    def _fill(self, entries: list[tuple[int, Row]], masked: list[int]) -> None:
        """Fill ``self._bitmask[index]`` for each row in the grammar (a row still reasoning is
        left free; a broken or finished one may only stop) and list those indices in ``masked``."""
        live: list[Matcher] = []
        live_rows: list[int] = []
        for index, row in entries:
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

    def _ensure_bitmask(self, n: int, width: int) -> None:
        if self._bitmask.shape[0] < n or self._bitmask.shape[1] != bitmask_words(width):
            self._bitmask = np.zeros((max(n, 2 * self._bitmask.shape[0]), bitmask_words(width)), np.int32)

    # ---- helpers -----------------------------------------------------------------------

    def _new_row(self, params: Any, output: list[int] | None = None) -> Row | None:
        stops = request_stop_ids(params)
        try:
            req = grammar_request(params)
        except CfgmaskError as e:  # validate_params let it through: never serve it unconstrained
            return Row(GrammarRequest("regex", "", {}), None, stops, str(e), output)
        if req is None:
            return None
        if self.vocabs is None:
            no_tok = "vLLM runs without a tokenizer (skip_tokenizer_init)"
            return Row(req, None, stops, no_tok, output)
        row_error = ""
        compiled = None
        try:
            compiled = self.cache.get(req.kind, req.source, self.vocabs.get(stops), req.options)
        except CfgmaskError as e:
            row_error = f"the grammar did not compile in the engine: {e}"
            log.error("cfgmask: %s; the request may only stop", row_error)
        return Row(req, compiled, stops, row_error, output)

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
