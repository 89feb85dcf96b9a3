"""The compile pipeline's automaton stage the slow way, for the tests: one Python->C call per
rule component and per rule.

The package builds every component in one call (``_core.compile_components``) and trims and
flattens the runtime rules in another (``_core.compile_finish``).  This module keeps the
orchestration those replaced: components built one at a time by a ``build`` function (the C
Thompson construction per component, ``build_in_c``, or the Python one,
``reference_fsm.build_component``), the productive-rule fixpoint and trimming through
``DfaHandle.can_accept`` / ``trim``, and the flat layout through ``DfaHandle.flat``.
"""

from __future__ import annotations

import time
from array import array
from collections.abc import Callable, Container

import numpy as np

from cfgmask import deadline, ir
from cfgmask.compile.automaton import DFA
from cfgmask.compile.components import call_graph
from cfgmask.compile.encode import Session
from cfgmask.compile.flat import Flat
from cfgmask.compile.graph import sccs, tail_only
from cfgmask.compile.limits import CompileLimits
from cfgmask.compile.repeats import RepeatRewriter
from cfgmask.errors import GrammarError, LimitError

Build = Callable[..., dict[str, DFA]]


# Trimming one DFA at a time (cm_compile_finish trims them all in one call in the package)


def trim(dfa: DFA, productive: set[str]) -> DFA | None:
    """Drop calls to unproductive rules and states that cannot reach acceptance
    or cannot be reached; None when the start state itself is dead."""
    got = dfa.handle.trim(bytes(n in productive for n in dfa.names))
    if got is None:
        return None
    h, used = got
    return DFA(h, [dfa.names[i] for i in used])


def can_accept(dfa: DFA, productive: set[str]) -> bool:
    """Does the DFA accept some string when calls to ``productive`` rules count as steps?"""
    return bool(dfa.handle.can_accept(bytes(n in productive for n in dfa.names)))


def rule_dfas(
    rules: dict[str, ir.Expr],
    start: str,
    outlined: set[str],
    limits: CompileLimits,
    sess: Session,
    build: Build | None = None,
    expanded: frozenset[str] = frozenset(),
) -> dict[str, DFA]:
    """Every rule's DFA, inlined callees included, a component at a time (no cache).

    ``expanded``: rules copied into their callers whatever their DFA's size.  C's plan expands a
    rule used once by an estimate of its NFA (csrc/components.c ``pick_expanding``), which can
    be under ``inline_max_states`` where the minimal DFA is over it; a test that compares
    automata passes C's choice here so that both build the same automata."""
    build = build or build_in_c
    cids, graph, uses = call_graph(rules, sess)
    fragments: dict[str, DFA] = {}
    inline: set[str] = set()
    for comp in sccs(graph, start):
        members = set(comp)
        recursive = len(comp) > 1 or comp[0] in graph[comp[0]]
        regular = not recursive or all(tail_only(rules[m], members, True) for m in comp)
        deadline.check("rule loop")
        callees = sorted({c for m in comp for c in graph[m]} - members)
        dfas = build_component(
            rules, comp, recursive and regular, fragments, inline, limits, sess, callees, build, expanded
        )
        fragments.update(dfas)
        for m in comp:
            # Copying a rule into every caller makes tokens that span it context-independent,
            # but copies of copies grow exponentially (e.g. one rule per subset of object keys):
            # big automata are copied only into a single caller.
            cap = limits.inline_max_states if uses.get(m, 0) <= 1 else limits.inline_shared_states
            if regular and m not in outlined and (len(dfas[m]) <= cap or m in expanded):
                inline.add(m)
    return fragments


def build_component(
    rules: dict[str, ir.Expr],
    comp: list[str],
    right_linear: bool,
    fragments: dict[str, DFA],
    inline: set[str],
    limits: CompileLimits,
    sess: Session,
    callees: list[str],
    build: Build,
    expanded: frozenset[str] = frozenset(),
) -> dict[str, DFA]:
    """A component's automata, with less inlining if the full inlining blows up (``expanded``
    callees stay copied at the first budget)."""
    for budget in (limits.inline_max_states, 64, 0):
        usable = [
            n
            for n in callees
            if n in inline
            and (len(fragments[n]) <= budget or (n in expanded and budget == limits.inline_max_states))
        ]
        try:
            return build(sess, rules, comp, right_linear, usable, fragments, limits)
        except LimitError as e:
            if budget == 0 or e.limit != "max_dfa_states":
                raise
    raise AssertionError("unreachable")


def build_in_c(
    sess: Session,
    rules: dict[str, ir.Expr],
    comp: list[str],
    right_linear: bool,
    usable: list[str],
    fragments: dict[str, DFA],
    limits: CompileLimits,
) -> dict[str, DFA]:
    """The members' minimal DFAs, built in C from the encoded IR (Thompson construction,
    subset construction, Hopcroft minimization: csrc/fsm.c), the ``usable`` callees copied in."""
    from cfgmask._core import fsm_build_ir

    roots = array("I", [sess.emit(sess.cid(rules[m])) for m in comp])
    over = []
    if right_linear:
        over += [(sess.name(m), 1, i) for i, m in enumerate(comp)]  # CM_IR_REF_ENTRY
    frag_names = []
    for j, c in enumerate(usable):
        over.append((sess.name(c), 2, j))  # CM_IR_REF_EMBED
        frag_names.append([sess.name(n) for n in fragments[c].names])
    rank, ordered = sess.rank()
    over.sort()
    refs = array("I", [x for t in over for x in t])
    frags = [
        (fragments[c].handle, array("I", [rank[i] for i in idx]))
        for c, idx in zip(usable, frag_names, strict=True)
    ]
    deadline.check("automaton build")
    left = deadline.remaining()  # first: C's deadline is then never before check()'s
    try:
        built = fsm_build_ir(
            sess.code,
            rank,
            refs,
            frags,
            roots,
            right_linear,
            limits.max_dfa_states,
            limits.max_compile_mb << 20,
            0.0 if left == float("inf") else time.monotonic() + left,
        )
    except LimitError as e:
        if e.limit == "deadline_ms":
            deadline.check("automaton build")  # the same error, naming the setting
        raise
    return {m: DFA(h, [ordered[r] for r in used]) for m, (h, used) in zip(comp, built, strict=True)}


def _callees_in_order(dfa: DFA) -> list[str]:
    """The labels of ``dfa`` in order of first use (states in order, labels by name)."""
    names = dfa.names
    if len(names) <= 1:
        return list(names)
    return [names[i] for i in dfa.handle.label_order()]


def runtime_rules(dfas: dict[str, DFA], start: str, tokens: Container[str]) -> list[str]:
    """The rules reachable from ``start``, in order of first use (labels in ``tokens`` are
    token terminals, not rules)."""
    order = [start]
    seen = {start}
    for name in order:
        for callee in _callees_in_order(dfas[name]):
            if callee not in seen and callee not in tokens:
                seen.add(callee)
                order.append(callee)
    return order


def trim_all(dfas: dict[str, DFA], start: str, tokens: Container[str]) -> dict[str, DFA]:
    """The runtime rules, productive ones only, each without dead states and calls to
    unproductive rules; GrammarError if ``start`` derives nothing."""
    names = runtime_rules(dfas, start, tokens)
    # token terminals always match something
    productive: set[str] = {c for n in names for c in _labels(dfas[n]) if c in tokens}
    changed = True
    while changed:
        changed = False
        deadline.check("fixpoint")
        for n in names:
            if n not in productive and can_accept(dfas[n], productive):
                productive.add(n)
                changed = True
    if start not in productive:
        raise GrammarError(f"the grammar's language is empty: rule {start!r} derives no finite string")
    trimmed = {}
    for n in names:
        if n in productive:
            t = trim(dfas[n], productive)
            assert t is not None
            trimmed[n] = t
    return {n: trimmed[n] for n in runtime_rules(trimmed, start, tokens)}


def _labels(dfa: DFA) -> list[str]:
    return dfa.names


def build_dfas(
    grammar: ir.Grammar, limits: CompileLimits, sess: Session, build: Build | None = None
) -> dict[str, DFA]:
    """The runtime rules' trimmed DFAs, the slow way."""
    rw = RepeatRewriter(grammar.rules, limits, sess)
    rules = rw.run()
    for name in sess.markers:
        rules[name] = ir.EPSILON
    dfas = rule_dfas(rules, grammar.start, rw.outlined | set(sess.markers), limits, sess, build)
    return trim_all(dfas, grammar.start, sess.token_sets)


def reference_flat(
    grammar: ir.Grammar, limits: CompileLimits, sess: Session, build: Build | None = None
) -> Flat:
    """``compile.components.build_rules`` the slow way."""
    dfas = build_dfas(grammar, limits, sess, build)
    return flatten(dfas, list(dfas), sess.token_sets)


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
