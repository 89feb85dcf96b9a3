"""Types of the compiled extension cfgmask/_core.pyx (handles on the C core).

tests/test_stubs.py checks that this file names exactly what the compiled module defines.
"""

from collections.abc import Sequence
from typing import Any, Protocol, TypeAlias

import numpy as np
import numpy.typing as npt
from typing_extensions import Buffer as _BufferProtocol

# A C-contiguous buffer of the element type the .pyx names (numpy's stubs give ndarray
# __buffer__ only from Python 3.12 on, hence the union)
_Buffer: TypeAlias = _BufferProtocol | np.ndarray[Any, Any]
# (class_lo, trans, accepting, lab_off, lab, lab_to) as little-endian bytes
_DfaArrays = tuple[bytes, bytes, bytes, bytes, bytes, bytes]

class _Tables(Protocol):
    """What GrammarHandle reads from cfgmask.automata.Tables (layout of cm_tables)."""

    @property
    def start_rule(self) -> int: ...
    @property
    def byte_class(self) -> _Buffer: ...
    @property
    def trans(self) -> _Buffer: ...
    @property
    def state_rule(self) -> _Buffer: ...
    @property
    def accepting(self) -> _Buffer: ...
    @property
    def ref_off(self) -> _Buffer: ...
    @property
    def ref_rule(self) -> _Buffer: ...
    @property
    def ref_target(self) -> _Buffer: ...
    @property
    def rule_start(self) -> _Buffer: ...
    @property
    def rule_nullable(self) -> _Buffer: ...
    @property
    def rule_follow(self) -> _Buffer: ...
    @property
    def tok_off(self) -> _Buffer: ...
    @property
    def tok_set(self) -> _Buffer: ...
    @property
    def tok_target(self) -> _Buffer: ...
    @property
    def set_off(self) -> _Buffer: ...
    @property
    def set_ids(self) -> _Buffer: ...
    @property
    def set_negated(self) -> _Buffer: ...
    @property
    def rule_la(self) -> _Buffer: ...
    @property
    def la_next(self) -> _Buffer: ...
    @property
    def la_union(self) -> _Buffer: ...

class _Settings(Protocol):
    """cm_limits as attributes: MatcherLimits and the private compile.strategy.Strategy."""

    max_items_per_set: int
    max_chart_items: int
    max_cache_bytes: int
    direct_walk_states: int
    index_min_items: int
    mask_memo_min_items: int
    mask_memo_min_candidates: int
    share_loop_walks: bool
    filter_uncertain: bool
    compose_entries: bool
    flat_walks: bool
    wrap_repeats: int

class VocabHandle:
    """The C token trie of one vocabulary."""

    def __init__(self, data: _Buffer, offsets: _Buffer, in_trie: _Buffer) -> None: ...
    @property
    def size(self) -> int: ...
    @property
    def trie_size(self) -> int: ...
    def clear_walks(self) -> None: ...
    def pin_walks(self) -> None: ...

class GrammarHandle:
    """A compiled grammar in the C core; keeps its vocabulary alive."""

    def __init__(
        self, tables: _Tables, vocab: VocabHandle, stop_ids: Sequence[int], settings: _Settings
    ) -> None: ...
    @property
    def vocab(self) -> VocabHandle: ...
    def warm(self, deadline: float = 0) -> None: ...
    def entry(self, state: int) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.uint32]]: ...
    @property
    def cache_bytes(self) -> int: ...
    @property
    def cache_entries(self) -> int: ...
    @property
    def build_stats(self) -> dict[str, int]: ...

class MatcherHandle:
    def __init__(self, grammar: GrammarHandle, _empty: bool = False) -> None: ...
    @property
    def grammar(self) -> GrammarHandle: ...
    def fork(self) -> MatcherHandle: ...
    def reset(self) -> None: ...
    def accept_token(self, token: int) -> bool: ...
    def accept_bytes(self, data: _Buffer, dry_run: bool = False) -> bool: ...
    def fill_mask(self, row: _Buffer) -> None: ...
    def is_accepting(self) -> bool: ...
    def is_terminated(self) -> bool: ...
    def error(self) -> int: ...
    def num_tokens(self) -> int: ...
    def chart_items(self) -> int: ...
    def mask_stats(self) -> dict[str, int]: ...
    def rollback(self, k: int) -> None: ...
    def jump_forward(self, cap: int) -> bytes: ...

def fill_masks(handles: list[MatcherHandle], mask: _Buffer, rows: list[int]) -> None: ...
def fsm_build(
    byte_off: _Buffer,
    byte_lo: _Buffer,
    byte_hi: _Buffer,
    byte_to: _Buffer,
    label_off: _Buffer,
    label: _Buffer,
    label_to: _Buffer,
    eps_off: _Buffer,
    eps_to: _Buffer,
    start: int,
    final: int,
    max_states: int,
    max_bytes: int = 0,
    deadline: float = 0,
) -> _DfaArrays: ...

class DfaHandle:
    """A minimal DFA built by csrc/fsm.c (owned).  Labels are numbered 0..n-1."""

    @property
    def n_states(self) -> int: ...
    def __len__(self) -> int: ...
    def states(self) -> list[tuple[list[tuple[int, int, int]], list[tuple[int, int]], bool]]: ...
    def flat(self, base: int) -> tuple[bytes, bytes, bytes, list[tuple[int, int, int]]]: ...
    def label_order(self) -> list[int]: ...
    def can_accept(self, label_ok: _Buffer) -> bool: ...
    def trim(self, label_ok: _Buffer) -> tuple[DfaHandle, list[int]] | None: ...

def fsm_build_handle(
    byte_off: _Buffer,
    byte_lo: _Buffer,
    byte_hi: _Buffer,
    byte_to: _Buffer,
    label_off: _Buffer,
    label: _Buffer,
    label_to: _Buffer,
    eps_off: _Buffer,
    eps_to: _Buffer,
    start: int,
    final: int,
    max_states: int,
    max_bytes: int = 0,
    deadline: float = 0,
) -> tuple[DfaHandle, list[int]]: ...
def fsm_build_ir(
    code: _Buffer,
    label: _Buffer,
    refs: _Buffer,
    frags: list[tuple[DfaHandle, Any]],  # (handle, uint32 label values); list is invariant
    roots: _Buffer,
    shared: bool,
    max_states: int,
    max_bytes: int = 0,
    deadline: float = 0,
) -> list[tuple[DfaHandle, list[int]]]: ...
def compile_components(
    code: _Buffer,
    label: _Buffer,
    comps: list[
        tuple[Any, ...]
    ],  # (members [(name, root, cap)], callees [name], right_linear, cached | None)
    max_states: int,
    inline_max_states: int,
    max_bytes: int = 0,
    deadline: float = 0,
) -> list[list[tuple[DfaHandle, list[int]]] | None]: ...
def compile_finish(
    label: _Buffer,
    rules: list[tuple[DfaHandle, Any] | None],
    is_token: _Buffer,
    start: int,
    max_bytes: int = 0,
    deadline: float = 0,
) -> tuple[list[int], bytes, bytes, bytes, bytes, bytes, bytes, bytes, bytes] | None: ...
