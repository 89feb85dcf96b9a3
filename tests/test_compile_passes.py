"""The compiler's fast paths against the slow ones they replace.

* the C Thompson construction (``compile.components``, csrc/thompson.c through
  ``cm_compile_components``) against the Python ``reference_fsm.Builder`` driven a component
  at a time (``reference_pipeline``): the same automaton for every rule, the same tables
  for every grammar;
* Hopcroft minimization (csrc/fsm.c) against the Python subset construction and
  Moore minimization (``reference_fsm.determinize`` / ``minimize``);
* trimming in C against ``reference_fsm.trim_states`` / the Python ``can_accept``;
* ``check_ir`` over the DAG against the tree walk, the repetition rewriter's
  shortcut against its full walk, capped use counts against the counts;
* the compiled interning and encoding (``compile/_dag.pyx``) against the Python walks
  (``reference_encode``), and tail position over the DAG against the tree walk;
* the compiled plan and collection of ``components.rule_dfas`` (``_dag.plan``,
  ``_dag.collect``) against their Python loops (``reference_encode.plan``, ``collect``), cold
  and with every component cached.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import cfgmask
from cfgmask import deadline, ir
from cfgmask.compile import _dag, components, encode, graph, prepare, repeats
from cfgmask.compile import limits as limits_mod
from cfgmask.compile.cache import CACHE, AutomatonCache
from cfgmask.compile.compiled import clear_caches
from cfgmask.compile.limits import CompileLimits
from cfgmask.compile.tables import Tables, build_tables, tables_from_flat
from cfgmask.errors import GrammarError, LimitError

from . import reference_encode, reference_pipeline
from . import reference_fsm as fsm
from .helpers import alt, chars, grammar, lit, ref, rep, seq
from .reference_encode import ReferenceSession, utf8_code
from .strategies import SMALL, grammars

TOKENS = st.builds(ir.Token, st.lists(st.integers(0, 5), min_size=1, max_size=2).map(tuple), st.booleans())


@st.composite
def grammars_with_tokens(draw: st.DrawFn) -> ir.Grammar:
    g = draw(grammars())
    if draw(st.booleans()):
        name = draw(st.sampled_from(sorted(g.rules)))
        g.rules[name] = ir.Alt((g.rules[name], draw(TOKENS)))
    return g


def _cold() -> None:
    clear_caches()


def _outcome(fn):  # type: ignore[no-untyped-def]
    try:
        return fn()
    except (GrammarError, LimitError) as e:
        return (type(e).__name__, str(e))


def _unnamed(outcome):  # type: ignore[no-untyped-def]
    """An error outcome without the rule the compile names (``rule 'r0': automaton build: ...``):
    the reference pipeline builds without the plan that names it."""
    if isinstance(outcome, tuple):
        return (outcome[0], re.sub(r"^rule '[^']*': ", "", outcome[1]))
    return outcome


def _tables(g: ir.Grammar, c_builder: bool, limits: CompileLimits | None = None) -> object:
    _cold()
    t = build_tables(g, limits) if c_builder else _reference_tables(g, limits or CompileLimits())
    return {
        f.name: (v.tobytes() if hasattr(v, "tobytes") else v)
        for f in dataclasses.fields(t)
        for v in [getattr(t, f.name)]
    }


def _reference_tables(g: ir.Grammar, limits: CompileLimits) -> Tables:
    """``build_tables`` with the Python Thompson construction, one component at a time."""
    with deadline.Deadline(limits.deadline_ms, "compile"):
        sess = prepare.prepare(g, limits)
        prepare.validate(g, sess)
        try:
            f = reference_pipeline.reference_flat(g, limits, sess, fsm.build_component)
        except LimitError as e:
            if e.limit != "max_dfa_states" or limits.unroll_budget == 0:
                raise
            lim0 = dataclasses.replace(limits, unroll_budget=0)
            f = reference_pipeline.reference_flat(g, lim0, sess, fsm.build_component)
        return tables_from_flat(g, f, sess, limits)


@given(grammars_with_tokens())
def test_c_builder_gives_the_python_builders_tables(g: ir.Grammar) -> None:
    assert _outcome(lambda: _tables(g, True)) == _outcome(lambda: _tables(g, False))


@given(grammars(alphabet=SMALL), st.sampled_from((0, 4, 64)))
def test_c_builder_gives_the_python_builders_tables_small_unroll(g: ir.Grammar, budget: int) -> None:
    limits = CompileLimits(
        unroll_budget=budget, unroll_whole=0, inline_max_states=budget * 4, inline_shared_states=budget
    )
    assert _outcome(lambda: _tables(g, True, limits)) == _outcome(lambda: _tables(g, False, limits))


def _rule_dfas(
    g: ir.Grammar, c_builder: bool, expanded: frozenset[str] = frozenset()
) -> dict[str, list[fsm.DState]]:
    _cold()
    lim = CompileLimits()
    sess = encode.Session()
    rw = repeats.RepeatRewriter(g.rules, lim, sess)
    rules = rw.run()
    if c_builder:
        dfas = {n: d for n, (d, _) in components.rule_dfas(rules, g.start, rw.outlined, lim, sess).items()}
    else:
        dfas = reference_pipeline.rule_dfas(
            rules, g.start, rw.outlined, lim, sess, fsm.build_component, expanded
        )
    return {n: d.states for n, d in dfas.items()}


def assert_c_automata_match_reference(g: ir.Grammar) -> tuple[dict | None, dict | None]:
    """C's rule automata equal the Python builder's for every rule C builds on its own (C may
    expand a rule used once into its caller: such a rule has no automaton of its own); an error
    must be the same error.  Returns both results (``None`` where one raised)."""
    got, want = _outcome(lambda: _rule_dfas(g, True)), _outcome(lambda: _rule_dfas(g, False))
    if not (isinstance(got, dict) and isinstance(want, dict)):
        assert _unnamed(got) == _unnamed(want)
        return None, None
    assert got.keys() <= want.keys()
    if got != {n: want[n] for n in got}:
        # C expanded a rule the reference sized over its cap (C's plan sizes a rule used once
        # by its NFA): the reference copies C's expanded rules too, and then every automaton
        # must be equal
        expanded = frozenset(want.keys() - got.keys())
        want = _rule_dfas(g, False, expanded)
        assert got == {n: want[n] for n in got}
    return got, want


@given(grammars_with_tokens())
@example(  # a subset blow-up: C names the rule, the reference does not (a false failure once)
    grammar("r0", r0=alt(seq(ref("r0"), lit("a")), rep(seq(lit("a"), rep(chars("ab"), 0, 20)))))
)
@example(  # C expands r1 (its NFA under the cap), whose minimal DFA (2,143 states) is over it
    grammar(
        "r0",
        r0=alt(seq(ref("r0"), lit("a")), ref("r1")),
        r1=rep(ref("r2"), 0, 50),
        r2=alt(lit(""), lit("a"), rep(lit("€😀"), 2, 5)),
    )
)
def test_c_builder_gives_the_python_builders_automata(g: ir.Grammar) -> None:
    """Every rule's automaton (untrimmed, inlined callees included), state for state.  The
    reference builds every rule on its own; C expands a rule used once in its caller
    instead, so such a rule has no automaton of its own, and none calls it."""
    try:
        prepare.validate(g)
    except GrammarError:
        return
    got, want = assert_c_automata_match_reference(g)
    if got is None or want is None:
        return
    left_out = want.keys() - got.keys()
    assert not {name for states in got.values() for st_ in states for name, _ in st_.refs} & left_out


def _nfa_of(e: ir.Expr) -> tuple[fsm.NFA, int, int]:
    nfa = fsm.NFA()
    final = nfa.state()
    start = nfa.state()
    fsm.Builder(nfa, {}, set(), {}).build(e, start, final, True)
    return nfa, start, final


@settings(max_examples=60)
@given(grammars_with_tokens())
def test_hopcroft_gives_moores_automaton(g: ir.Grammar) -> None:
    """csrc/fsm.c (subset construction, Hopcroft) against fsm.determinize and the numpy
    Moore minimization; references stay calls."""
    for body in g.rules.values():
        nfa, start, final = _nfa_of(body)
        try:
            want = fsm.minimize(fsm.determinize(nfa, start, final, 100_000))
        except LimitError:  # a subset blow-up: the C build must refuse it too
            with pytest.raises(LimitError):
                fsm.build_dfa(nfa, start, final, 100_000)
            continue
        assert fsm.build_dfa(nfa, start, final, 100_000).states == want.states
        assert fsm.build_dfa_states(nfa, start, final, 100_000).states == want.states


@given(grammars_with_tokens(), st.data())
def test_trim_in_c_matches_python(g: ir.Grammar, data: st.DataObject) -> None:
    for body in g.rules.values():
        nfa, start, final = _nfa_of(body)
        try:
            d = fsm.build_dfa(nfa, start, final, 100_000)
        except LimitError:  # (a x{0,20})* tracks every counter combination: nothing to trim
            continue
        labels = sorted({c for st_ in d.states for c, _ in st_.refs})
        productive = set(data.draw(st.lists(st.sampled_from(labels), unique=True))) if labels else set()
        py = fsm.DFA(list(d.states))
        assert fsm.can_accept(d, productive) == fsm.can_accept(py, productive)
        got, want = fsm.trim(d, productive), fsm.trim_states(py, productive)
        assert (got is None) == (want is None)
        if got is not None and want is not None:
            assert got.states == want.states


@pytest.mark.parametrize(
    "body",
    [
        ir.seq(ir.Repeat(ir.literal("ab"), 0, None), ir.literal("c")),  # a state only loops back
        ir.seq(ir.literal("a"), ir.Repeat(ir.alt(ir.literal("b"), ir.Ref("r")), 0, None), ir.literal("c")),
        ir.seq(ir.literal("a"), ir.alt(ir.Ref("r"), ir.literal("b")), ir.literal("c")),  # upward only
        ir.alt(ir.seq(ir.Ref("r"), ir.literal("x")), ir.seq(ir.literal("y"), ir.Ref("q"))),
        ir.seq(ir.Ref("r"), ir.Repeat(ir.seq(ir.Ref("q"), ir.literal("z")), 0, None)),
    ],
)
def test_trim_and_can_accept_both_paths(body: ir.Expr) -> None:
    """csrc/dfa.c's can_accept follows edges upward first and walks when that fails; trim and
    can_accept for each productive set, so both paths run, against the Python reference."""
    nfa, start, final = _nfa_of(body)
    d = fsm.build_dfa(nfa, start, final, 100_000)
    labels = sorted({c for st_ in d.states for c, _ in st_.refs})
    py = fsm.DFA(list(d.states))
    for k in range(1 << len(labels)):
        productive = {lab for i, lab in enumerate(labels) if k >> i & 1}
        assert fsm.can_accept(d, productive) == fsm.can_accept(py, productive)
        got, want = fsm.trim(d, productive), fsm.trim_states(py, productive)
        assert (got is None) == (want is None)
        if got is not None and want is not None:
            assert got.states == want.states


def _check(fn, g: ir.Grammar, limits: CompileLimits) -> object:  # type: ignore[no-untyped-def]
    try:
        fn(g, limits)
    except LimitError as e:
        return (e.limit, str(e))
    return None


@given(grammars(), st.integers(1, 60), st.integers(1, 8), st.integers(2, 6))
def test_check_ir_over_the_dag_matches_the_tree_walk(g: ir.Grammar, nodes: int, depth: int, lit: int) -> None:
    limits = CompileLimits(max_ir_nodes=nodes, max_ir_depth=depth, max_dfa_states=lit)
    assert _check(prepare.check_ir, g, limits) == _check(limits_mod.check_ir_exact, g, limits)


def test_check_ir_counts_a_shared_subtree_per_use() -> None:
    e: ir.Expr = ir.literal("a")
    for _ in range(30):  # 2**30 tree nodes, 31 distinct ones
        e = ir.Seq((e, e))
    g = ir.Grammar({"s": e}, "s")
    with pytest.raises(LimitError) as err:
        prepare.check_ir(g, CompileLimits(max_ir_depth=100))
    assert err.value.limit == "max_ir_nodes"
    prepare.check_ir(ir.Grammar({"s": e}, "s"), CompileLimits(max_ir_depth=100, max_ir_nodes=1 << 40))


@given(grammars(), st.sampled_from((0, 8, 64, 1024)), st.sampled_from((10, 10**4, 10**9)))
def test_repeat_rewriter_shortcut_matches_the_full_walk(g: ir.Grammar, budget: int, product: int) -> None:
    limits = CompileLimits(unroll_budget=budget, unroll_whole=0, max_repeat_product=product)

    def run(sess: encode.Session | None) -> object:
        try:
            rw = repeats.RepeatRewriter(g.rules, limits, sess)
            return rw.run(), rw.outlined
        except (GrammarError, LimitError) as e:
            return type(e).__name__, str(e)

    assert run(encode.Session()) == run(None)


@given(grammars())
def test_use_counts_over_the_dag(g: ir.Grammar) -> None:
    sess = encode.Session()
    cids = {n: sess.cid(b) for n, b in g.rules.items()}
    want = {n: min(2, c) for n, c in graph.use_counts(g.rules).items()}
    assert graph.use_counts_dag(sess, cids) == want


@given(grammars())
def test_rule_sizes_over_the_dag(g: ir.Grammar) -> None:
    assert repeats.rule_sizes(g.rules, encode.Session()) == repeats.rule_sizes(g.rules)


def test_tables_key_tells_grammars_apart() -> None:
    limits = CompileLimits()
    a = ir.Grammar({"s": ir.Seq((ir.literal("ab"), ir.Repeat(ir.Ref("t"), 0, 3))), "t": ir.literal("x")}, "s")
    b = ir.Grammar({"s": ir.Seq((ir.literal("ab"), ir.Repeat(ir.Ref("t"), 0, 4))), "t": ir.literal("x")}, "s")
    c = ir.Grammar({"s": ir.Seq((ir.literal("ab"), ir.Repeat(ir.Ref("t"), 0, 3))), "t": ir.literal("x")}, "s")

    def key(g: ir.Grammar, lim: CompileLimits) -> str:
        return prepare.tables_key(prepare.prepare(g, lim, CACHE.session()), g, lim)

    ka, kb, kc = (key(x, limits) for x in (a, b, c))
    assert ka != kb
    assert ka == kc
    assert ka != key(a, dataclasses.replace(limits, unroll_budget=3))
    clear_caches()  # a new generation of node ids: old keys never match again
    assert key(a, limits) != ka
    with pytest.raises(ValueError):  # ids of a private session mean nothing to another
        prepare.tables_key(prepare.prepare(a, limits), a, limits)


def test_a_components_key_tells_its_callees_apart() -> None:
    """A component's cache key holds each of its callees' keys: a caller spelled the same
    whose second callee differs is built again, not taken from the cache (its automaton
    inlines them)."""
    limits = CompileLimits()

    def start_states(g: ir.Grammar, sess: encode.Session) -> list[Any]:
        prepare.prepare(g, limits, sess)
        built = components.rule_dfas(dict(g.rules), g.start, set(), limits, sess)
        return built[g.start][0].states

    clear_caches()
    for last in ("2", "3"):
        rules: dict[str, ir.Expr] = {"s": ir.Seq((ir.Ref("a"), ir.Ref("b"))), "a": ir.literal("1")}
        g = ir.Grammar({**rules, "b": ir.literal(last)}, "s")
        assert start_states(g, CACHE.session()) == start_states(g, encode.Session())


def test_deep_ir_takes_the_iterative_walks() -> None:
    """Past 200 levels the DAG walks (ids, encoding) continue without recursion."""
    e: ir.Expr = ir.literal("a")
    for i in range(300):
        e = ir.Seq((ir.literal("b"), e)) if i % 2 else ir.Alt((e, ir.Repeat(ir.literal("c"), 0, 1)))
    g = ir.Grammar({"s": ir.Seq((e, ir.Ref("t"))), "t": ir.Repeat(ir.literal("x"), 1, None)}, "s")
    limits = CompileLimits(max_ir_depth=1000)
    assert _tables(g, True, limits) == _tables(g, False, limits)


@st.composite
def shared_grammars(draw: st.DrawFn) -> ir.Grammar:
    """A drawn grammar (token terminals included) with one more rule made of the other rules'
    bodies, shared as objects, and of the node kinds the compiled walk leaves to Python."""
    g = draw(grammars_with_tokens())
    bodies = list(g.rules.values())
    picked = draw(st.lists(st.sampled_from(bodies), min_size=1, max_size=4))
    rare = draw(
        st.lists(
            st.sampled_from(
                (
                    ir.lookahead([(0x61, 0x62)]),
                    ir.LiteralSet((b"ab", b"b"), False),
                    ir.LiteralSet(("é".encode(),), True),
                    ir.Token((1, 2), True),
                )
            ),
            max_size=2,
        )
    )
    items = tuple(picked + rare)
    shared = ir.Alt(items) if draw(st.booleans()) else ir.Seq(items)
    g.rules["shared"] = ir.Repeat(shared, 0, draw(st.sampled_from((1, 3, None))))
    return g


def _interned(sess: encode.Session, g: ir.Grammar) -> tuple[object, ...]:
    sess.roots.update(sess.cids(g.rules))
    for c in sess.roots.values():
        sess.emit(c)
    it = sess.interner
    facts = (it.keys, it.count, it.height, it.maxlit, list(it.refs), list(it.uses), it.maxprod, it.plain)
    offsets = dict(sess.offsets.items())
    return sess.roots, facts, sess.code.tolist(), offsets, sess.names, sess.markers, sess.tokens


@given(shared_grammars())
def test_compiled_interning_and_encoding_match_the_python_walks(g: ir.Grammar) -> None:
    assert _interned(encode.Session(), g) == _interned(ReferenceSession(), g)


def _no_python_walk(self: encode.Session, root: ir.Expr, max_nodes: int | None) -> int:
    raise AssertionError(f"Session._cid_iter walked {root!r}")


def test_compiled_interning_takes_literal_sets_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    """A literal set inside a rule is interned by the compiled walk as the other leaves are,
    not by ``Session._cid_iter``'s Python loop: the same ids, facts and code as the Python
    walk's, and the session notes the set (``components.outline_sets`` reads that)."""
    words = ir.LiteralSet((b"ab", b"b"), False)
    json_words = ir.LiteralSet(("\u00e9".encode(), b"e"), True)
    body = ir.Seq((ir.literal("x"), words, ir.Alt((json_words, words, ir.Ref("s")))))
    g = ir.Grammar({"s": ir.Repeat(body, 0, 2), "t": ir.Seq((words, ir.Ref("s")))}, "t")
    sess = encode.Session()
    monkeypatch.setattr(encode.Session, "_cid_iter", _no_python_walk)
    sess.roots.update(sess.cids(g.rules))
    monkeypatch.undo()
    assert sess.literal_sets
    assert _interned(sess, g) == _interned(ReferenceSession(), g)


@given(st.lists(st.tuples(st.integers(0, 700), st.integers(0, 1 << 40)), max_size=40))
def test_offsets_read_and_write_as_a_dict(puts: list[tuple[int, int]]) -> None:
    """``Session.offsets`` (``_dag.Offsets``, a C array by node id) answers ``get``, ``in``,
    ``[]``, ``len`` and ``items`` as a dict given the same writes."""
    got, want = _dag.Offsets(), {}
    for cid, off in puts:
        got[cid] = off
        want[cid] = off
    for cid in range(-2, 710):
        assert got.get(cid) == want.get(cid)
        assert (cid in got) == (cid in want)
        if cid in want:
            assert got[cid] == want[cid]
        else:
            with pytest.raises(KeyError):
                got[cid]
    assert len(got) == len(want)
    assert dict(got.items()) == want
    with pytest.raises(ValueError):
        got[-1] = 0


def test_compiled_walks_number_node_kinds_as_encode() -> None:
    want = (encode._LIT, encode._BYTES, encode._UTF8, encode._SEQ, encode._ALT, encode._REPEAT, encode._REF)
    assert _dag.KINDS == (*want, encode._LOOKAHEAD, 200)
    assert _dag.MORE_KINDS == (encode._TOKEN, encode._WORDS)


def test_compiled_facts_past_c_integers_match_the_python_walk() -> None:
    """Tree sizes and repetition products past 2**62 (a doubling chain, a huge bound) leave the
    compiled facts' C integers for Python ints: the same facts as the Python walk's."""
    body: ir.Expr = ir.Alt((ir.literal("a"), ir.Ref("r")))
    for i in range(70):
        body = ir.Seq((body, ir.literal(f"s{i % 3}"), body))
    big: ir.Expr = ir.Seq((ir.Ref("r"), ir.literal("b")))
    for _ in range(4):  # bounds multiplying to 2**80
        big = ir.Repeat(big, 0, 1 << 20)
    g = ir.Grammar({"s": ir.Seq((body, big, ir.Alt((big, body)))), "r": ir.literal("r")}, "s")
    assert _interned(encode.Session(), g) == _interned(ReferenceSession(), g)


@given(shared_grammars(), st.randoms(use_true_random=False))
def test_compiled_rule_sets_made_when_read_match_the_python_walk(g: ir.Grammar, rnd: Any) -> None:
    """The compiled interner makes a node's rule set and uses when first read (a small tree's
    by a walk of it, keeping nothing below; a large one's over the DAG, keeping those below):
    read in any order, rule bodies first, they are the Python walk's, made as it registers."""
    sess, ref = encode.Session(), ReferenceSession()
    roots = sess.cids(g.rules)
    assert roots == ref.cids(g.rules)
    it, want = sess.interner, ref.interner
    order = list(range(len(it.keys)))
    rnd.shuffle(order)
    for c in [*roots.values(), *order]:
        assert it.uses[c] == want.uses[c]
        assert it.refs[c] == want.refs[c]
    assert len(it.refs) == len(want.refs) and it.refs[-1] == want.refs[-1] and it.uses[1:3] == want.uses[1:3]


@pytest.mark.parametrize("n", [30, 84, 85, 100])
def test_compiled_rule_sets_of_trees_around_the_walks_cap(n: int) -> None:
    """A rule body of 4 + 3n tree nodes (``_dag``'s TREE_MAX is 256: n = 84 is the largest
    walked as a tree), references at its leaves, a subtree shared: its uses are the same by
    the tree walk and by the DAG walk, read first at the root or first below it."""
    shared: ir.Expr = ir.Alt((ir.Ref("a"), ir.literal("x")))
    kids = tuple(shared if i % 2 else ir.Seq((ir.Ref(f"r{i % 5}"), ir.literal(f"y{i}"))) for i in range(n))
    g = ir.Grammar({"s": ir.Seq((ir.Repeat(ir.Alt(kids), 0, 2), ir.Ref("b"))), "a": ir.literal("a")}, "s")
    for root_first in (True, False):
        sess, ref = encode.Session(), ReferenceSession()
        roots = sess.cids(g.rules)
        assert roots == ref.cids(g.rules)
        it, want = sess.interner, ref.interner
        assert want.count[roots["s"]] == 4 + 3 * n
        order = list(range(len(it.keys)))
        if root_first:
            order.reverse()
        for c in order:
            assert (it.uses[c], it.refs[c]) == (want.uses[c], want.refs[c])
        assert it.uses[roots["s"]] == {"r0": 2, "a": 2, "r2": 2, "r4": 2, "r1": 2, "r3": 2, "b": 1}


@pytest.mark.parametrize("max_nodes", [1, 5, 40])
def test_compiled_interning_stops_past_max_nodes(max_nodes: int) -> None:
    body = ir.Seq(tuple(ir.Alt((ir.literal(f"k{i}"), ir.Ref("v"))) for i in range(1500)))
    for session in (encode.Session(), ReferenceSession()):
        with pytest.raises(encode.TooBig):
            session.cid(body, max_nodes)


@given(shared_grammars(), st.data())
def test_tail_position_over_the_dag_matches_the_tree_walk(g: ir.Grammar, data: st.DataObject) -> None:
    members = set(data.draw(st.lists(st.sampled_from(sorted(g.rules)), min_size=1)))
    sess = encode.Session()
    for body in g.rules.values():
        assert graph.tail_only_dag(sess, sess.cid(body), members) == graph.tail_only(body, members, True)


def _reference_rule_dfas(
    rules: dict[str, ir.Expr], start: str, outlined: set[str], limits: CompileLimits, sess: encode.Session
) -> dict[str, object]:
    """``components.rule_dfas`` with the Python loops of its plan and its collection."""
    from cfgmask._core import compile_components

    planned = reference_encode.plan(rules, start, outlined, limits, sess)
    rank, ordered = sess.rank()
    args = [
        s if s[3] is None else (*s[:3], components._given(s[3], rank, sess), *s[4:]) for _, _, s in planned
    ]
    try:
        built = compile_components(sess.code, rank, args, limits.max_dfa_states, limits.inline_max_states)
    except LimitError as e:  # named by the rule that failed, as components.rule_dfas does
        failed = getattr(e, "component", None)
        if failed is None:
            raise
        raise LimitError(f"rule {planned[failed][0][0]!r}: {e}", limit=e.limit, value=e.value) from None
    return reference_encode.collect(planned, args, built, ordered, sess.cache)  # type: ignore[return-value]


def _planned(
    g: ir.Grammar, outlined: set[str], limits: CompileLimits, cache: AutomatonCache | None, python: bool
):  # type: ignore[no-untyped-def]
    """The plan and the DFAs of ``g`` in a new session (of ``cache``, if given): its
    components, keys, specs (cached DFAs by their states), the encoded IR, the names, and
    each rule's DFA (names, states, label values)."""
    sess = cache.session() if cache is not None else encode.Session()
    rules = dict(g.rules)
    sess.cids(rules)
    for name in sess.markers:  # as build_rules: a lookahead's marker rule
        rules[name] = ir.EPSILON
    planned = (reference_encode.plan if python else components._plan)(rules, g.start, outlined, limits, sess)
    dfas = (_reference_rule_dfas if python else components.rule_dfas)(rules, g.start, outlined, limits, sess)
    return (
        planned,
        sess.code.tolist(),
        sess.names,
        {m: (d.names, d.states, labels.tolist()) for m, (d, labels) in dfas.items()},  # type: ignore[attr-defined]
    )


@settings(deadline=None)
@given(shared_grammars(), st.data())
def test_compiled_plan_matches_the_python_loop(g: ir.Grammar, data: st.DataObject) -> None:
    outlined = set(data.draw(st.lists(st.sampled_from(sorted(g.rules)), max_size=2)))
    limits = CompileLimits(
        inline_shared_states=data.draw(st.sampled_from((0, 3, 64))),
        inline_max_states=data.draw(st.sampled_from((0, 8, 2000))),
        max_dfa_states=2000,
    )
    caches = {python: AutomatonCache() for python in (False, True)}
    for cache_of in ({False: None, True: None}, caches, caches):  # no cache, cold, every component cached
        got = [
            _outcome(lambda c=cache_of[python], p=python: _planned(g, outlined, limits, c, p))  # type: ignore[misc]
            for python in (False, True)
        ]
        assert got[0] == got[1]


@pytest.mark.parametrize("tail", [True, False])
def test_compiled_plan_past_the_recursion_cap_matches_the_python_loop(tail: bool) -> None:
    """A recursive rule nested deeper than the compiled walks go (the rest walked by the
    Python functions) gets the same plan: right-linear only with its call in tail position."""
    body: ir.Expr = ir.Ref("r0")
    for i in range(120):  # 240 nodes deep: past the cap of 200, within Python's recursion
        body = (
            ir.Seq((ir.literal(f"k{i % 7}"), ir.Alt((body, ir.literal("x")))))
            if tail
            else ir.Seq((body, ir.literal("y")))
        )
    g = ir.Grammar({"r0": ir.Alt((body, ir.literal("z")))}, "r0")
    limits = CompileLimits(max_ir_depth=1000)
    got = [
        _outcome(lambda p=python: _planned(g, set(), limits, AutomatonCache(), p)) for python in (False, True)
    ]
    assert got[0] == got[1]
    assert got[0][0][0][2][2] is tail  # right-linear


CODE_POINTS = st.one_of(
    st.sampled_from((0, 0x7F, 0x80, 0x7FF, 0x800, 0xD7FF, 0xD800, 0xDFFF, 0xE000, 0xFFFF, 0x10000, 0x10FFFF)),
    st.integers(0, 0x10FFFF),
    st.integers(-5, 0x110005),  # out of range: clipped
)


@given(st.lists(st.tuples(CODE_POINTS, CODE_POINTS), max_size=5))
def test_compiled_utf8_code_matches_the_python_construction(ranges: list[tuple[int, int]]) -> None:
    assert _dag.utf8_code(tuple(ranges)) == utf8_code(tuple(ranges))


def _sizes(g: ir.Grammar, compiled: bool, order: list[int], rule_size: dict[str, int]) -> tuple[object, ...]:
    """Every interned node's size estimate (asked in ``order``, by position), a fresh session's
    ``size0`` and memo after: the compiled walk's or the Python's."""
    sess = encode.Session()
    cids = list(sess.cids(g.rules).values())
    n = len(sess.interner.keys)
    memo: dict[int, int] = {}
    size = repeats.dag_size if compiled else repeats.dag_size_py
    got = [size(sess, i % n, rule_size, memo) for i in order]
    return got, sess.interner.size0, memo, cids


@given(shared_grammars(), st.lists(st.integers(0, 1000), max_size=12), st.integers(1, 9))
def test_compiled_dag_size_matches_the_python_walk(g: ir.Grammar, order: list[int], k: int) -> None:
    """``_dag.Sizes`` against ``repeats.dag_size_py``: the same sizes, kept in the same dicts
    (a node whose subtree refers to no rule in the interner's, the others in the memo)."""
    rule_size = {name: k * (i + 1) for i, name in enumerate(sorted(g.rules)[::2])}
    assert _sizes(g, True, order, rule_size) == _sizes(g, False, order, rule_size)


def test_compiled_dag_size_past_the_recursion_cap_matches_the_python_walk() -> None:
    """A repeated item 300 levels deep that refers to a rule: the compiled walk gives up at
    its cap, and the Python one goes on from what it kept (the same sizes)."""
    e: ir.Expr = ir.Ref("t")
    for i in range(300):
        cls = ir.Repeat(ir.CharClass(((97, 99),)), 0, 2)
        e = ir.Seq((ir.literal("ab"), e)) if i % 2 else ir.Alt((e, cls))
    g = ir.Grammar({"s": ir.Repeat(e, 0, 5), "t": ir.literal("xyz")}, "s")
    assert repeats.rule_sizes(g.rules, encode.Session()) == repeats.rule_sizes(g.rules)
    order = list(range(0, 2000, 7))
    assert _sizes(g, True, order, {"t": 3}) == _sizes(g, False, order, {"t": 3})


def _sets_below(sess: encode.Session, c: int, below: dict[int, bool]) -> bool:
    """Is there a literal set below ``c`` (``components.outline_sets``' test, in Python)?"""
    got = below.get(c)
    if got is None:
        key = sess.interner.keys[c]
        if key[0] in (encode._SEQ, encode._ALT):
            got = any(_sets_below(sess, k, below) for k in key[1])
        else:
            got = key[0] == encode._WORDS or (key[0] == encode._REPEAT and _sets_below(sess, key[1], below))
        below[c] = got
    return got


@given(shared_grammars(), st.lists(st.integers(0, 1000), max_size=12))
def test_compiled_literal_set_test_matches_the_python_walk(g: ir.Grammar, order: list[int]) -> None:
    sess = encode.Session()
    sess.cids(g.rules)
    n = len(sess.interner.keys)
    below: dict[int, bool] = {}
    want: dict[int, bool] = {}
    walk = _dag.SetsBelow(sess.interner.keys, below)
    assert [walk(i % n) for i in order] == [_sets_below(sess, i % n, want) for i in order]
    assert below == want


NAMES = st.sampled_from("abcdefgh")


@given(st.dictionaries(NAMES, st.sets(st.sampled_from("abcdefghij"), max_size=4), max_size=8))
def test_compiled_sccs_of_the_whole_graph_match_the_python_walk(g: dict[str, set[str]]) -> None:
    """``_dag.sccs_all`` against ``graph.sccs_all_py``: the same components in the same order
    (each root in the graph's order, edges to rules outside it dropped)."""
    assert graph.sccs_all(g) == graph.sccs_all_py(g)


def test_literal_set_past_the_recursion_cap_is_outlined() -> None:
    """A literal set 300 levels down: the compiled test gives up at its cap, the Python one
    goes on, and the set becomes a rule of its own as anywhere else."""
    words = ir.LiteralSet((b"ab", b"cd"), False)
    e: ir.Expr = ir.Seq((ir.literal("x"), words))
    for i in range(300):
        e = ir.Seq((ir.literal("b"), e)) if i % 2 else ir.Alt((e, ir.literal("c")))
    sess = encode.Session()
    sess.cids({"s": e})
    out = components.outline_sets({"s": e}, sess)
    assert out["<literal set 0>"] is words
    stack, seen = [out["s"]], 0
    while stack:
        x = stack.pop()
        assert not isinstance(x, ir.LiteralSet)
        if isinstance(x, ir.Ref):
            seen += x.name == "<literal set 0>"
        elif isinstance(x, (ir.Seq, ir.Alt)):
            stack.extend(x.items)
    assert seen == 1


def test_compiled_ranks_and_component_args_match_the_python_loops() -> None:
    """``_dag.ranks`` (``Session.rank``) and ``_dag.comp_args`` (``rule_dfas``' arguments, a
    cached component's labels as this session's values: ``components._given``) give what their
    Python loops give, cold and with every component cached; ``validate`` names the first
    undefined reference as its Python loop did."""
    g = cfgmask.Grammar.from_json_schema(
        {"type": "object", "properties": {"a": {"enum": ["x", "y"]}, "b": {"type": "array"}}}
    ).ir
    limits = CompileLimits()
    cache = AutomatonCache()
    for _ in range(2):  # cold, then cached
        sess = cache.session()
        rules = dict(g.rules)
        sess.cids(rules)
        planned = components._plan(rules, g.start, set(), limits, sess)
        rank, ordered = sess.rank()
        want = sorted(sess.names)
        assert ordered == want and [want[r] for r in rank] == sess.names
        args = _dag.comp_args(planned, rank, sess)
        ref = [
            s if s[3] is None else (*s[:3], components._given(s[3], rank, sess), *s[4:])
            for _, _, s in planned
        ]
        assert args == ref
        components.rule_dfas(rules, g.start, set(), limits, sess)
    assert any(s[3] is not None for _, _, s in planned)
    bad = ir.Grammar({"root": ir.Seq((ir.Ref("a"), ir.Ref("nope"))), "a": ir.Ref("gone")}, "root")
    with pytest.raises(GrammarError, match="rule 'root' refers to undefined rule 'nope'"):
        build_tables(bad)
