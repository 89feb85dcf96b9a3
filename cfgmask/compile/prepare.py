"""Pass 0: the checks that run before anything recurses on the IR, and the IR's ids.

:func:`prepare` interns every rule body (:class:`~.encode.Session`) and checks the size
limits over the DAG, falling back to the exact tree walk of :func:`.limits.check_ir_exact`
only to report a limit that is exceeded; :func:`validate` checks references; and
:func:`tables_key` keys the table cache by the ids.
"""

from __future__ import annotations

from collections.abc import Hashable

from .. import ir
from ..errors import GrammarError
from . import _dag
from .encode import Session, TooBig
from .limits import CompileLimits, check_ir_exact


def prepare(grammar: ir.Grammar, limits: CompileLimits, sess: Session | None = None) -> Session:
    """``check_ir`` and the IR's ids (in ``sess``, a new private session by default), which
    ``tables_key`` and ``build_tables`` use."""
    if sess is None:
        sess = Session()
    if len(grammar.rules) > limits.max_rules:
        check_ir_exact(grammar, limits)
    try:
        sess.roots.update(sess.cids(grammar.rules, limits.max_ir_nodes))
    except TooBig:  # more distinct nodes than max_ir_nodes: more tree nodes too
        check_ir_exact(grammar, limits)
        raise AssertionError("check_ir missed a limit") from None
    nodes, height, maxlit = _dag.root_facts(sess.interner, sess.roots.values())
    if nodes > limits.max_ir_nodes or height > limits.max_ir_depth or maxlit >= limits.max_dfa_states:
        check_ir_exact(grammar, limits)  # raises the error the tree walk meets first
    return sess


def tables_key(sess: Session, grammar: ir.Grammar, limits: CompileLimits) -> Hashable:
    """A key of the grammar's tables: equal keys, equal IR (by node ids) and limits.  A tuple
    (a digest of its text cost more than the rest of a small grammar's checks)."""
    if sess.cache is None:
        raise ValueError("tables_key needs a session of the automaton cache: private ids compare to nothing")
    return (sess.gen, frozenset(sess.roots.items()), grammar.start, limits)


def check_ir(grammar: ir.Grammar, limits: CompileLimits) -> None:
    """Size checks that run before any pass that recurses on the IR or builds automata:
    rule count, IR nodes, nesting depth, and literals too long for one rule's DFA.
    Counted over the DAG of distinct subtrees (see ``prepare``); the tree walk
    (``check_ir_exact``) runs only to report a limit that is exceeded."""
    prepare(grammar, limits)


def validate(grammar: ir.Grammar, sess: Session | None = None) -> None:
    """The start rule and every referenced rule are defined; no rule takes the name the
    compiler gives a lookahead's marker rule."""
    if grammar.start not in grammar.rules:
        raise GrammarError(f"start rule {grammar.start!r} is not defined")
    if sess is None:
        sess = Session()
    rules, markers = grammar.rules, sess.markers
    # the ids ``prepare`` found for this grammar's rules (interned again only without them)
    roots = sess.roots
    cids = roots if roots.keys() == rules.keys() else sess.cids(rules)
    bad = _dag.undefined_ref(cids, sess.interner.refs, rules, markers)  # the loop compiled
    if bad is not None:
        raise GrammarError(f"rule {bad[0]!r} refers to undefined rule {bad[1]!r}")
    for name in sess.markers:
        if name in grammar.rules:
            raise GrammarError(f"rule name {name!r} is reserved for a lookahead marker")
