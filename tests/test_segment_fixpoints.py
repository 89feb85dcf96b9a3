"""The segment form's fixpoints (cfgmask/compile/segments.py) against plain round-robin
references: ``_trim`` (in C since session 36, helper segform) against its former Python loops,
NULL/FIRST/CONT, LAST and ``inb`` of ``_Follow`` (worklists and memos since session 34, helper
segcomp), and ``c_tables``' transition cells against a cell-by-cell fill.  The references iterate
every rule or state until nothing changes, the way the first version did; a least fixpoint does
not depend on the order, so both must agree exactly.  The grammars: test_segments' contexts
(hypothesis) and JSON Schema strings."""

from __future__ import annotations

import dataclasses
import itertools
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cfgmask
from cfgmask import ir
from cfgmask.compile import segments
from cfgmask.compile.limits import CompileLimits
from cfgmask.compile.segments import SegmentForm, SegmentRule, c_tables, segment_form
from cfgmask.errors import NotEnforceable

from .test_segments import CONTEXTS, _grammar, bounds, units

ON = CompileLimits(counters=True)
_ALL = segments._ALL
_bits = segments._bits


# ---- references ---------------------------------------------------------------------------------


def _ref_live(edges: Any, calls: Any, acc: list[bool], ok: set[str]) -> list[bool]:
    """Per state: can it reach acceptance (calls of rules in ``ok`` count as steps)?"""
    live = list(acc)
    changed = True
    while changed:
        changed = False
        for s in range(len(acc)):
            if not live[s] and (
                any(live[t] for _, _, t in edges[s]) or any(live[t] for c, t in calls[s] if c in ok)
            ):
                live[s] = changed = True
    return live


def _ref_states(d: Any) -> Any:
    """A rule's automaton as lists, through DFA.states (not the handle's named_states)."""
    return [x.bytes for x in d.states], [x.refs for x in d.states], [x.accepting for x in d.states]


def _ref_productive(raw: dict[str, Any], tokens: frozenset[str], unit_set: set[str]) -> set[str]:
    productive = set(tokens) | unit_set
    changed = True
    while changed:
        changed = False
        for n, (edges, calls, acc) in raw.items():
            if n not in productive and _ref_live(edges, calls, acc, productive)[0]:
                productive.add(n)
                changed = True
    return productive


def _ref_trim(raw: dict[str, Any], start: str, unit_set: set[str], tokens: frozenset[str]) -> dict[str, Any]:
    """_trim's Python loops (before session 36): the reachable productive rules in the order a
    depth-first walk from the start meets them, each without dead or unreachable states, the
    kept states in their order."""
    productive = _ref_productive(raw, tokens, unit_set)
    out: dict[str, Any] = {}
    order, seen = [start], {start}
    while order:
        n = order.pop()
        edges, calls, acc = raw[n]
        live = _ref_live(edges, calls, acc, productive)
        keep_e = [[(a, b, t) for a, b, t in es if live[t]] for es in edges]
        keep_c = [[(c, t) for c, t in cs if live[t] and c in productive] for cs in calls]
        reach, todo = [False] * len(acc), [0]
        reach[0] = True
        while todo:
            s = todo.pop()
            for t in [t for _, _, t in keep_e[s]] + [t for _, t in keep_c[s]]:
                if not reach[t]:
                    reach[t] = True
                    todo.append(t)
        new = {s: i for i, s in enumerate(s for s in range(len(acc)) if reach[s])}
        out[n] = (
            [[(a, b, new[t]) for a, b, t in keep_e[s]] for s in new],
            [[(c, new[t]) for c, t in keep_c[s]] for s in new],
            [acc[s] for s in new],
        )
        for cs in out[n][1]:
            for c, _ in cs:
                if c not in seen and c not in tokens and c not in unit_set:
                    seen.add(c)
                    order.append(c)
    return out


class _RefFollow:
    """NULL_ACC, FIRST, CONT, LAST and inb by sweeping every rule and state until no change."""

    def __init__(self, f: segments._Follow) -> None:
        self.rules = f.rules
        self.fixed = f.fixed
        self.fixed_last = f.fixed_last
        self.null_acc = {n: list(acc) for n, (_, _, acc) in self.rules.items()}
        self.firsts = {n: [0] * len(acc) for n, (_, _, acc) in self.rules.items()}
        self.conts = dict.fromkeys(self.rules, 0)
        changed = True
        while changed:
            changed = False
            for n, (edges, calls, _) in self.rules.items():
                na, fs = self.null_acc[n], self.firsts[n]
                cont = self.conts[n]
                for s in reversed(range(len(edges))):
                    f = fs[s]
                    for a, b, _ in edges[s]:
                        f |= _bits(a, b)
                    for c, t in calls[s]:
                        f |= self.first_of(c)
                        if self.nullable(c):
                            f |= fs[t]
                            if na[t] and not na[s]:
                                na[s] = changed = True
                        if na[t]:
                            cont |= self.cont_of(c)
                    if na[s]:
                        cont |= f
                    if f != fs[s]:
                        fs[s] = f
                        changed = True
                if cont != self.conts[n]:
                    self.conts[n] = cont
                    changed = True
        self.lasts = dict.fromkeys(self.rules, 0)
        changed = True
        while changed:
            changed = False
            for n in self.rules:
                inb = self.inb(n, 0)
                last = 0
                for st_, ok in enumerate(self.null_acc[n]):
                    if ok:
                        last |= inb[st_]
                if last != self.lasts[n]:
                    self.lasts[n] = last
                    changed = True

    def nullable(self, c: str) -> bool:
        return self.null_acc[c][0] if c in self.rules else self.fixed.get(c, (True, _ALL))[0]

    def first_of(self, c: str) -> int:
        return self.firsts[c][0] if c in self.rules else self.fixed.get(c, (True, _ALL))[1]

    def cont_of(self, c: str) -> int:
        return self.conts[c] if c in self.rules else self.fixed.get(c, (True, _ALL))[1]

    def last_of(self, c: str) -> int:
        return self.lasts[c] if c in self.rules else self.fixed_last.get(c, _ALL)

    def inb(self, n: str, start: int = _ALL) -> list[int]:
        edges, calls, _ = self.rules[n]
        inb = [0] * len(edges)
        inb[0] = start
        changed = True
        while changed:
            changed = False
            for st_ in range(len(edges)):
                for a, b, t in edges[st_]:
                    got = inb[t] | _bits(a, b)
                    if got != inb[t]:
                        inb[t] = got
                        changed = True
                for c, t in calls[st_]:
                    got = inb[t] | self.last_of(c) | (inb[st_] if self.nullable(c) else 0)
                    if got != inb[t]:
                        inb[t] = got
                        changed = True
        return inb


def _ref_trans(form: SegmentForm) -> tuple[np.ndarray, np.ndarray]:
    t = c_tables(form)
    n, nc = t.trans.shape
    trans = np.full((n, nc), -1, np.int32)
    flags = np.zeros((n, nc), np.uint8)
    for name in t.rules:
        ids = t.states[name]
        for s, es in enumerate(form.rules[name].edges):
            for a, b, tgt, f in es:
                for byte in range(a, b + 1):
                    c = int(t.byte_class[byte])
                    assert trans[ids[s], c] in (-1, ids[tgt])
                    trans[ids[s], c] = ids[tgt]
                    flags[ids[s], c] = f
    return trans, flags


# ---- the checks ---------------------------------------------------------------------------------


def _ref_spliced(start: str, trimmed: Any, shapes: Any, us: Any) -> SegmentForm:
    """The splice of a round that passed, as it was built before session 36: every rule copied
    with the places' loops appended, then a pass that drops the states no longer reached and
    renumbers the rest in order."""
    INTO, BACK, EXIT = segments.INTO, segments.BACK, segments.EXIT
    segs: list[segments.Segment] = []
    rules: dict[str, SegmentRule] = {}
    for name, (edges, calls, acc) in trimmed.items():
        e2 = [[(a, b, t, 0) for a, b, t in es] for es in edges]
        c2 = [[(c, t) for c, t in cs if c not in us] for cs in calls]
        acc2, seg = list(acc), [-1] * len(acc)
        for s in range(len(acc)):
            placed = [(c, t) for c, t in calls[s] if c in us]
            if not placed:
                continue
            (u, b), (xe, _, xacc) = placed[0], shapes[placed[0][0]]
            sid = len(segs)
            segs.append(segments.Segment(u, us[u][1], us[u][2], name, s))
            final = xacc.index(True)
            where = {0: s, final: s}
            for q in range(1, len(xacc)):
                if q != final:
                    where[q] = len(acc2)
                    acc2.append(False)
                    seg.append(sid)
                    e2.append([])
                    c2.append([])
            for q in range(len(xacc)):
                if q != final:
                    e2[where[q]] = [
                        (a, c, where[t], (INTO if q == 0 else 0) | (BACK if t == final else 0))
                        for a, c, t in xe[q]
                    ]
            seg[s] = sid
            e2[s] = sorted(e2[s] + [(a, c, t, EXIT) for a, c, t in edges[b]])
            acc2[s] = acc[b]
        reach, todo = [False] * len(acc2), [0]
        reach[0] = True
        while todo:
            s = todo.pop()
            for t in [t for _, _, t, _ in e2[s]] + [t for _, t in c2[s]]:
                if not reach[t]:
                    reach[t] = True
                    todo.append(t)
        new = {s: i for i, s in enumerate(s for s in range(len(acc2)) if reach[s])}
        rules[name] = SegmentRule(
            [[(a, b, new[t], f) for a, b, t, f in e2[s]] for s in new],
            [[(c, new[t]) for c, t in c2[s]] for s in new],
            [acc2[s] for s in new],
            [seg[s] for s in new],
        )
        segs = [g if g.rule != name else dataclasses.replace(g, head=new[g.head]) for g in segs]
    return SegmentForm(start, rules, segs, dict(us))


class _Seen:
    follows = 0  # _Follow objects compared
    calls_into = 0  # rules whose inb took a call's LAST (the worklist part)
    trims = 0
    spliced = 0  # rounds that passed, their splice compared
    cut = 0  # trims that dropped a state (the C trim's copy, not its shared path)


def _check(g: ir.Grammar, monkeypatch: pytest.MonkeyPatch) -> SegmentForm:
    real_trim, real_splice, real_follow = segments._trim, segments._splice, segments._Follow

    def trim(dfas: dict[str, Any], start: str, us: Any, tokens: frozenset[str]) -> Any:
        out = real_trim(dfas, start, us, tokens)
        raw = {n: _ref_states(d) for n, d in dfas.items()}
        for n, d in dfas.items():
            assert segments._states(d) == raw[n]
        want = _ref_trim(raw, start, set(us), tokens)
        assert list(out) == list(want) and out == want  # the same rules, in the same order
        _Seen.trims += 1
        _Seen.cut += any(len(out[n][2]) < len(raw[n][2]) for n in out)
        return out

    made: list[segments._Follow] = []

    def follow(*args: Any) -> segments._Follow:
        f = real_follow(*args)
        made.append(f)
        return f

    def splice(start: str, trimmed: Any, shapes: Any, us: Any, call_test: str) -> Any:
        got = real_splice(start, trimmed, shapes, us, call_test)
        # every place's _Follow the splice built, and one built here whether or not it needed one
        ok = {u: sh for u, sh in shapes.items() if segments._unit_shape(sh) is None}
        for f in [*made, real_follow(trimmed, ok, us)]:
            ref = _RefFollow(f)
            assert f.null_acc == ref.null_acc and f.firsts == ref.firsts and f.conts == ref.conts
            assert f.lasts == ref.lasts
            for n in trimmed:
                assert f.inb(n) == ref.inb(n), n
                assert f.inb(n) == ref.inb(n), n  # the memo
                assert f.inb(n, 0) == ref.inb(n, 0), n
                if any(c in trimmed for cs in trimmed[n][1] for c, _ in cs):
                    _Seen.calls_into += 1
            _Seen.follows += 1
        made.clear()
        if not got[1]:  # a round that passed: its splice against the former build
            want = _ref_spliced(start, trimmed, shapes, us)
            assert got[0].rules == want.rules and got[0].segments == want.segments
            assert got[0].units == want.units
            _Seen.spliced += 1
        return got

    monkeypatch.setattr(segments, "_trim", trim)
    monkeypatch.setattr(segments, "_splice", splice)
    monkeypatch.setattr(segments, "_Follow", follow)
    form = segment_form(g, ON)
    monkeypatch.undo()
    if form.rules:
        t = c_tables(form)
        trans, flags = _ref_trans(form)
        assert np.array_equal(t.trans, trans) and np.array_equal(t.edge_flags, flags)
    return form


@settings(max_examples=60, deadline=None)
@given(units(), bounds(), st.sampled_from(CONTEXTS), units(), bounds())
def test_fixpoints_on_the_contexts(
    x: ir.Expr, b: tuple[int, int], context: str, y: ir.Expr, b2: tuple[int, int]
) -> None:
    with pytest.MonkeyPatch.context() as mp:
        _check(_grammar(context, x, b[0], b[1], y, b2[0], b2[1]), mp)


_CORPUS = Path(__file__).parent / "corpora" / "jsonschemabench"


def _schemas(k: int) -> list[str]:
    from benchmarks.bench_maskbench import job_of, load_corpus

    jobs = [job_of(r) for r in load_corpus(_CORPUS, None, False)]
    jobs.sort(key=lambda j: j["id"])
    return [j["text"] for j in itertools.islice(jobs, 0, None, max(1, len(jobs) // k))]


@pytest.mark.skipif(not _CORPUS.exists(), reason="no JSONSchemaBench corpus")
def test_fixpoints_on_json_schemas(monkeypatch: pytest.MonkeyPatch) -> None:
    _Seen.follows = _Seen.calls_into = _Seen.trims = _Seen.spliced = 0
    spliced = 0
    for text in _schemas(12):
        try:
            g = cfgmask.Grammar.from_json_schema(text)
        except NotEnforceable:
            continue
        form = _check(g.ir, monkeypatch)
        spliced += len(form.segments)
    # the comparisons ran, on rules with calls, and counts were spliced
    assert _Seen.follows > 0 and _Seen.calls_into > 0 and _Seen.trims > 0 and spliced > 0
    assert _Seen.spliced > 0


def test_two_edges_on_one_byte_are_refused() -> None:
    rule = SegmentRule([[(0x61, 0x62, 1, 0), (0x62, 0x63, 1, 0)], []], [[], []], [False, True], [-1, -1])
    with pytest.raises(ValueError, match="two edges on one byte"):
        c_tables(SegmentForm("root", {"root": rule}, []))
    ok = SegmentRule([[(0x61, 0x61, 1, 0), (0x62, 0x63, 1, 0)], []], [[], []], [False, True], [-1, -1])
    t = c_tables(SegmentForm("root", {"root": ok}, []))
    assert int(t.trans[0, t.byte_class[0x62]]) == 1 and int(t.trans[0, t.byte_class[0x64]]) == -1


def test_trim_drops_an_unproductive_branch(monkeypatch: pytest.MonkeyPatch) -> None:
    """A rule with a branch through an unproductive rule (``dead``): _trim's C trim copies the rule
    without that branch's states (not the shared path of a rule kept whole), as the loops do."""
    text = (
        'root ::= "a" [a-z]{0,20} "b" | "c" dead | "e" item item\n'
        'item ::= "(" [0-9]{0,12} ")" | "[" item "]"\n'
        'dead ::= "(" dead ")"\n'
    )
    _Seen.cut = 0
    form = _check(cfgmask.Grammar.from_gbnf(text).ir, monkeypatch)
    assert _Seen.cut > 0 and form.segments


@settings(max_examples=60, deadline=None)
@given(units(), bounds(), st.sampled_from(CONTEXTS), units(), bounds(), st.data())
def test_placeholders_memos_across_rounds(
    x: ir.Expr, b: tuple[int, int], context: str, y: ir.Expr, b2: tuple[int, int], data: st.DataObject
) -> None:
    """segment_form's rounds keep _placeholders' memos (``plain``, ``same``) while the refused
    keys grow: each round's rules and units equal a fresh call's."""
    g = _grammar(context, x, b[0], b[1], y, b2[0], b2[1])
    plain: dict[str, bool] = {}
    same: set[int] = set()
    refused: set[tuple[ir.Expr, int, int]] = set()
    for _ in range(4):
        got = segments._placeholders(g.rules, refused, plain, same)
        assert got == segments._placeholders(g.rules, set(refused))
        if not got[1]:
            break
        keys = sorted(got[1])
        refused |= {got[1][k] for k in data.draw(st.lists(st.sampled_from(keys), min_size=1, unique=True))}


def test_placeholders_memos_across_rounds_on_a_schema() -> None:
    """The same on a JSON Schema with several keys (strings of three maxLengths, integers,
    whitespace), refusing them one at a time in three orders."""
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "string", "maxLength": 10},
            "b": {"type": "string", "maxLength": 20},
            "c": {"type": "array", "items": {"type": "string", "maxLength": 30}},
            "d": {"type": "integer"},
        },
    }
    g = cfgmask.Grammar.from_json_schema(json.dumps(schema)).ir
    keys = list(segments._placeholders(g.rules, set())[1].values())
    assert len(keys) >= 4
    for order in (keys, keys[::-1], keys[2:] + keys[:2]):
        plain: dict[str, bool] = {}
        same: set[int] = set()
        refused: set[tuple[ir.Expr, int, int]] = set()
        for key in order:
            got = segments._placeholders(g.rules, refused, plain, same)
            assert got == segments._placeholders(g.rules, set(refused))
            refused.add(key)


class _Collect:
    """components._dag with ``collect`` counting the components a round took from the cache."""

    def __init__(self, real: Any) -> None:
        self.real = real
        self.cached = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)

    def collect(self, plan: Any, args: Any, built: list[Any], *rest: Any) -> Any:
        self.cached += sum(b is None for b in built)
        return self.real.collect(plan, args, built, *rest)


def _fresh_rounds(g: ir.Grammar, monkeypatch: pytest.MonkeyPatch) -> tuple[SegmentForm, SegmentForm, int]:
    """segment_form with its rounds' private cache and with none (every round from scratch);
    and how many components the cached run's rounds took from the cache."""
    from cfgmask.compile import components

    spy = _Collect(components._dag)
    monkeypatch.setattr(components, "_dag", spy)
    shared = segment_form(g, ON)
    monkeypatch.setattr(segments, "_round_cache", lambda: None)
    fresh = segment_form(g, ON)
    monkeypatch.undo()
    return shared, fresh, spy.cached


def _same_form(a: SegmentForm, b: SegmentForm) -> bool:
    return (a.rules, a.segments, a.units, a.refused, a.tokens, a.markers) == (
        b.rules,
        b.segments,
        b.units,
        b.refused,
        b.tokens,
        b.markers,
    )


@settings(max_examples=60, deadline=None)
@given(units(), bounds(), st.sampled_from(CONTEXTS), units(), bounds())
def test_round_cache_on_the_contexts(
    x: ir.Expr, b: tuple[int, int], context: str, y: ir.Expr, b2: tuple[int, int]
) -> None:
    with pytest.MonkeyPatch.context() as mp:
        shared, fresh, _ = _fresh_rounds(_grammar(context, x, b[0], b[1], y, b2[0], b2[1]), mp)
    assert _same_form(shared, fresh)


@pytest.mark.skipif(not _CORPUS.exists(), reason="no JSONSchemaBench corpus")
def test_round_cache_on_json_schemas(monkeypatch: pytest.MonkeyPatch) -> None:
    """The rounds after a refusal take components from the cache, and the form is the same."""
    cached = 0
    for text in _schemas(12):
        try:
            g = cfgmask.Grammar.from_json_schema(text)
        except NotEnforceable:
            continue
        shared, fresh, hits = _fresh_rounds(g.ir, monkeypatch)
        assert _same_form(shared, fresh)
        cached += hits
    assert cached > 0
