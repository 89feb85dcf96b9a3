"""Every runtime rule's states in one numbering (the layout of ``cm_tables``), as
``_core.compile_finish`` returns them."""

from __future__ import annotations

from collections.abc import Container
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass
class Flat:
    """All runtime rules' states in one numbering."""

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

    @property
    def n(self) -> int:
        return int(self.rule_of.shape[0])

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


def from_door(got: tuple[Any, ...], names: list[str], token_sets: Container[str]) -> Flat:
    """``Flat`` from what ``_core.compile_finish`` returns (csrc/flatten.c ``cm_flat_rules``);
    ``names``: the session's names by index; labels in ``token_sets`` are token terminals."""
    rule_names, rule_state, rule_trans, byte_class, trans, acc, lab_off, lab_name, lab_to = got
    n = len(rule_names)
    rs = np.frombuffer(rule_state, dtype=np.uint32)
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
    return Flat(
        [names[i] for i in rule_names],
        np.repeat(np.arange(n, dtype=np.uint32), np.diff(rs)),
        rs[:-1].tolist(),
        np.frombuffer(acc, dtype=np.uint8),
        parts,
        refs,
        tokens,
        list(sets),
    )
