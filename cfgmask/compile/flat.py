"""Pass 3a: every runtime rule's states in one numbering (the layout of ``cm_tables``)."""

from __future__ import annotations

from collections.abc import Container
from dataclasses import dataclass

import numpy as np

from .automaton import DFA


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


def flatten(dfas: dict[str, DFA], order: list[str], token_labels: Container[str]) -> Flat:
    """The rules of ``order`` in one numbering; labels in ``token_labels`` are token terminals."""
    rid = {n: i for i, n in enumerate(order)}
    parts = []
    accs = []
    rule_of = []
    start_of = []
    refs: dict[int, list[tuple[int, int]]] = {}
    tokens: dict[int, list[tuple[int, int]]] = {}
    sets: dict[str, int] = {}
    base = 0
    for r, n in enumerate(order):
        d = dfas[n]
        cls_b, trans_b, acc_b, labels = d.handle.flat(base)
        ns = len(acc_b)
        cls = np.frombuffer(cls_b, dtype=np.uint8).astype(np.intp)
        parts.append((np.frombuffer(trans_b, dtype=np.int32).reshape(ns, -1), cls))
        accs.append(np.frombuffer(acc_b, dtype=np.uint8))
        rule_of.append(np.full(ns, r, dtype=np.uint32))
        start_of.append(base)
        if labels:
            names = d.names
            is_tok = [c in token_labels for c in names]
            for s, lab, to in labels:
                c = names[lab]
                if is_tok[lab]:
                    tokens.setdefault(base + s, []).append((sets.setdefault(c, len(sets)), to))
                else:
                    refs.setdefault(base + s, []).append((rid[c], to))
        base += ns
    return Flat(
        order,
        np.concatenate(rule_of) if rule_of else np.zeros(0, dtype=np.uint32),
        start_of,
        np.concatenate(accs) if accs else np.zeros(0, dtype=np.uint8),
        parts,
        refs,
        tokens,
        list(sets),
    )
