"""``_dag.outline_sets`` (helper ``glue51``): the compiled walk that outlines literal sets gives
what ``components.outline_sets_py`` gives -- the same rules in the same order, each literal set
below a rule's body named ``<literal set k>`` in the order the walk meets it, the bodies with no
set below kept as the very objects given -- on drawn grammars with sets nested and shared, and
on the JSON Schema corpus's enums; and the compiled walk is the one taken."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import cfgmask
from cfgmask import ir
from cfgmask.compile import _dag, components, encode
from cfgmask.compile.compiled import clear_caches
from cfgmask.compile.tables import build_tables

from .test_compile_passes import shared_grammars

CORPUS = Path(__file__).parent / "corpora" / "jsonschemabench"

SETS = (
    ir.LiteralSet((b"ab", b"b"), False),
    ir.LiteralSet((b'"x"', b'"yz"'), True),
    ir.LiteralSet((b"q",), False),
)


def _outlined(rules: dict[str, ir.Expr], compiled: bool) -> dict[str, ir.Expr]:
    """``outline_sets`` of ``rules`` in a new session (the bodies interned first, as ``prepare``
    does), by the compiled walk or the Python one; the compiled one must not fall back."""
    sess = encode.Session()
    sess.roots.update(sess.cids(rules))
    if compiled:
        return _dag.outline_sets(rules, sess)
    return components.outline_sets_py(rules, sess)


def _same(rules: dict[str, ir.Expr]) -> None:
    got, want = _outlined(rules, True), _outlined(rules, False)
    assert list(got) == list(want)
    for name, body in want.items():
        assert got[name] == body, name
        # a body the walk keeps is the object given (identity: the memo's key downstream)
        assert (got[name] is rules.get(name)) == (body is rules.get(name)), name


@st.composite
def nested_sets(draw: st.DrawFn) -> dict[str, ir.Expr]:
    """Rules whose bodies hold literal sets at any depth, some nodes shared between rules, one
    rule a set as its whole body, and a name that the first outlined set's name would take."""
    leaves = st.sampled_from((*SETS, ir.literal("a"), ir.Ref("r0"), ir.CharClass(((0x30, 0x39),))))
    made: list[ir.Expr] = []

    def node(depth: int) -> ir.Expr:
        pick = draw(st.integers(0, 5 if depth < 4 else 1))
        if pick == 0 or (pick == 1 and not made):
            e = draw(leaves)
        elif pick == 1:
            e = draw(st.sampled_from(made))  # shared
        elif pick == 2:
            e = ir.Repeat(node(depth + 1), draw(st.integers(0, 2)), draw(st.sampled_from((None, 3))))
        else:
            kids = tuple(node(depth + 1) for _ in range(draw(st.integers(0, 3))))
            e = ir.Seq(kids) if pick == 3 else ir.Alt(kids)
        made.append(e)
        return e

    rules: dict[str, ir.Expr] = {f"r{i}": node(0) for i in range(draw(st.integers(1, 4)))}
    if draw(st.booleans()):
        rules["whole"] = SETS[0]
    if draw(st.booleans()):
        rules["<literal set 0>"] = ir.literal("taken")
    return rules


@given(nested_sets())
def test_compiled_outline_matches_the_python_walk_on_nested_sets(rules: dict[str, ir.Expr]) -> None:
    _same(rules)


@given(shared_grammars())
def test_compiled_outline_matches_the_python_walk_on_shared_grammars(g: ir.Grammar) -> None:
    _same(dict(g.rules))


def _corpus_with_enums(n: int) -> list[ir.Grammar]:
    """The first ``n`` schemas of the corpus's splits (in file order) that have an enum."""
    out = []
    for path in sorted(CORPUS.glob("*.jsonl")):
        for line in path.read_text().split("\n"):
            if '"enum"' not in line:
                continue
            try:
                out.append(cfgmask.Grammar.from_json_schema(json.loads(line)["schema"]).ir)
            except Exception:  # noqa: BLE001, S112 - a schema the front end refuses is not this test's
                continue
            if len(out) == n:
                return out
    return out


def test_compiled_outline_matches_the_python_walk_on_the_corpus() -> None:
    grammars = _corpus_with_enums(25)
    if not grammars:
        pytest.skip("no corpus schemas with enums")
    with_sets = 0
    for g in grammars:
        _same(dict(g.rules))
        sess = encode.Session()
        sess.cids(dict(g.rules))
        with_sets += sess.literal_sets
    assert with_sets > 0  # grammars the compile outlines for (a literal set met in the IR)


def test_compile_takes_the_compiled_walk(monkeypatch: pytest.MonkeyPatch) -> None:
    """A compile with a literal set inside a rule's body outlines it by the compiled walk, not
    the Python one."""
    seen: list[list[str]] = []
    compiled = _dag.outline_sets

    def spy(rules: dict[str, ir.Expr], sess: encode.Session) -> dict[str, ir.Expr]:
        out = compiled(rules, sess)
        seen.append(list(out))
        return out

    def refused(rules: dict[str, ir.Expr], sess: encode.Session) -> dict[str, ir.Expr]:
        raise AssertionError("the Python walk ran")

    monkeypatch.setattr(_dag, "outline_sets", spy)
    monkeypatch.setattr(components, "outline_sets_py", refused)
    g = ir.Grammar({"s": ir.Seq((ir.literal("<"), SETS[0], SETS[1], ir.literal(">")))}, "s")
    clear_caches()
    build_tables(g)
    assert seen == [["s", "<literal set 0>", "<literal set 1>"]]
