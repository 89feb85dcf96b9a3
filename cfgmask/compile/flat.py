"""Every runtime rule's states in one numbering (the layout of ``cm_tables``), as
``_core.compile_finish`` returns them."""

from __future__ import annotations

from collections.abc import Container, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import _dag

_WEIGHTS = np.zeros(0, dtype=np.int64)


def class_weights(n: int) -> np.ndarray:
    """At least n fixed odd random weights for hashing the columns of the transition matrix
    (byte classes are numbered by the hash); generated once a process (numpy's generator
    costs 0.1 ms a compile and its import 30 ms), longer when a grammar has more states."""
    global _WEIGHTS
    if len(_WEIGHTS) < max(n, 1):
        size = max(n, 2 * len(_WEIGHTS), 16384)  # a prefix of a longer draw is the shorter draw
        _WEIGHTS = np.random.default_rng(0xC1A55).integers(1, 2**62, size=size, dtype=np.int64) | 1
    return _WEIGHTS


@dataclass
class Derived:
    """What csrc/tables.c makes from the flat rules (``cm_flat_derived``): the tables that
    ``follow.py`` and ``tables.byte_classes`` compute from a :class:`Flat`, as Tables holds them."""

    byte_class: np.ndarray | None  # uint8 [256]; None: not made (the caller makes them)
    trans: np.ndarray | None  # int32 [states, classes]
    nullable: np.ndarray  # uint8 [rules]
    follow: np.ndarray  # uint32 [rules * 8]
    ref_off: np.ndarray  # uint32 CSR of the call edges (callee as rule index, target)
    ref_rule: np.ndarray
    ref_target: np.ndarray
    tok_off: np.ndarray  # uint32 CSR of the token edges (token set, target)
    tok_set: np.ndarray
    tok_target: np.ndarray
    token_sets: list[str]  # the token sets' labels, in set order
    rule_start: np.ndarray | None = None  # uint32 [rules]; None: made from Flat.start_of


@dataclass
class Flat:
    """All runtime rules' states in one numbering.  From ``_core.compile_finish`` (``from_door``)
    every field is made on first use: the compiler reads the door's bytes instead
    (``tables._tables_raw``); tests compare the fields with the reference pipeline's."""

    names: list[str]
    rule_of: np.ndarray  # uint32 [states]
    start_of: list[int]
    accepting: np.ndarray  # uint8 [states]
    # per rule: its byte transitions, int32 [its states, its byte classes] (global state
    # numbers, -1 = none) and the class of each byte, intp [256]
    parts: list[tuple[np.ndarray, np.ndarray]]
    refs: dict[int, list[tuple[int, int]]]  # (rule, target) per state that calls rules
    tokens: dict[int, list[tuple[int, int]]]  # (token set, target) per state with token edges
    token_sets: list[str]
    derived: Derived | None = None

    def __getattr__(self, name: str) -> Any:
        d = self.__dict__
        if name in _OPENED and "_got" in d:
            _open(self, *d.pop("_got"))
            return getattr(self, name)
        door = d.get("_door")
        if door is None or name not in ("parts", "refs", "tokens", "token_sets"):
            raise AttributeError(name)
        del d["_door"]
        self.parts, self.refs, self.tokens, self.token_sets = _door_edges(*door)
        return getattr(self, name)

    @property
    def n(self) -> int:
        got = self.__dict__.get("_got")
        return len(got[0][5]) if got is not None else int(self.rule_of.shape[0])

    def byte_targets(self, states: list[int]) -> np.ndarray:
        """int32 [len(states), 256]: the target of each state on each byte (-1: none)."""
        out = np.empty((len(states), 256), dtype=np.int32)
        if not states:
            return out
        idx = np.asarray(states, dtype=np.int64)
        rules = self.rule_of[idx]
        for r in sorted(set(rules.tolist())):
            rows = np.nonzero(rules == r)[0]
            trans, cls = self.parts[r]
            out[rows] = trans[idx[rows] - self.start_of[r]][:, cls]
        return out

    def full(self) -> np.ndarray:
        """int32 [states, 256]: every state's target on every byte (-1: none)."""
        return (
            np.concatenate([trans[:, cls] for trans, cls in self.parts])
            if self.parts
            else (np.zeros((0, 256), dtype=np.int32))
        )


# a default's class attribute would answer ``derived`` before __getattr__ (the default stays
# the constructor's)
del Flat.derived
_OPENED = frozenset(
    ("names", "rule_of", "start_of", "accepting", "derived", "parts", "refs", "tokens", "token_sets")
)


def from_door(got: Sequence[Any], names: list[str], token_sets: Container[str]) -> Flat:
    """``Flat`` from what ``_core.compile_finish`` returns (csrc/flatten.c ``cm_flat_rules``,
    and csrc/tables.c ``cm_flat_derived`` as a tenth item when asked for); ``names``: the
    session's names by index; labels in ``token_sets`` are token terminals.  Nothing is made
    here: ``tables_from_flat`` reads ``got`` itself, and the fields are made on first read."""
    flat = Flat.__new__(Flat)
    flat.__dict__["_got"] = (got, names, token_sets)
    return flat


def _open(flat: Flat, got: Sequence[Any], names: list[str], token_sets: Container[str]) -> None:
    """A door Flat's fields (``parts``, ``refs``, ``tokens`` and ``token_sets`` on first read).

    Only C-level numpy calls and methods here (with the processor's caches cold a numpy call
    through a Python-level wrapper, ``np.diff``, ``np.repeat``, costs 20-45 us instead of 2), each
    state's rule from a compiled loop (``_dag.state_rules``)."""
    rule_names, rule_state, rule_trans, byte_class, trans, acc, lab_off, lab_name, lab_to = got[:9]
    rs = np.frombuffer(rule_state, dtype=np.uint32)
    flat.names = [names[i] for i in rule_names]
    flat.rule_of = np.frombuffer(_dag.state_rules(rule_state), dtype=np.uint32)
    flat.start_of = rs[:-1].tolist()
    flat.accepting = np.frombuffer(acc, dtype=np.uint8)
    flat.derived = _derived(got[9], names, rs[:-1]) if len(got) > 9 else None
    flat.__dict__["_door"] = (
        rs,
        rule_names,
        rule_trans,
        byte_class,
        trans,
        lab_off,
        lab_name,
        lab_to,
        names,
        token_sets,
    )


def _derived(got: tuple[Any, ...], names: list[str], rule_start: np.ndarray) -> Derived:
    k, byte_class, trans, null, follow, ref_off, ref_rule, ref_target, tok_off, tok_set, tok_target, sets = (
        got[:12]  # (got[12]: the C grammar's facts of the rows, not the reference's)
    )
    u32 = np.uint32
    return Derived(
        np.frombuffer(byte_class, dtype=np.uint8) if k else None,
        np.frombuffer(trans, dtype=np.int32).reshape(-1, k) if k else None,
        np.frombuffer(null, dtype=np.uint8),
        np.frombuffer(follow, dtype=u32),
        np.frombuffer(ref_off, dtype=u32),
        np.frombuffer(ref_rule, dtype=u32),
        np.frombuffer(ref_target, dtype=u32),
        np.frombuffer(tok_off, dtype=u32),
        np.frombuffer(tok_set, dtype=u32),
        np.frombuffer(tok_target, dtype=u32),
        [names[i] for i in sets],
        rule_start,
    )


def _door_edges(
    rs: np.ndarray,
    rule_names: list[int],
    rule_trans: bytes,
    byte_class: bytes,
    trans: bytes,
    lab_off: bytes,
    lab_name: bytes,
    lab_to: bytes,
    names: list[str],
    token_sets: Container[str],
) -> tuple[
    list[tuple[np.ndarray, np.ndarray]],
    dict[int, list[tuple[int, int]]],
    dict[int, list[tuple[int, int]]],
    list[str],
]:
    """A door Flat's parts, refs, tokens and token sets."""
    n = len(rule_names)
    rt = np.frombuffer(rule_trans, dtype=np.uint32)
    cls = np.frombuffer(byte_class, dtype=np.uint8).reshape(n, 256)
    tr = np.frombuffer(trans, dtype=np.int32)
    parts = [
        (tr[rt[r] : rt[r + 1]].reshape(int(rs[r + 1] - rs[r]), -1), cls[r].astype(np.intp)) for r in range(n)
    ]
    off = np.frombuffer(lab_off, dtype=np.uint32)
    label = np.frombuffer(lab_name, dtype=np.uint32).tolist()
    to = np.frombuffer(lab_to, dtype=np.uint32).tolist()
    rid = {c: r for r, c in enumerate(rule_names)}
    refs: dict[int, list[tuple[int, int]]] = {}
    tokens: dict[int, list[tuple[int, int]]] = {}
    sets: dict[str, int] = {}
    for s in np.flatnonzero(np.diff(off)).tolist():
        for e in range(int(off[s]), int(off[s + 1])):
            c = names[label[e]]
            if c in token_sets:
                tokens.setdefault(s, []).append((sets.setdefault(c, len(sets)), to[e]))
            else:
                refs.setdefault(s, []).append((rid[label[e]], to[e]))
    return parts, refs, tokens, list(sets)
