"""Character automata built by the C core (``chardfa``: subset construction and Hopcroft in
``csrc/fsm.c``) against the Python constructions they replaced (``reference_chardfa``).

Minimal DFAs are unique up to the numbering of their states, so the C core's automaton and the
reference's must be isomorphic (start to start, same merged atoms) and agree on every string;
the strings tried are random ones and, for each state and atom, a shortest way to the state and
one more character.
"""

from __future__ import annotations

import itertools
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cfgmask import deadline, ir
from cfgmask.errors import GrammarError, LimitError
from cfgmask.frontends.json_schema import chardfa
from cfgmask.frontends.json_schema.chardfa import TOP, CharDFA

from . import reference_chardfa as ref
from .strategies import WIDE

# --------------------------------------------------------------------------- strategies

ASCII_BYTES = ((0x61, 0x62), (0x78, 0x78), (0x30, 0x39), (0x00, 0x7F))
CHARS = "abxz0é€😀" + "".join(
    map(chr, (0x70, 0x7F, 0x80, 0xA0, 0x7FF, 0x800, 0xD7FF, 0xE000, 0xFFFF, 0x10000, TOP))
)


def _leaf() -> st.SearchStrategy[ir.Expr]:
    text = st.lists(st.sampled_from(WIDE.units), min_size=1, max_size=3).map(
        lambda us: ir.literal("".join(us))
    )
    ranges = st.lists(st.sampled_from(WIDE.char_ranges), min_size=1, max_size=2).map(tuple)
    return st.one_of(
        text,
        text,
        ranges.map(ir.CharClass),
        st.builds(ir.char_class, ranges, negate=st.just(True)),
        st.lists(st.sampled_from(ASCII_BYTES), min_size=1, max_size=2).map(
            lambda rs: ir.ByteClass(tuple(rs))
        ),
        st.just(ir.EPSILON),
        st.just(ir.NOTHING),  # dead states: the C core minimizes only after the NFA is trimmed
    )


def _extend(children: st.SearchStrategy[ir.Expr]) -> st.SearchStrategy[ir.Expr]:
    parts = st.lists(children, min_size=1, max_size=3).map(tuple)
    repeat = st.builds(
        lambda e, lo, extra: ir.Repeat(e, lo, None if extra is None else lo + extra),
        children,
        st.integers(0, 2),
        st.none() | st.integers(0, 3),
    )
    return st.one_of(parts.map(ir.Seq), parts.map(ir.Alt), repeat)


def _dead_branch(e: ir.Expr, prefix: ir.Expr) -> ir.Expr:
    """``e`` beside a branch that dies after ``prefix``: states that only the dead branch tells
    apart must merge."""
    return ir.alt(e, ir.seq(prefix, ir.NOTHING))


TREES = st.recursive(_leaf(), _extend, max_leaves=8)
EXPRS = TREES | st.builds(_dead_branch, TREES, TREES)
TEXTS = st.lists(st.text(alphabet=CHARS, max_size=8), max_size=20)


def _probes(d: CharDFA) -> list[str]:
    """A shortest string to each state, and each of those with one more character of each atom."""
    way = {0: ""}
    frontier = [0]
    while frontier:
        nxt = []
        for s in frontier:
            for a, t in enumerate(d.trans[s]):
                if t >= 0 and t not in way:
                    way[t] = way[s] + chr(d.atoms[a][0][0])
                    nxt.append(t)
        frontier = nxt
    return [w + chr(rs[0][0]) for w in way.values() for rs in d.atoms] + list(way.values())


def same(new: CharDFA, old: CharDFA, texts: list[str], probe: bool = True) -> None:
    """The C core's automaton is the reference's, renumbered (``probe``: also try a string per
    state and atom, states x atoms strings through the slow ``matches``)."""
    assert new.minimal
    assert len(new) == len(old)
    assert ref.isomorphic(new, old), (new.__dict__, old.__dict__)
    for text in texts + (_probes(old) + _probes(new) if probe else []):
        assert new.matches(text) == old.matches(text), text


# --------------------------------------------------------------------------- from_expr, minimize


@given(EXPRS, TEXTS)
def test_from_expr_is_the_reference(e: ir.Expr, texts: list[str]) -> None:
    same(chardfa.from_expr(e), ref.from_expr(e), texts)


@given(st.lists(EXPRS, min_size=1, max_size=3), st.data(), TEXTS)
def test_products_are_the_reference(es: list[ir.Expr], data: st.DataObject, texts: list[str]) -> None:
    dfas = [ref.from_expr(e) for e in es]
    table = data.draw(st.integers(0, 2 ** (2 ** len(dfas)) - 1), label="truth table")

    def accept(flags: tuple[bool, ...]) -> bool:
        return bool(table >> sum(int(f) << i for i, f in enumerate(flags)) & 1)

    same(chardfa.product(dfas, accept), ref.product(dfas, accept), texts)


@given(st.lists(EXPRS, min_size=1, max_size=3), st.booleans())
def test_regions_are_the_python_loop(es: list[ir.Expr], raw_components: bool) -> None:
    """The C core's product (``cm_dfa_product``) numbers states and atoms as the Python loop did,
    on minimal components and on raw ones (unminimized, with dead targets)."""
    dfas = [chardfa.from_expr(e) for e in es]
    if raw_components:
        dfas = [chardfa.CharDFA(d.atoms, [*d.trans, [-1] * len(d.atoms)], [*d.accept, False]) for d in dfas]
    raw, flags = chardfa.regions(dfas)
    old, old_flags = ref.regions(dfas)
    assert (raw.atoms, raw.trans, raw.accept, flags) == (old.atoms, old.trans, old.accept, old_flags)


@given(st.lists(EXPRS, min_size=1, max_size=2), st.data())
def test_trim_is_the_python_loop(es: list[ir.Expr], data: st.DataObject) -> None:
    """The C core's trim (``cm_dfa_trim_labels``), what minimize hands ``fsm_build``: the live
    states' atom edges in state and atom order, an epsilon edge from each live accepting state
    to the final one, as the Python loop built them."""
    from array import array

    from cfgmask._core import dfa_trim

    raw, _ = chardfa.regions([chardfa.from_expr(e) for e in es])
    n, m = len(raw), len(raw.atoms)
    trans = [[t if data.draw(st.booleans(), label="keep") else -1 for t in row] for row in raw.trans]
    accept = data.draw(st.lists(st.booleans(), min_size=n, max_size=n), label="accept")
    out = dfa_trim(array("i", [t for row in trans for t in row]), n, m, bytes(accept))
    live = chardfa.CharDFA(raw.atoms, trans, accept).live()
    if not live[0]:
        assert out is None
        return
    assert out is not None
    edges = [
        [(a, t) for a, t in enumerate(row) if t >= 0 and live[t]] if live[s] else []
        for s, row in enumerate(trans)
    ]
    eps = [[n] if acc and live[s] else [] for s, acc in enumerate(accept)]
    lab_off, lab, lab_to, eps_off, eps_to = (memoryview(x).cast("I").tolist() for x in out)
    assert lab_off == [0, *itertools.accumulate(len(es) for es in [*edges, []])]
    assert (lab, lab_to) == ([a for es in edges for a, _ in es], [t for es in edges for _, t in es])
    assert eps_off == [0, *itertools.accumulate(len(x) for x in [*eps, []])]
    assert eps_to == [t for x in eps for t in x]


def test_regions_state_limit() -> None:
    """A product past MAX_STATES is the same GrammarError as before, from the C core's limit."""
    dfas = [chardfa.length(0, 2000), chardfa.multiples(7, False)]
    with pytest.raises(GrammarError, match="more than 4000 automaton states"):
        chardfa.regions(dfas)
    with pytest.raises(GrammarError, match="more than 4000 automaton states"):
        ref.regions(dfas)


@given(st.lists(EXPRS, min_size=1, max_size=2), st.data(), TEXTS)
def test_where_is_the_reference(es: list[ir.Expr], data: st.DataObject, texts: list[str]) -> None:
    """Any accepting states of a product (as for the key regions of ``patternProperties``)."""
    raw, _ = chardfa.regions([chardfa.from_expr(e) for e in es])
    accept = data.draw(st.lists(st.booleans(), min_size=len(raw), max_size=len(raw)), label="accept")
    same(raw.where(accept), ref.minimize(CharDFA(raw.atoms, raw.trans, accept)), texts)


@given(
    EXPRS,
    st.lists(st.text(alphabet="abé€x", max_size=4), max_size=4),
    st.integers(0, 3),
    st.none() | st.integers(0, 3),
    TEXTS,
)
def test_words_and_lengths_are_the_reference(
    e: ir.Expr, names: list[str], lo: int, extra: int | None, texts: list[str]
) -> None:
    """The string constraints' product: a pattern, a length bound, excluded values."""
    dfas = [
        chardfa.from_expr(e),
        chardfa.length(lo, None if extra is None else lo + extra),
        chardfa.words(names),
    ]

    def accept(f: tuple[bool, ...]) -> bool:
        return f[0] and f[1] and not f[2]

    same(chardfa.product(dfas, accept), ref.product(dfas, accept), texts + names)
    same(chardfa.words(names).minimize(), ref.minimize(chardfa.words(names)), texts + names)


# --------------------------------------------------------------------------- edges


EMPTY = CharDFA([((0, TOP),)], [[-1]], [False]).__dict__ | {"minimal": True}


@pytest.mark.parametrize(
    "e",
    [
        ir.NOTHING,
        ir.seq(ir.literal("a"), ir.NOTHING),
        ir.Repeat(ir.seq(ir.literal("é"), ir.NOTHING), 1, None),
        ir.CharClass(()),
    ],
)
def test_empty_language_is_the_one_state_automaton(e: ir.Expr) -> None:
    assert chardfa.from_expr(e).__dict__ == EMPTY


def test_dead_states_are_trimmed_before_minimizing() -> None:
    """``a(b∅)?`` is ``a``: the dead branch must neither survive nor keep states apart."""
    e = ir.seq(ir.literal("a"), ir.Repeat(ir.seq(ir.literal("b"), ir.NOTHING), 0, 1))
    d = chardfa.from_expr(e)
    assert len(d) == 2 and d.atoms == [((0, 0x60), (0x62, TOP)), ((0x61, 0x61),)]
    raw, _ = chardfa.regions([d])
    assert raw.where([False] * len(raw)).__dict__ == EMPTY
    assert len(raw.where([True] * len(raw))) == 1  # every string


def test_more_atoms_than_bytes() -> None:
    """Atoms are labels to the C core: past 256 of them nothing changes."""
    chars = [chr(0x100 + 2 * i) for i in range(300)]  # each told apart: c[i] wants c[i + 1] next
    pairs = [chars[i] + chars[(i + 1) % len(chars)] for i in range(len(chars))]
    e = ir.Repeat(ir.alt(*map(ir.literal, pairs)), 1, 2)
    new, old = chardfa.from_expr(e), ref.from_expr(e)
    assert len(new.atoms) > 256
    same(new, old, [pairs[0], pairs[1] + pairs[7], pairs[2][::-1], chars[1]], probe=False)
    dfas = [new, chardfa.length(3, 4)]
    same(chardfa.product(dfas, all), ref.product(dfas, all), [pairs[1] * 2, pairs[0]], probe=False)


def test_state_limit_is_a_grammar_error() -> None:
    e = ir.seq(ir.Repeat(ir.char_class([(0x61, 0x62)]), 0, None), ir.literal("a"))
    e = ir.seq(e, ir.Repeat(ir.char_class([(0x61, 0x62)]), 14, 14))  # 2^15 states
    with pytest.raises(GrammarError, match="more than 4000 automaton states"):
        chardfa.from_expr(e)


def test_deadline_reaches_the_c_core() -> None:
    """Under a deadline the remaining time goes to the C core in the spelling its wrapper takes;
    past it the compile's LimitError comes out, not an automaton."""
    e = ir.seq(ir.Repeat(ir.char_class([(0x61, 0x62)]), 0, None), ir.literal("a"))
    with deadline.Deadline(60_000):
        assert chardfa.from_expr(e).matches("ba")
        assert chardfa.product([chardfa.from_expr(e)], lambda f: not f[0]).matches("ab")
    with deadline.Deadline(1):
        time.sleep(0.01)
        with pytest.raises(LimitError) as err:
            chardfa.from_expr(e)
    assert err.value.limit == "deadline_ms"
