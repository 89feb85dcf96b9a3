"""Pass 2: rule components to automata, regular ones inlined into their callers, then the
runtime rules trimmed and laid out flat: two calls into C.

Components of the rule graph are built callee first; a regular rule's minimal DFA is copied
into its callers when it is small (``inline_shared_states``) or has one caller
(``inline_max_states``), so the cost of a grammar depends on its language, not on how it is
spelled (docs/design.md, section 2, items 2-3).  Python plans (the components, their
members' bodies in the encoded IR, what each may inline, which are cached from earlier
compiles); ``_core.compile_components`` builds every component that is not cached in one
call (csrc/components.c, with the retry ladder of less inlining); ``_core.compile_finish``
finds the runtime rules from the start rule, keeps the productive ones, trims their dead
states and returns them flat (csrc/flatten.c), so every Earley item can complete.
"""

from __future__ import annotations

import gc
import time
from array import array
from typing import Any

from .. import _core, deadline, ir
from ..errors import GrammarError, LimitError
from . import _dag
from .automaton import DFA
from .encode import _ALT, _REPEAT, _SEQ, _WORDS, Session
from .flat import Flat, class_weights, from_door
from .limits import CompileLimits
from .repeats import RepeatRewriter

# A component of the plan: its members, its cache key id, and what compile_components takes
# for it: members [(name, body offset, inline cap)], callees [name], right-linear, cached DFAs.
_Planned = tuple[list[str], int, tuple[Any, ...]]

# A cold compile makes thousands of containers (the plan's keys and lists, the automata's
# objects), most of them freed before it ends: the collections their allocations set off walked
# each one alive then, and a young one again in each older generation's collection (2.6 % of a
# p75-p95 JSON schema's compile).  Paused, the collector runs once, at the first allocation
# after, over what is still alive.  The collector is process-wide: a thread
# that turns it off while a compile is here finds it on again when the compile returns.  The
# switch is the tests' (the same automata either way).
PAUSE_GC = True


def build_rules(grammar: ir.Grammar, limits: CompileLimits, sess: Session) -> Flat:
    """The runtime rules' trimmed automata of ``grammar``, flat.  The cycle collector is paused
    while they are built (``PAUSE_GC``) and enabled again on every way out, a raised error
    included; it stays as it is if it was off."""
    if not PAUSE_GC or not gc.isenabled():
        return _build_rules(grammar, limits, sess)
    gc.disable()
    try:
        return _build_rules(grammar, limits, sess)
    finally:
        gc.enable()


def _build_rules(grammar: ir.Grammar, limits: CompileLimits, sess: Session) -> Flat:
    """``build_rules`` with the collector as it is."""
    rules = outline_sets(grammar.rules, sess) if sess.literal_sets else grammar.rules
    rw = RepeatRewriter(rules, limits, sess)
    rules = rw.run()
    # a lookahead is a marker rule the parser calls: inlined, it would match "" unconditionally
    for name in sess.markers:
        rules[name] = ir.EPSILON
    built = rule_dfas(rules, grammar.start, rw.outlined | set(sess.markers), limits, sess)
    return finish(built, grammar.start, limits, sess, str(grammar.meta.get("empty", "")))


def outline_sets(rules: dict[str, ir.Expr], sess: Session) -> dict[str, ir.Expr]:
    """Every literal set that is not a rule's whole body becomes a rule of its own (one per
    distinct set), so C builds its automaton straight from the words, without subset
    construction (csrc/words.c); a small one is inlined back into its callers like any
    regular rule.  Compiled (``_dag.outline_sets``); past its recursion cap, or with
    ``COMPILED_OUTLINE`` off (the tests' reference), :func:`outline_sets_py`."""
    if COMPILED_OUTLINE:
        try:
            return _dag.outline_sets(rules, sess)
        except _dag.Deep:
            pass
    return outline_sets_py(rules, sess)


# ``outline_sets`` by its compiled walk (tests turn it off to compare with the Python one)
COMPILED_OUTLINE = True


def outline_sets_py(rules: dict[str, ir.Expr], sess: Session) -> dict[str, ir.Expr]:
    """``outline_sets``' walk in Python (the compiled one's fallback and reference)."""
    out = dict(rules)
    named: dict[int, str] = {}  # set id -> its rule
    memo: dict[int, ir.Expr] = {}  # id(node) -> node rewritten
    keys, known = sess.interner.keys, sess.known
    below: dict[int, bool] = {}  # DAG id -> a literal set inside
    has_set_c = _dag.SetsBelow(keys, below)

    def has_set(c: int) -> bool:
        """A literal set below ``c``?  Compiled; past its recursion cap, the rest in Python."""
        try:
            return has_set_c(c)
        except _dag.Deep:
            return has_set_py(c)

    def has_set_py(c: int) -> bool:
        got = below.get(c)
        if got is None:
            key = keys[c]
            kind = key[0]
            if kind == _SEQ or kind == _ALT:
                got = any(has_set_py(k) for k in key[1])
            else:
                got = kind == _WORDS or (kind == _REPEAT and has_set_py(key[1]))
            below[c] = got
        return got

    def name_of(e: ir.LiteralSet) -> str:
        cid = sess.cid(e)
        got = named.get(cid)
        if got is None:
            k = len(named)
            while f"<literal set {k}>" in out:
                k += 1
            got = named[cid] = f"<literal set {k}>"
            out[got] = e
        return got

    def rewrite(e: ir.Expr) -> ir.Expr:
        got = memo.get(id(e))
        if got is not None:
            return got
        c = known(e)
        if c is not None and not has_set(c):  # nothing to outline below (a rule body's node)
            new: ir.Expr = e
        elif isinstance(e, ir.LiteralSet):
            new = ir.Ref(name_of(e))
        elif isinstance(e, (ir.Seq, ir.Alt)):
            items = tuple(rewrite(x) for x in e.items)
            changed = any(a is not b for a, b in zip(items, e.items, strict=True))
            new = type(e)(items) if changed else e
        elif isinstance(e, ir.Repeat):
            item = rewrite(e.item)
            new = e if item is e.item else ir.Repeat(item, e.lo, e.hi)
        else:
            new = e
        memo[id(e)] = new
        return new

    for name, body in rules.items():
        deadline.check("literal sets")
        if not isinstance(body, ir.LiteralSet):
            out[name] = rewrite(body)
    # rewrite calls itself through its cell, a cycle that keeps its memo and the session alive
    # until the collector runs (in the middle of a later pass): rebound, they are freed here
    rewrite = _spent
    return out


def _spent(e: ir.Expr) -> ir.Expr:
    """What outline_sets' finished rewrite is rebound to (its cycle broken)."""
    raise AssertionError("a walk called after its pass")


def rule_dfas(
    rules: dict[str, ir.Expr], start: str, outlined: set[str], limits: CompileLimits, sess: Session
) -> dict[str, tuple[DFA, array[int]]]:
    """Every rule's DFA (inlined callees included) and its labels' values, in one call."""
    plan = _plan(rules, start, outlined, limits, sess)
    rank, ordered = sess.rank()  # every name is numbered and every body emitted by now
    args = _dag.comp_args(plan, rank, sess)  # cached components' labels as this session's (_given)
    end = _deadline()
    try:
        built = _core.compile_components(
            sess.code, rank, args, limits.max_dfa_states, limits.inline_max_states, _bytes(limits), end
        )
    except LimitError as e:
        deadline.check("automaton build")  # a passed deadline names its setting
        failed = getattr(e, "component", None)
        if failed is None:
            raise
        raise LimitError(f"rule {plan[failed][0][0]!r}: {e}", limit=e.limit, value=e.value) from None
    return _dag.collect(plan, args, built, ordered, sess.cache, DFA, sess.gen)


def call_graph(
    rules: dict[str, ir.Expr], sess: Session
) -> tuple[dict[str, int], dict[str, list[str]], dict[str, int]]:
    """Each rule's DAG id, the rules it calls (sorted, read only), and how often each rule is
    used; names and token terminals numbered once, in order (label values need it)."""
    return _dag.call_graph(sess, rules)  # compiled: tests/reference_encode.py has the Python loop


def _plan(
    rules: dict[str, ir.Expr], start: str, outlined: set[str], limits: CompileLimits, sess: Session
) -> list[_Planned]:
    """The components reachable from ``start``, callees first, each with its cache key:
    its members' IR, its callees' keys and what they may inline, and the limits."""
    cache = sess.cache
    # the graph by name too, as numbers (Tarjan's walk and the plan read arrays, not dicts)
    # (the uses counted in the arrays: ``uses`` is None)
    cids, graph, uses, by_idx = _dag.call_graph_ids(sess, rules, False)
    # the limits in every key as a small id (hashing the dataclass costs more than the rest)
    lim = cache.key_id(limits) if cache is not None else limits
    # Tarjan, tail position, the inline caps, the keys and the emitted bodies, compiled
    # (tests/reference_encode.py has the Python loop it follows: same plan, same code)
    shared, single = limits.inline_shared_states, limits.inline_max_states
    return _dag.plan(sess, graph, cids, uses, start, outlined, shared, single, lim, by_idx)


def _given(dfas: list[DFA], rank: array[int], sess: Session) -> list[tuple[Any, array[int]]]:
    """Cached DFAs as compile_components takes them: their labels as this session's values
    (the Python loop of ``_dag.comp_args``, for tests)."""
    return [(d.handle, array("I", [rank[sess.name(n)] for n in d.names])) for d in dfas]


def finish(
    built: dict[str, tuple[DFA, array[int]]], start: str, limits: CompileLimits, sess: Session, why: str = ""
) -> Flat:
    """Runtime rules, productive rules, trimming and the flat layout, in one call.  ``why``: what
    the front end knows of an empty language (the JSON Schema keyword that made it empty)."""
    rank, _ = sess.rank()
    by_name, is_token, states = _dag.finish_args(built, sess)
    # enough byte-class weights for every state the runtime rules may keep (C leaves the byte
    # classes to Python past the weights it is given): at most all the rules' states
    weights = class_weights(min(states, limits.max_total_states))
    end = _deadline()
    try:
        got = _core.compile_finish(rank, by_name, is_token, sess.name(start), _bytes(limits), end, weights)
    except LimitError:
        deadline.check("trimming")
        raise
    if got is None:
        raise GrammarError(
            f"the grammar's language is empty: {why or f'rule {start!r} derives no finite string'}"
        )
    return from_door(got, sess.names, sess.token_sets)


def _deadline() -> float:
    """The compile deadline as C takes it: a ``time.monotonic()`` value, 0 for none.  Read
    after ``deadline.check``'s clock, so C never stops before Python would."""
    left = deadline.remaining()
    return 0.0 if left == float("inf") else time.monotonic() + left


def _bytes(limits: CompileLimits) -> int:
    return limits.max_compile_mb << 20
