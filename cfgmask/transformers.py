"""Hugging Face ``transformers`` integration: a ``LogitsProcessor`` that keeps ``generate``
inside a grammar.

```python
from transformers import LogitsProcessorList
from cfgmask.transformers import GrammarLogitsProcessor

vocab = cfgmask.Vocabulary.from_huggingface(tokenizer)
compiled = cfgmask.compile(cfgmask.Grammar.from_gbnf(text), vocab)
out = model.generate(
    **inputs,
    logits_processor=LogitsProcessorList([GrammarLogitsProcessor(compiled)]),
    do_sample=True, temperature=0.7, top_p=0.9, max_new_tokens=256,
)
```

``generate`` runs the processors in ``logits_processor`` before its sampling warpers
(temperature, top-k, top-p), so the mask is applied to the raw logits, as it must be: masking
after top-k could leave no candidate.  Importing this module imports torch and transformers;
``import cfgmask`` does not.

One matcher per row of ``input_ids`` (batch x ``num_return_sequences`` x beams).  Rows are
matched to the previous step's rows by their generated tokens, so beam search, which reorders
rows between steps, is followed exactly: a row whose history equals another's shares its
matcher, and a matcher with several continuations is forked.  After a stop token a row only
allows stop tokens (``generate`` pads finished rows; the padding is ignored).

Prefetch: a processor sees a step's sampled tokens only at the next step, after the forward
pass.  ``generate`` calls its stopping criteria earlier, right after appending the tokens and
before that forward pass; pass ``processor.prefetcher`` among them and the matchers advance
there and compute their next masks on worker threads while the model runs:

```python
proc = GrammarLogitsProcessor(compiled)
out = model.generate(**inputs, logits_processor=LogitsProcessorList([proc]),
                     stopping_criteria=StoppingCriteriaList([proc.prefetcher]), ...)
```

The masks are the same either way.  Only rows that stay in place between steps prefetch
(greedy search and sampling); beam search reorders rows after its criteria run, so its masks
are filled at the next step as without the prefetcher.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import torch
from transformers import LogitsProcessor, StoppingCriteria

from .bitmask import apply_bitmask_inplace, fill_bitmasks
from .compile import CompiledGrammar
from .errors import CfgmaskError, MatcherError
from .matcher import Matcher, allocate_bitmask

__all__ = ["GrammarLogitsProcessor", "GrammarPrefetcher", "ProcessorStats"]


@dataclass
class ProcessorStats:
    """Counters of one generation: ``steps`` calls, ``rows`` masked rows, ``mask_seconds``
    spent advancing matchers, filling and applying masks."""

    steps: int = 0
    rows: int = 0
    mask_seconds: float = 0.0
    prefetched_steps: int = 0  # steps whose matchers the prefetcher advanced early
    prefetch_seconds: float = 0.0  # spent in the prefetcher (advancing, starting the masks)


class GrammarPrefetcher(StoppingCriteria):
    """The stopping criterion that lets a :class:`GrammarLogitsProcessor` prefetch: it never
    stops a row; it advances the processor's matchers as soon as ``generate`` has appended
    the step's tokens, and starts their next masks before the forward pass."""

    def __init__(self, processor: GrammarLogitsProcessor) -> None:
        self.processor = processor

    def __call__(
        self, input_ids: torch.LongTensor, scores: torch.FloatTensor, **kwargs: object
    ) -> torch.BoolTensor:
        self.processor._advance_early(input_ids)
        done = torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)
        return done  # type: ignore[return-value]


class GrammarLogitsProcessor(LogitsProcessor):
    """Masks the logits of every row of a ``generate`` call to the tokens ``compiled`` allows.

    ``batch_size``: the number of rows ``generate`` will pass (batch x ``num_return_sequences``
    x ``num_beams``); optional, checked when given.  ``threads``: workers that fill the rows'
    masks (default: as many as rows and cores allow).

    One instance follows one ``generate`` call; a call whose ``input_ids`` do not continue the
    previous step starts afresh (or call :meth:`reset`).  A token the grammar rejects in
    ``input_ids`` (forced by another processor, ``forced_eos_token_id``, or a caller) raises
    :class:`cfgmask.MatcherError`, as does a row left with no allowed token after masking.

    The grammar's stop tokens are ``compiled.vocab.stop_ids``; ``generate`` stops a row at its
    own ``eos_token_id`` list, so build the vocabulary with ``stop_token_ids`` matching the
    model's ``generation_config.eos_token_id``.
    """

    def __init__(
        self, compiled: CompiledGrammar, *, batch_size: int | None = None, threads: int | None = None
    ) -> None:
        if not isinstance(compiled, CompiledGrammar):
            raise TypeError(f"GrammarLogitsProcessor needs a CompiledGrammar, not {type(compiled).__name__}")
        if batch_size is not None and batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.compiled = compiled
        self.vocab = compiled.vocab
        self.batch_size = batch_size
        self.threads = threads
        self._stop_row = allocate_bitmask(1, self.vocab.size)[0]
        stop_bits = self._stop_row.view(np.uint32)
        for s in self.vocab.stop_ids:
            stop_bits[s // 32] |= np.uint32(1 << (s % 32))
        self.prefetcher = GrammarPrefetcher(self)
        """Pass it in ``generate``'s ``stopping_criteria`` to compute each step's masks during
        the forward pass (module docstring)."""
        self.reset()

    # ---- state -------------------------------------------------------------------------

    def reset(self) -> None:
        """Forget the current generation; the next call starts a new one."""
        self._prev_ids: torch.Tensor | None = None
        self._prompt_len = 0
        self._rows: list[Matcher] = []
        self._early: _Early | None = None
        self.stats = ProcessorStats()

    @property
    def matchers(self) -> list[Matcher]:
        """The matcher of each row after the last call (rows with equal histories share one)."""
        return list(self._rows)

    def _continues(self, input_ids: torch.Tensor) -> bool:
        prev = self._prev_ids
        return (
            prev is not None
            and input_ids.shape[0] == prev.shape[0]
            and input_ids.shape[1] == prev.shape[1] + 1
            and torch.equal(input_ids[:, : self._prompt_len], prev[:, : self._prompt_len])
        )

    def _start(self, input_ids: torch.Tensor) -> None:
        self.reset()
        self._prompt_len = input_ids.shape[1]
        root = Matcher(self.compiled)
        self._rows = [root] * input_ids.shape[0]

    # ---- one step ----------------------------------------------------------------------

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        t0 = time.perf_counter()
        n = input_ids.shape[0]
        if self.batch_size is not None and n != self.batch_size:
            raise ValueError(
                f"GrammarLogitsProcessor was built for batch_size={self.batch_size} rows, got {n} "
                "(rows = batch x num_return_sequences x num_beams)"
            )
        if scores.shape[0] != n:
            raise ValueError(f"scores have {scores.shape[0]} rows, input_ids {n}")
        try:
            early, self._early = self._early, None
            if early is not None and early.matches(input_ids):
                pass  # the prefetcher advanced the matchers to this step already
            else:
                if early is not None:
                    self._undo(early)  # not the step the prefetcher saw: as if it had not run
                if self._continues(input_ids):
                    self._advance(input_ids)
                else:
                    self._start(input_ids)
            self._prev_ids = input_ids.clone()  # generate may reuse its buffers
            self._apply(scores)
        except BaseException:
            self.reset()  # the generation cannot go on; a later call starts afresh
            raise
        self.stats.steps += 1
        self.stats.rows += n
        self.stats.mask_seconds += time.perf_counter() - t0
        return scores

    def _parents(self, input_ids: torch.Tensor) -> list[int | None]:
        """For each row, the previous step's row it extends (None: no such row)."""
        prev = self._prev_ids
        assert prev is not None
        if torch.equal(input_ids[:, :-1], prev):  # sampling and greedy: rows stay in place
            return list(range(input_ids.shape[0]))
        p = self._prompt_len  # beam search: rows were reordered, find them by their history
        where = {tuple(h): i for i, h in enumerate(prev[:, p:].tolist())}
        return [where.get(tuple(h)) for h in input_ids[:, p:-1].tolist()]

    def _advance_early(self, input_ids: torch.Tensor) -> None:
        """From the prefetcher: advance rows that stay in place and start their next masks.
        Anything else (beam search's reordered candidates, several tokens at once, a token the
        grammar rejects, a limit) is left to the next call, which then does what it always did."""
        t0 = time.perf_counter()
        prev = self._prev_ids
        if (
            self._early is not None
            or prev is None
            or not self._continues(input_ids)
            or not torch.equal(input_ids[:, :-1], prev)
        ):
            return
        old = list({id(m): m for m in self._rows}.values())
        if any(m._h.error() for m in old):  # a sticky error is the next call's to report
            return
        accepted: list[Matcher] = []
        rows = self._rows
        try:
            self._advance(input_ids, accepted)
        except CfgmaskError:
            for m in old:  # undo: the accepted steps, and the error a limit left
                m.rollback(1 if any(m is a for a in accepted) else 0)
            return
        self._early = _Early(input_ids.clone(), prev, rows, accepted)
        self._prev_ids = self._early.ids
        for m in {id(m): m for m in self._rows}.values():
            if not m.is_terminated():
                m.prefetch()
        self.stats.prefetched_steps += 1
        self.stats.prefetch_seconds += time.perf_counter() - t0

    def _undo(self, early: _Early) -> None:
        for m in early.accepted:
            m.rollback(1)
        self._rows, self._prev_ids = early.rows, early.prev

    def _advance(self, input_ids: torch.Tensor, accepted: list[Matcher] | None = None) -> None:
        parents = self._parents(input_ids)
        tokens = input_ids[:, -1].tolist()
        old = self._rows
        # Each distinct (parent matcher, token) becomes one child; a parent's first child takes
        # the parent itself (every old row is replaced), the others take forks made first.
        children: dict[int, dict[int, list[int]]] = {}
        rebuilt: list[int] = []
        for r, (p, t) in enumerate(zip(parents, tokens, strict=True)):
            if p is None:
                rebuilt.append(r)
            else:
                children.setdefault(id(old[p]), {}).setdefault(t, []).append(r)
        new: list[Matcher | None] = [None] * len(tokens)
        parent_of = {id(m): m for m in old}
        for pid, by_token in children.items():
            parent = parent_of[pid]
            if parent.is_terminated():  # a finished row: padding follows, nothing changes
                for rows in by_token.values():
                    for r in rows:
                        new[r] = parent
                continue
            forks = [parent] + [parent.fork() for _ in range(len(by_token) - 1)]
            for m, (t, rows) in zip(forks, by_token.items(), strict=True):
                self._accept(m, t, rows[0], input_ids)
                if accepted is not None and m is parent:
                    accepted.append(m)
                for r in rows:
                    new[r] = m
        for r in rebuilt:
            new[r] = self._rebuild(input_ids[r, self._prompt_len :].tolist(), r)
        assert all(m is not None for m in new)
        self._rows = new  # type: ignore[assignment]

    def _accept(self, m: Matcher, token: int, row: int, input_ids: torch.Tensor) -> None:
        if 0 <= token < self.vocab.size and m.accept_token(token):
            return
        history = input_ids[row, self._prompt_len : -1].tolist()
        raise self._off_grammar(row, token, history)

    def _rebuild(self, generated: list[int], row: int) -> Matcher:
        m = Matcher(self.compiled)
        for i, t in enumerate(generated):
            if m.is_terminated():
                break
            if not (0 <= t < self.vocab.size and m.accept_token(t)):
                raise self._off_grammar(row, t, generated[:i])
        return m

    def _off_grammar(self, row: int, token: int, history: list[int]) -> MatcherError:
        text = self.vocab.decode([t for t in history if 0 <= t < self.vocab.size])
        shown = self.vocab.tokens[token] if 0 <= token < self.vocab.size else b"<out of vocabulary>"
        return MatcherError(
            f"row {row}: the model was forced off the grammar: token {token} ({shown!r}) is not "
            f"allowed after the generated text {text[-200:]!r}.  Something other than the "
            "grammar's mask chose it: another logits processor, forced_eos_token_id or "
            "forced_decoder_ids, or input_ids built by the caller."
        )

    # ---- masks -------------------------------------------------------------------------

    def _apply(self, scores: torch.Tensor) -> None:
        unique: dict[int, int] = {}
        for m in self._rows:
            unique.setdefault(id(m), len(unique))
        by_id = {id(m): m for m in self._rows}
        mats = [by_id[k] for k in unique]
        buf = allocate_bitmask(len(mats), self.vocab.size)
        live = [i for i, m in enumerate(mats) if not m.is_terminated()]
        fill_bitmasks([mats[i] for i in live], buf, rows=live, threads=self.threads)
        for i, m in enumerate(mats):
            if m.is_terminated():
                buf[i] = self._stop_row
        rows_mask = buf[[unique[id(m)] for m in self._rows]]
        apply_bitmask_inplace(scores, torch.from_numpy(rows_mask))
        empty = torch.isneginf(scores).all(dim=-1)
        if bool(empty.any()):
            r = int(empty.nonzero()[0, 0])
            allowed = np.flatnonzero(np.unpackbits(rows_mask[r].view(np.uint8), bitorder="little"))
            raise MatcherError(
                f"row {r}: no token is left after masking: the grammar allows {allowed[:10].tolist()}"
                f"{'...' if len(allowed) > 10 else ''} but another processor set all of them to -inf "
                "(min_new_tokens blocking EOS where the grammar must stop, or suppress_tokens?)"
            )

    def __repr__(self) -> str:
        return f"GrammarLogitsProcessor({self.compiled!r}, rows={len(self._rows)})"


@dataclass
class _Early:
    """A step the prefetcher advanced to (``ids``), and what undoes it: the previous ids and
    rows, and the old matchers that accepted a token (forks are simply dropped)."""

    ids: torch.Tensor
    prev: torch.Tensor
    rows: list[Matcher]
    accepted: list[Matcher]

    def matches(self, input_ids: torch.Tensor) -> bool:
        return input_ids.shape == self.ids.shape and torch.equal(input_ids, self.ids)
