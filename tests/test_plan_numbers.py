"""The compile glue's numbers and facts kept in C (docs/design.md §7, helper ``glue40``):
``_dag.plan`` reads each component's members' and callees' Tarjan numbers and whether a
rule calls itself from what ``tarjan`` recorded (``Numbered``), not from the rule names;
an interner's per-node facts (tree size, height, longest literal, repetition product,
plain) live in the C fact array alone and ``Interner.count`` and the others are views
(``_dag.Column``), sizes past 2**62 kept beside them."""

from __future__ import annotations

import pytest

from cfgmask import ir
from cfgmask.compile import _dag, components, encode
from cfgmask.compile.cache import AutomatonCache
from cfgmask.compile.limits import CompileLimits

from .reference_encode import ReferenceSession
from .test_compile_passes import _outcome, _planned


def _wide() -> ir.Grammar:
    """More call edges than rules several times over (the edge slots grow), a callee shared
    by callers in different components, a rule that calls itself beside other callees, a
    cycle of three with callees outside it, and a callee first reached through another."""
    rules: dict[str, ir.Expr] = {f"leaf{i}": ir.literal(f"v{i}") for i in range(12)}
    leaves = [ir.Ref(f"leaf{i}") for i in range(12)]
    for k in range(6):  # 72 call edges: past the first room (2 a rule and 8), the slots grow
        rules[f"fan{k}"] = ir.Alt(tuple(ir.Seq((x, ir.literal(f"{k}"))) for x in leaves[k:] + leaves[:k]))
    rules["fan"] = ir.Alt(tuple(ir.Ref(f"fan{k}") for k in range(6)))
    rules["self"] = ir.Alt((ir.literal("s"), ir.Seq((ir.literal("("), ir.Ref("self"), ir.Ref("leaf2")))))
    rules["c0"] = ir.Seq((ir.literal("a"), ir.Ref("c1"), ir.Ref("leaf4")))
    rules["c1"] = ir.Alt((ir.Ref("c2"), ir.Ref("leaf5")))
    rules["c2"] = ir.Alt((ir.literal("z"), ir.Seq((ir.literal("["), ir.Ref("c0"), ir.Ref("fan")))))
    rules["top"] = ir.Seq((ir.Ref("fan"), ir.Ref("self"), ir.Ref("c0"), ir.Ref("leaf0"), ir.Ref("fan")))
    return ir.Grammar(rules, "top")


@pytest.mark.parametrize("shared", [0, 3, 64])
def test_plan_by_tarjans_numbers_matches_the_python_loop(shared: int) -> None:
    """The plan, the encoded IR and every DFA as the Python loop's, cold and cached."""
    g = _wide()
    limits = CompileLimits(inline_shared_states=shared, inline_max_states=2000, max_dfa_states=2000)
    caches = {python: AutomatonCache() for python in (False, True)}
    for cache_of in ({False: None, True: None}, caches, caches):
        got = [
            _outcome(lambda c=cache_of[python], p=python: _planned(g, set(), limits, c, p))  # type: ignore[misc]
            for python in (False, True)
        ]
        assert got[0] == got[1]


def test_plan_callees_and_members_are_the_rules_named() -> None:
    """Facts the plan's specs show: each component's members' and callees' name indices are
    those of its rules and of the rules they call outside it (sorted), and only a component
    that calls itself is right-linear or recursive."""
    g = _wide()
    sess = encode.Session()
    rules = dict(g.rules)
    cids = sess.cids(rules)
    planned = components._plan(rules, g.start, set(), CompileLimits(), sess)
    calls = {n: set(sess.interner.refs[c]) for n, c in cids.items()}
    idx = sess.name_idx
    for members, _, spec in planned:
        assert [m[0] for m in spec[0]] == [idx[m] for m in members]
        outside = sorted({c for m in members for c in calls[m]} - set(members))
        assert spec[1] == [idx[c] for c in outside]
        recursive = len(members) > 1 or members[0] in calls[members[0]]
        assert recursive or not spec[2]
    assert sorted(m for members, _, _ in planned for m in members) == sorted(rules)  # all reached from top
    assert sorted(len(members) for members, _, _ in planned)[-1] == 3  # the cycle c0 -> c1 -> c2


def _doubling(n: int, leaf: ir.Expr) -> ir.Expr:
    e = leaf
    for _ in range(n):
        e = ir.Seq((e, e))
    return e


@pytest.mark.parametrize("session", [encode.Session, ReferenceSession])
def test_columns_read_the_facts_past_two_to_the_62(session: type[encode.Session]) -> None:
    """Tree sizes and repetition products past 2**62 (a shared subtree doubled 64 times, a
    repetition of 2**40 inside one of 2**40) read back exactly through the views, as the
    Python interner's lists hold them, and ``root_facts`` sums them."""
    big = _doubling(64, ir.literal("ab"))
    deep = ir.Repeat(ir.Seq((ir.Repeat(ir.literal("q"), 0, 1 << 40), ir.Ref("r"))), 2, 1 << 40)
    rules: dict[str, ir.Expr] = {"s": ir.Seq((big, ir.literal("x"))), "r": deep, "t": ir.Alt((big, deep))}
    sess = session()
    cids = sess.cids(rules)
    it = sess.interner
    want = {
        "s": (2 * (2**64 - 1) + 1 + 1 + 1, 66, 2, 1, True),  # the doubled tree, then "x" and the Seq
        "r": (5, 4, 1, 1 << 80, False),
        "t": (2 * (2**64 - 1) + 1 + 5 + 1, 66, 2, 1 << 80, False),
    }
    for name, (count, height, maxlit, maxprod, plain) in want.items():
        c = cids[name]
        assert (it.count[c], it.height[c], it.maxlit[c], it.maxprod[c], it.plain[c]) == (
            count,
            height,
            maxlit,
            maxprod,
            plain,
        )
        assert it.count[c - len(it.keys)] == count  # from the end, as a list reads
    assert len(it.count) == len(it.keys) == len(it.plain)
    assert list(it.maxprod) == [it.maxprod[c] for c in range(len(it.keys))]
    assert _dag.root_facts(it, cids.values()) == (sum(want[n][0] for n in want), 66, 2)
    with pytest.raises(IndexError):
        it.count[len(it.keys)]


def test_columns_equal_the_python_interners_lists() -> None:
    """Every node's five facts, through the views, equal the Python interner's lists (the
    same ids), big ones included."""
    rules: dict[str, ir.Expr] = {
        "s": ir.Seq((_doubling(63, ir.literal("abc")), ir.Repeat(ir.Ref("s"), 0, 1 << 63))),
        "u": ir.Alt((ir.Repeat(ir.Repeat(ir.literal("k"), 1, 3), 0, None), ir.literal("kk"))),
    }
    got, want = encode.Session(), ReferenceSession()
    assert got.cids(rules) == want.cids(rules)
    for name in ("count", "height", "maxlit", "maxprod", "plain"):
        assert list(getattr(got.interner, name)) == getattr(want.interner, name), name


def test_an_undefined_reference_is_the_first_its_rule_meets() -> None:
    """``validate`` reads a rule's references from its uses in place: the first undefined one
    in the order the body meets them is named (the same in every process), defined rules
    and a lookahead's marker are not, and a grammar without one passes."""
    body = ir.Seq((ir.Ref("b"), ir.Ref("zz"), ir.Lookahead(((0x61, 0x62),)), ir.Ref("aa"), ir.Ref("zz")))
    g = ir.Grammar({"a": ir.Alt((body, ir.Ref("a"))), "b": ir.literal("x")}, "a")
    sess = encode.Session()
    cids = sess.cids(g.rules)
    assert _dag.undefined_ref(cids, sess.interner.refs, g.rules, sess.markers) == ("a", "zz")
    ok = dict(g.rules, zz=ir.literal("z"), aa=ir.literal("y"))
    cids = sess.cids(ok)
    assert _dag.undefined_ref(cids, sess.interner.refs, ok, sess.markers) is None
    ok.pop("aa")
    assert _dag.undefined_ref(cids, sess.interner.refs, ok, sess.markers) == ("a", "aa")
