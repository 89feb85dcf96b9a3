"""Compile limits and the IR checks that run before any pass recurses on the IR.

:class:`CompileLimits` guards against hostile input (docs/design.md, section 2): automaton
states, repetition products, rules, IR size and depth, memory and wall-clock time.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from .. import ir
from ..errors import LimitError


@dataclass(frozen=True)
class CompileLimits:
    # One rule's automaton built by subset construction.  A literal set (ir.LiteralSet, a JSON
    # Schema enum) is built straight from its words and has at most as many states as it has
    # bytes: it is not refused by this, only by max_total_states, max_compile_mb and deadline_ms
    # (docs/design.md, section 2, item 7).
    max_dfa_states: int = 20_000
    max_total_states: int = 2_000_000  # all rules together
    max_repeat_product: int = 10**9  # product of nested repetition bounds
    max_rules: int = 1_000_000
    inline_max_states: int = 2_000  # largest automaton copied into its only caller
    inline_shared_states: int = 64  # largest automaton copied into several callers
    unroll_budget: int = 1_024  # repetitions below this size are unrolled; bigger ones in blocks of it
    # A repetition whose whole unrolled size is at most this is unrolled too, as one chain, instead
    # of blocks (a maxLength-255 string: each position's mask ~10x cheaper, docs/design.md §7,
    # session 17).  0: no separate threshold (unroll_budget alone).  Never below unroll_budget, and
    # off when unroll_budget is 0 (the retry after max_dfa_states).
    unroll_whole: int = 6_144
    # Counted repetitions as *segments* (docs/design.md §7, session 33, "Segments on the compile
    # side"): a bounded ``x{lo,hi}`` that qualifies (cfgmask/compile/segments.py) is also compiled
    # as x's loop with its states tagged, kept in ``Tables.segments`` beside the C tables.  Until
    # the C chart counts (step (b)), the C tables stay today's unrolled ones: same masks.
    counters: bool = False
    # Guards against hostile input (tests/test_hostile.py); no grammar of the corpora comes near.
    deadline_ms: int = 30_000  # wall clock for one compile (front end and automata); 0 = none
    max_compile_mb: int = 1024  # memory of one automaton build (NFA, subset sets, DFAs); 0 = none
    max_grammar_bytes: int = 16_000_000  # grammar / schema / regex source text (UTF-8 bytes)
    max_ir_nodes: int = 1_000_000  # IR expression nodes, all rules (a shared subtree counts per use)
    max_ir_depth: int = 200  # nesting of IR expressions inside one rule (passes recurse on it)

    def __hash__(self) -> int:
        """The generated hash (of the fields' tuple), kept once made: a compile hashes its limits
        three times (the table cache's key, read and written, and the automaton cache's
        ``key_id``), ~1.5 K instructions each; the fields are ints and bools, so the kept value
        is what any process computes (a pickled copy may carry it)."""
        try:
            return self._hash  # type: ignore[attr-defined,no-any-return]
        except AttributeError:  # (not ``__dict__``: reading it makes every field's read slower)
            got = hash(tuple(getattr(self, f.name) for f in fields(self)))
            object.__setattr__(self, "_hash", got)
            return got


DEFAULT_LIMITS = CompileLimits()  # shared (frozen): one made a compile costs ~10 us with the caches cold


def check_ir_exact(grammar: ir.Grammar, limits: CompileLimits) -> None:
    """Size checks that run before any pass that recurses on the IR or builds automata:
    rule count, IR nodes, nesting depth, and literals too long for one rule's DFA.
    Iterative, and stops at the first limit, so it is cheap on hostile input too."""
    if len(grammar.rules) > limits.max_rules:
        raise LimitError(
            f"grammar has {len(grammar.rules)} rules, over max_rules={limits.max_rules}",
            limit="max_rules",
            value=limits.max_rules,
        )
    nodes = 0
    for name, body in grammar.rules.items():
        stack = [(body, 1)]
        while stack:
            e, depth = stack.pop()
            nodes += 1
            if nodes > limits.max_ir_nodes:
                raise LimitError(
                    f"grammar has more than max_ir_nodes={limits.max_ir_nodes} IR nodes",
                    limit="max_ir_nodes",
                    value=limits.max_ir_nodes,
                )
            if depth > limits.max_ir_depth:
                raise LimitError(
                    f"rule {name!r} nests expressions more than max_ir_depth={limits.max_ir_depth} deep",
                    limit="max_ir_depth",
                    value=limits.max_ir_depth,
                )
            if isinstance(e, (ir.Seq, ir.Alt)):
                stack.extend((x, depth + 1) for x in e.items)
            elif isinstance(e, ir.Repeat):
                stack.append((e.item, depth + 1))
            elif isinstance(e, ir.Literal) and len(e.data) >= limits.max_dfa_states:
                raise LimitError(
                    f"rule {name!r} has a literal of {len(e.data)} bytes: its automaton needs more "
                    f"than max_dfa_states={limits.max_dfa_states}",
                    limit="max_dfa_states",
                    value=limits.max_dfa_states,
                )


def whole_budget(limits: CompileLimits) -> int:
    """The largest unrolled size of a repetition kept whole (see ``unroll_whole``)."""
    if limits.unroll_budget <= 0:
        return limits.unroll_budget
    return max(limits.unroll_budget, limits.unroll_whole)
