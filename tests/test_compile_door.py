"""One door into C per compile stage: ``_core.compile_components`` builds the automata of
every rule component in one call, ``_core.compile_finish`` finds the runtime and productive
rules, trims them and flattens them in another.  Driven as ``automata._build_dfas`` +
``_trim_all`` + ``_flatten`` drive the per-component calls, they must give the same flat
tables, array for array, on every shipped grammar and a sample of JSON Schemas, with at
most a handful of crossings into C per compile (counted by wrapping `_core`).

``door_flat`` below is how the pipeline drives the two calls.
"""

from __future__ import annotations

import dataclasses
import importlib
import itertools
import json
import time
from array import array
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from cfgmask.automata import TOKEN_LABEL, CompileLimits, _Flat

import cfgmask
from cfgmask import automata, ir
from cfgmask.errors import GrammarError, LimitError

_core: Any = importlib.import_module("cfgmask._core")  # no stubs: Any
ROOT = Path(__file__).resolve().parent.parent
GRAMMARS = sorted((ROOT / "grammars").glob("*.gbnf")) + sorted((ROOT / "grammars").glob("*.lark"))
SCHEMA_FILES = ["Github_easy.jsonl", "Github_medium.jsonl", "Glaiveai2K.jsonl", "Snowplow.jsonl"]


# ---- the pipeline through the two doors ------------------------------------------------


def _components(
    sess: automata._Session, rules: dict[str, ir.Expr], start: str, outlined: set[str], limits: CompileLimits
) -> list[tuple[list[str], tuple[Any, ...]]]:
    """Per component of the rule graph, callees first: its members and the tuple
    ``compile_components`` takes (everything built, nothing cached)."""
    cids = {name: sess.cid(body) for name, body in rules.items()}
    graph = {name: set(sess.refs(c)) for name, c in cids.items()}
    uses = automata._use_counts_dag(sess, cids)
    for name in sorted(rules):  # number the names once: label values need their order
        sess.name(name)
    for t in sorted(sess.tokens):
        if t[0]:
            sess.name(automata.token_label(ir.Token(*t)))
    out = []
    for comp in automata._sccs(graph, start):
        members = set(comp)
        recursive = len(comp) > 1 or comp[0] in graph[comp[0]]
        regular = not recursive or all(automata._tail_only(rules[m], members, True) for m in comp)
        callees = sorted({c for m in comp for c in graph[m]} - members)
        spec = []
        for m in comp:
            cap = limits.inline_max_states if uses.get(m, 0) <= 1 else limits.inline_shared_states
            spec.append((sess.name(m), sess.emit(cids[m]), cap if regular and m not in outlined else 0))
        out.append((comp, (spec, [sess.name(c) for c in callees], recursive and regular, None)))
    return out


def _flat(sess: automata._Session, got: tuple[Any, ...]) -> _Flat:
    """``_Flat`` from what ``compile_finish`` returns."""
    names_idx, rule_state, rule_trans, byte_class, trans, acc, lab_off, lab_name, lab_to = got
    n = len(names_idx)
    rs = np.frombuffer(rule_state, dtype=np.uint32)
    rt = np.frombuffer(rule_trans, dtype=np.uint32)
    cls = np.frombuffer(byte_class, dtype=np.uint8).reshape(n, 256)
    tr = np.frombuffer(trans, dtype=np.int32)
    parts = [
        (tr[rt[r] : rt[r + 1]].reshape(int(rs[r + 1] - rs[r]), -1), cls[r].astype(np.intp)) for r in range(n)
    ]
    lo = np.frombuffer(lab_off, dtype=np.uint32).tolist()
    ln = np.frombuffer(lab_name, dtype=np.uint32).tolist()
    lt = np.frombuffer(lab_to, dtype=np.uint32).tolist()
    rid = {c: r for r, c in enumerate(names_idx)}
    refs: dict[int, list[tuple[int, int]]] = {}
    tokens: dict[int, list[tuple[int, int]]] = {}
    sets: dict[str, int] = {}
    for s in np.flatnonzero(np.diff(np.asarray(lo))).tolist():
        for e in range(lo[s], lo[s + 1]):
            c = sess.names[ln[e]]
            if c.startswith(TOKEN_LABEL):
                tokens.setdefault(s, []).append((sets.setdefault(c, len(sets)), lt[e]))
            else:
                refs.setdefault(s, []).append((rid[ln[e]], lt[e]))
    return _Flat(
        [sess.names[i] for i in names_idx],
        np.repeat(np.arange(n, dtype=np.uint32), np.diff(rs)),
        rs[:-1].tolist(),
        np.frombuffer(acc, dtype=np.uint8),
        parts,
        refs,
        tokens,
        list(sets),
    )


def _door(
    grammar: ir.Grammar, limits: CompileLimits, sess: automata._Session, cache: dict[str, Any] | None
) -> tuple[_Flat, dict[str, Any]]:
    rw = automata._RepeatRewriter(grammar.rules, limits, sess)
    rules = rw.run()
    # a lookahead marker stays a rule the parser calls: inlined, it would match "" unconditionally
    markers = {n for n in rules if ir.lookahead_chars(n) is not None}
    comps = _components(sess, rules, grammar.start, rw.outlined | markers, limits)
    rank, ordered = sess.rank()  # every name is numbered and every body emitted by now

    def given(members: list[str]) -> list[tuple[Any, array[int]]]:
        """A cached component's DFAs, their label names as this session's label values."""
        assert cache is not None
        return [(cache[m][0], array("I", [rank[sess.name(n)] for n in cache[m][1]])) for m in members]

    args = [spec if cache is None else (*spec[:3], given(members)) for members, spec in comps]
    left = automata.deadline.remaining()  # first: C's deadline is then never before check()'s
    end = 0.0 if left == float("inf") else time.monotonic() + left
    mb = limits.max_compile_mb << 20
    built = _core.compile_components(
        sess.code, rank, args, limits.max_dfa_states, limits.inline_max_states, mb, end
    )
    dfas: list[Any] = [None] * len(sess.names)
    by_name = {}
    for (members, _), arg, got in zip(comps, args, built, strict=True):
        for m, (h, labels) in zip(members, got if got is not None else arg[3], strict=True):
            dfas[sess.name(m)] = (h, array("I", labels))
            by_name[m] = (h, [ordered[v] for v in labels])
    is_token = bytes(n.startswith(TOKEN_LABEL) for n in sess.names)
    got = _core.compile_finish(rank, dfas, is_token, sess.name(grammar.start), mb, end)
    if got is None:
        raise GrammarError(
            f"the grammar's language is empty: rule {grammar.start!r} derives no finite string"
        )
    return _flat(sess, got), by_name


def door_flat(
    grammar: ir.Grammar, limits: CompileLimits, cache: dict[str, Any] | None = None
) -> tuple[_Flat, dict[str, Any]]:
    """The flat tables through the two doors (with the retry of ``_build_tables``), and
    every rule's (DfaHandle, label names), what a cache would keep."""
    with automata.deadline.Deadline(limits.deadline_ms, "compile"):
        sess = automata.prepare(grammar, limits)
        automata._validate(grammar, sess)
        try:
            return _door(grammar, limits, sess, cache)
        except LimitError as e:
            if e.limit != "max_dfa_states" or limits.unroll_budget == 0:
                raise
            return _door(grammar, dataclasses.replace(limits, unroll_budget=0), sess, cache)


def today_flat(grammar: ir.Grammar, limits: CompileLimits) -> _Flat:
    """The flat tables through the per-component calls (``_build_tables`` up to ``_flatten``)."""
    with automata.deadline.Deadline(limits.deadline_ms, "compile"):
        sess = automata.prepare(grammar, limits)
        automata._validate(grammar, sess)
        try:
            dfas = automata._build_dfas(grammar, limits, sess)
        except LimitError as e:
            if e.limit != "max_dfa_states" or limits.unroll_budget == 0:
                raise
            dfas = automata._build_dfas(grammar, dataclasses.replace(limits, unroll_budget=0), sess)
        return automata._flatten(dfas, list(dfas))


# ---- the tests -------------------------------------------------------------------------


def assert_same_flat(a: _Flat, b: _Flat) -> None:
    assert a.names == b.names
    assert a.start_of == b.start_of
    for x, y in ((a.rule_of, b.rule_of), (a.accepting, b.accepting)):
        assert x.dtype == y.dtype and np.array_equal(x, y)
    assert len(a.parts) == len(b.parts)
    for (ta, ca), (tb, cb) in zip(a.parts, b.parts, strict=True):
        assert ta.dtype == tb.dtype and ta.shape == tb.shape and np.array_equal(ta, tb)
        assert ca.dtype == cb.dtype and np.array_equal(ca, cb)
    assert a.refs == b.refs
    assert a.tokens == b.tokens
    assert a.token_sets == b.token_sets


def outcome(make: Any) -> Any:
    try:
        return make()
    except (LimitError, GrammarError) as e:
        return type(e).__name__, getattr(e, "limit", None)


def assert_same_outcome(grammar: ir.Grammar, limits: CompileLimits) -> None:
    a = outcome(lambda: door_flat(grammar, limits)[0])
    b = outcome(lambda: today_flat(grammar, limits))
    if isinstance(a, tuple) or isinstance(b, tuple):
        assert a == b
    else:
        assert_same_flat(a, b)


def _grammar(path: Path) -> ir.Grammar:
    text = path.read_text(encoding="utf-8")
    g = cfgmask.Grammar.from_lark(text) if path.suffix == ".lark" else cfgmask.Grammar.from_gbnf(text)
    return g.ir


def _schemas(per_file: int = 6) -> list[tuple[str, Any]]:
    out = []
    for name in SCHEMA_FILES:
        with open(ROOT / "tests" / "corpora" / "jsonschemabench" / name, encoding="utf-8") as f:
            for i, line in enumerate(itertools.islice(f, per_file)):
                out.append((f"{name}:{i}", json.loads(line)["schema"]))
    return out


@pytest.mark.parametrize("path", GRAMMARS, ids=lambda p: p.name)
def test_shipped_grammar_tables_equal(path: Path) -> None:
    assert_same_outcome(_grammar(path), CompileLimits())


@pytest.mark.parametrize("schema", [s for _, s in _schemas()], ids=[i for i, _ in _schemas()])
def test_json_schema_tables_equal(schema: Any) -> None:
    try:
        g = cfgmask.Grammar.from_json_schema(schema).ir
    except GrammarError:
        pytest.skip("not enforceable exactly")
    assert_same_outcome(g, CompileLimits())


@pytest.mark.parametrize(
    "text",
    [
        'root ::= "a" [ab]* "a" [ab]{12} "b"',  # an exploding DFA: less inlining, then helper rules
        'root ::= x x x\nx ::= "a" x | "b"',  # right-linear, shared
        'root ::= "(" root ")" | e\ne ::= "e" e | ""',  # recursion around a right-linear rule
        'root ::= r | "x"\nr ::= "a" r',  # an unproductive rule, trimmed away
        'root ::= "[" v ("," v)* "]"\nv ::= root | [0-9]+ | "\\"" [^"]* "\\""',
    ],
)
def test_small_grammar_tables_equal(text: str) -> None:
    assert_same_outcome(cfgmask.Grammar.from_gbnf(text).ir, CompileLimits())
    assert_same_outcome(
        cfgmask.Grammar.from_gbnf(text).ir, CompileLimits(inline_max_states=8, max_dfa_states=200)
    )


def test_empty_language_is_a_grammar_error() -> None:
    g = cfgmask.Grammar.from_gbnf('root ::= "a" root').ir
    assert outcome(lambda: door_flat(g, CompileLimits())) == ("GrammarError", None)
    assert outcome(lambda: today_flat(g, CompileLimits())) == ("GrammarError", None)


def test_cached_components_give_the_same_tables() -> None:
    for g in (
        _grammar(ROOT / "grammars" / "json.gbnf"),
        cfgmask.Grammar.from_json_schema(_schemas(1)[0][1]).ir,
    ):
        first, dfas = door_flat(g, CompileLimits())
        again, _ = door_flat(g, CompileLimits(), cache=dfas)
        assert_same_flat(first, again)


def test_limits_name_the_component() -> None:
    for g, limits, limit in (
        (cfgmask.Grammar.from_regex("(a?b?){30}" * 10).ir, CompileLimits(max_compile_mb=1), "max_compile_mb"),
        (
            _grammar(ROOT / "grammars" / "c.gbnf"),
            CompileLimits(max_dfa_states=20, unroll_budget=0),
            "max_dfa_states",
        ),
    ):
        with pytest.raises(LimitError) as info:
            door_flat(g, limits)
        assert info.value.limit == limit
        assert isinstance(info.value.component, int)  # type: ignore[attr-defined]
    with pytest.raises(LimitError) as info:
        rank = array("I", [0])
        _core.compile_components(array("I", [7, 0]), rank, [([(0, 0, 0)], [], False, None)], 10, 10, 0, 1.0)
    assert info.value.limit == "deadline_ms" and info.value.component == 0  # type: ignore[attr-defined]


def test_at_most_five_crossings_per_compile(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []

    def counted(name: str, fn: Any) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            calls.append(name)
            return fn(*args, **kwargs)

        return call

    for name in dir(_core):
        fn = getattr(_core, name)
        if callable(fn) and not isinstance(fn, type) and not name.startswith("_"):
            monkeypatch.setattr(_core, name, counted(name, fn))
    for path in GRAMMARS:
        calls.clear()
        door_flat(_grammar(path), CompileLimits())
        assert calls == ["compile_components", "compile_finish"], (path.name, calls)
