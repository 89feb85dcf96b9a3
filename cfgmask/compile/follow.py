"""Pass 3b: nullable rules and FOLLOW bytes over the flat automata.

FOLLOW(R) over-approximates the bytes that may come right after rule R completes; the mask
cache uses it to keep tokens that leave a rule context-independent when their next byte
cannot follow (docs/design.md, section 4).
"""

from __future__ import annotations

import numpy as np

from .. import deadline
from .flat import Flat


def nullable(f: Flat) -> list[bool]:
    n_rules = len(f.names)
    null = [False] * n_rules
    changed = True
    while changed:
        changed = False
        deadline.check("fixpoint")
        for r in range(n_rules):
            if null[r]:
                continue
            seen = {f.start_of[r]}
            stack = [f.start_of[r]]
            while stack and not null[r]:
                s = stack.pop()
                if f.accepting[s]:
                    null[r] = changed = True
                for c, t in f.refs.get(s, ()):
                    if null[c] and t not in seen:
                        seen.add(t)
                        stack.append(t)
    return null


ALL_BYTES = (1 << 256) - 1


def _byte_bits(edges: list[tuple[int, int, int]]) -> int:
    bits = 0
    for lo, hi, _ in edges:
        bits |= ((1 << (hi - lo + 1)) - 1) << lo
    return bits


def follow_bytes(f: Flat, null: list[bool]) -> list[int]:
    """Per rule: bytes that may come right after it completes (FOLLOW, as 256-bit ints).
    An over-approximation is always safe; the mask cache uses it to keep tokens
    that leave a rule context-independent when their next byte cannot follow.
    Only states that call rules change in the fixpoints below; the others keep
    their own values (accepting; the bytes they consume).  Each fixpoint is the least
    one whatever the order of the updates; the orders below (states of callees and
    later states first for can_end and nxt, callers first for follow) need few rounds."""
    callers = sorted(f.refs)
    backwards = callers[::-1]
    refs = f.refs
    acc = f.accepting.tolist()
    can_end = {s: bool(acc[s]) for s in callers}
    for s in callers:
        for _, t in refs[s]:
            can_end.setdefault(t, bool(acc[t]))
    changed = True
    while changed:
        changed = False
        deadline.check("fixpoint")
        for s in backwards:
            if not can_end[s] and any(null[c] and can_end[t] for c, t in refs[s]):
                can_end[s] = changed = True
    # first[r]: bytes rule r can start with; nxt[s]: bytes consumable from state s
    need = sorted(set(can_end) | set(f.start_of))
    nxt: dict[int, int] = {}
    if need:
        packed = np.packbits(f.byte_targets(need) >= 0, axis=1, bitorder="little")
        for s, row in zip(need, packed, strict=True):
            # a token terminal may be any text token: any byte can come next
            nxt[s] = ALL_BYTES if s in f.tokens else int.from_bytes(row.tobytes(), "little")
    first = [nxt[s] for s in f.start_of]
    rule_at = {s: r for r, s in enumerate(f.start_of)}
    changed = True
    while changed:
        changed = False
        deadline.check("fixpoint")
        for s in backwards:
            v = nxt[s]
            for c, t in refs[s]:
                v |= first[c] | (nxt[t] if null[c] else 0)
            if v != nxt[s]:
                nxt[s] = v
                changed = True
                r = rule_at.get(s)
                if r is not None:
                    first[r] = v
    follow = [0] * len(f.names)
    rule_of = f.rule_of.tolist()
    changed = True
    while changed:
        changed = False
        deadline.check("fixpoint")
        for s in callers:
            caller = rule_of[s]
            for c, t in refs[s]:
                v = follow[c] | nxt[t] | (follow[caller] if can_end[t] else 0)
                if v != follow[c]:
                    follow[c] = v
                    changed = True
    return follow
