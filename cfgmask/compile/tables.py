"""Pass 3: the runtime rules' automata as the C core's tables (``cm_tables``).

All states in one numbering, global byte classes (equal columns of the 256-wide transition
matrix merged), call and token edges as CSR, nullable rules, FOLLOW bytes and the lookahead
tables; :func:`build_tables` runs the whole pipeline.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np

from .. import deadline, ir
from ..errors import GrammarError, LimitError
from ..lookahead import lookahead_classes
from . import _dag
from .cache import CACHE
from .components import build_rules
from .encode import Session
from .flat import Derived, Flat, class_weights
from .follow import follow_bytes, nullable
from .limits import DEFAULT_LIMITS, CompileLimits
from .prepare import prepare, validate


@dataclass
class Tables:
    """Numpy arrays in the layout of ``cm_tables`` (csrc/cfgmask.h)."""

    rule_names: list[str]
    start_rule: int
    byte_class: np.ndarray
    trans: np.ndarray
    state_rule: np.ndarray
    accepting: np.ndarray
    ref_off: np.ndarray
    ref_rule: np.ndarray
    ref_target: np.ndarray
    rule_start: np.ndarray
    rule_nullable: np.ndarray
    rule_follow: np.ndarray
    tok_off: np.ndarray  # token-terminal edges (llama.cpp's <[N]> and !<[N]>), CSR per state
    tok_set: np.ndarray
    tok_target: np.ndarray
    set_off: np.ndarray  # token sets: ids set_ids[set_off[k] .. set_off[k+1]), negated or not
    set_ids: np.ndarray
    set_negated: np.ndarray
    # lookahead markers (ir.Lookahead): rule_la[r] is the debt a marker rule adds (0 for other
    # rules; see lookahead_classes); la_next[c * 256 + b] is what debt c leaves after byte b (255:
    # b is forbidden); la_union[a * n + b] owes both
    rule_la: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.uint8))
    la_next: np.ndarray = field(default_factory=lambda: np.zeros(256, dtype=np.uint8))
    la_union: np.ndarray = field(default_factory=lambda: np.zeros(1, dtype=np.uint8))
    stats: dict[str, int] = field(default_factory=dict)
    # CompileLimits.counters: the runtime rules with their qualifying counts as segments
    # (cfgmask/compile/segments.py, a SegmentForm), for the Python model until the C chart counts;
    # None when off.  Not a field (no annotation): the tables' fields are what C reads and what
    # benchmarks/fingerprint.py hashes, and this is neither.
    segments = cast(Any, None)

    # Tables straight from the compiler (``_tables_raw``) hold ``_raw`` instead of their arrays:
    # the door's bytes, which GrammarHandle reads in place (numpy arrays made from C buffers
    # only to be read back into C cost ~0.1 ms a compile with the caches cold).  The arrays are
    # made on first read, all at once, as the same read-only views of those bytes that
    # ``from_door`` made; assigning a field first makes them, then drops ``_raw``.  _raw:
    # (n_states, n_rules, n_classes, byte_class, trans, state_rule, accepting, ref_off, ref_rule,
    # ref_target, rule_state (rule_start and the state count: uint32 [n_rules + 1]), nullable,
    # follow, tok_off, tok_set, tok_target, (set_off, set_ids, set_negated) or None for no token
    # sets, (rule_la, la_next, la_union) or None for no lookahead markers, what csrc/tables.c found
    # of the rows for the C grammar (state bytes and rule blocks, compile_finish's last item: the
    # core does not walk the rows again; None: it does)), every buffer bytes.

    def __getattr__(self, name: str) -> Any:
        raw = self.__dict__.get("_raw")
        if raw is None or name not in _FROM_RAW:
            raise AttributeError(name)
        self.__dict__.update(_raw_arrays(raw))
        return self.__dict__[name]

    def __setattr__(self, name: str, value: Any) -> None:
        d = self.__dict__
        if "_raw" in d and name in _FROM_RAW:
            d.update(_raw_arrays(d.pop("_raw")))
        d[name] = value

    def __getstate__(self) -> dict[str, Any]:
        """Pickled: ``_raw`` without the arrays made from it (they are views of its bytes)."""
        d = self.__dict__
        return {k: v for k, v in d.items() if k not in _FROM_RAW} if "_raw" in d else d

    @property
    def max_token_id(self) -> int:
        raw = self.__dict__.get("_raw")
        if raw is not None:
            return -1 if raw[16] is None else _max_u32(raw[16][1])
        return int(self.set_ids.max()) if self.set_ids.size else -1

    @property
    def n_states(self) -> int:
        raw = self.__dict__.get("_raw")
        return int(raw[0] if raw is not None else self.state_rule.shape[0])

    @property
    def n_classes(self) -> int:
        raw = self.__dict__.get("_raw")
        return int(raw[2] if raw is not None else self.trans.shape[1])


_FROM_RAW = frozenset(
    f.name for f in dataclasses.fields(Tables) if f.name not in ("rule_names", "start_rule", "stats")
)


def _max_u32(b: bytes) -> int:
    return int(np.frombuffer(b, dtype=np.uint32).max()) if b else -1


def _raw_arrays(raw: tuple[Any, ...]) -> dict[str, np.ndarray]:
    """The arrays of ``Tables._raw``: read-only views of its bytes (the shared empty tables
    where it has None)."""
    ns, nr, k = raw[0], raw[1], raw[2]
    u8, u32 = np.uint8, np.uint32
    out: dict[str, np.ndarray] = {
        "byte_class": np.frombuffer(raw[3], dtype=u8),
        "trans": np.frombuffer(raw[4], dtype=np.int32).reshape(ns, k),
        "state_rule": np.frombuffer(raw[5], dtype=u32),
        "accepting": np.frombuffer(raw[6], dtype=u8),
        "ref_off": np.frombuffer(raw[7], dtype=u32),
        "ref_rule": np.frombuffer(raw[8], dtype=u32),
        "ref_target": np.frombuffer(raw[9], dtype=u32),
        "rule_start": np.frombuffer(raw[10], dtype=u32, count=nr),
        "rule_nullable": np.frombuffer(raw[11], dtype=u8),
        "rule_follow": np.frombuffer(raw[12], dtype=u32),
        "tok_off": np.frombuffer(raw[13], dtype=u32),
        "tok_set": np.frombuffer(raw[14], dtype=u32),
        "tok_target": np.frombuffer(raw[15], dtype=u32),
    }
    if raw[16] is None:
        out["set_off"], out["set_ids"], out["set_negated"] = _no_token_sets()
    else:
        set_off, set_ids, set_negated = raw[16]
        out["set_off"] = np.frombuffer(set_off, dtype=u32)
        out["set_ids"] = np.frombuffer(set_ids, dtype=u32)
        out["set_negated"] = np.frombuffer(set_negated, dtype=u8)
    if raw[17] is None:
        out["rule_la"] = _zeros_u8(nr)
        out["la_next"], out["la_union"] = _no_lookahead()
    else:
        out["rule_la"], out["la_next"], out["la_union"] = (np.frombuffer(b, dtype=u8) for b in raw[17])
    return out


def _rows_as_void(a: np.ndarray) -> np.ndarray:
    """The rows of a 2-D array as opaque scalars (equal rows, equal scalars)."""
    a = np.ascontiguousarray(a)
    return a.view(np.dtype((np.void, a.dtype.itemsize * a.shape[1]))).reshape(a.shape[0])


def _class_weights(n: int) -> np.ndarray:
    """n fixed odd random weights for hashing columns."""
    return class_weights(n)[:n]


def _identity(index: np.ndarray) -> bool:
    """Is ``index`` 0, 1, ..., n-1 (indexing by it copies and changes nothing)?"""
    return bool(np.array_equal(index, np.arange(len(index))))


def byte_classes(f: Flat) -> tuple[np.ndarray, np.ndarray]:
    """Global byte classes (bytes whose columns in the [states, 256] transition matrix
    are equal, numbered in the order of a hash of the column) and the matrix by class.
    Bytes are grouped through each rule's own classes, so the matrix is only ever built
    by class."""
    n = f.n
    weights = _class_weights(n)
    if f.parts:
        # bytes in the same class of every rule have equal columns: group them first
        per_byte = np.stack([cls for _, cls in f.parts], axis=1)
        _, reps, fine = np.unique(_rows_as_void(per_byte), return_index=True, return_inverse=True)
        # np.take, not fancy indexing: a gather along rows, several times faster
        parts = [
            trans if _identity(cls[reps]) else np.take(trans, cls[reps], axis=1) for trans, cls in f.parts
        ]
        cols = parts[0] if len(parts) == 1 else np.concatenate(parts)
        keys = np.zeros(cols.shape[1], dtype=np.int64)
        with np.errstate(over="ignore"):
            for i in range(0, n, 4096):  # in slices: the sum wraps modulo 2**64 either way
                keys += weights[i : i + 4096] @ (cols[i : i + 4096].astype(np.int64) + 2)
        _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
        inverse = inverse.reshape(-1)
        merged = first[inverse]
        moved = np.flatnonzero(merged != np.arange(len(merged))).tolist()
        # no hash collision: each column merged into another is equal to it
        if all(np.array_equal(cols[:, j], cols[:, merged[j]]) for j in moved):
            byte_class = np.asarray(inverse[fine.reshape(-1)], dtype=np.uint8).reshape(256)
            # (a column per class: cols has one per fine class, and classes may be fewer)
            same = len(first) == cols.shape[1] and _identity(first)
            by_class = np.ascontiguousarray(cols) if same else np.take(cols, first, axis=1)
            return byte_class, by_class
    full = f.full()
    with np.errstate(over="ignore"):
        keys = weights @ (full.astype(np.int64) + 2)
    _, first_col, inverse = np.unique(keys, return_index=True, return_inverse=True)
    inverse = inverse.reshape(-1)
    if not np.array_equal(full, full[:, first_col[inverse]]):
        _, first_col, inverse = np.unique(full, axis=1, return_index=True, return_inverse=True)
    byte_class = np.asarray(inverse, dtype=np.uint8).reshape(256)
    trans = np.ascontiguousarray(full[:, first_col])
    return byte_class, trans


def build_tables(
    grammar: ir.Grammar, limits: CompileLimits | None = None, session: Session | None = None
) -> Tables:
    """Compile an IR grammar to the C core's tables.  Raises LimitError past any of
    ``limits`` (``deadline_ms`` included: it bounds the whole build).  ``session``:
    what ``prepare(grammar, limits)`` returned, if the caller has it."""
    limits = limits or DEFAULT_LIMITS
    with deadline.Deadline(limits.deadline_ms, "compile"):
        if session is None:
            session = prepare(grammar, limits, CACHE.session())
        return _build_tables_in(grammar, limits, session)


def _build_tables_in(grammar: ir.Grammar, limits: CompileLimits, sess: Session | None = None) -> Tables:
    if sess is None:
        sess = prepare(grammar, limits)
    validate(grammar, sess)
    try:
        f = build_rules(grammar, limits, sess)
    except LimitError as e:
        if e.limit != "max_dfa_states" or limits.unroll_budget == 0:
            raise
        # Unrolled bounded repetitions can make subset construction explode
        # ((a x{0,20})* tracks every counter combination); helper rules never do.
        f = build_rules(grammar, dataclasses.replace(limits, unroll_budget=0), sess)
    tables = tables_from_flat(grammar, f, sess, limits)
    if limits.counters:  # beside the C tables, which stay unrolled (segments.py)
        from .segments import segment_form

        try:
            tables.segments = segment_form(grammar, limits)
        except LimitError as e:
            if e.limit != "max_dfa_states" or limits.unroll_budget == 0:
                raise
            tables.segments = segment_form(grammar, dataclasses.replace(limits, unroll_budget=0))
    return tables


def tables_from_flat(grammar: ir.Grammar, f: Flat, sess: Session, limits: CompileLimits) -> Tables:
    """The tables of the runtime rules ``f``: byte classes, edges as CSR, nullable rules,
    FOLLOW bytes, token sets and lookahead tables."""
    total = f.n
    if total > limits.max_total_states:
        raise LimitError(
            f"grammar automata have {total} states, over max_total_states={limits.max_total_states}",
            limit="max_total_states",
            value=limits.max_total_states,
        )
    door = f.__dict__.get("_got")
    if door is not None and len(door[0]) > 9 and door[0][9][0]:
        return _tables_raw(grammar, door[0], door[1], sess)
    return _tables(grammar, f, f.derived if f.derived is not None else _derived_in_python(f), sess)


def _tables_raw(grammar: ir.Grammar, got: Sequence[Any], names: list[str], sess: Session) -> Tables:
    """The Tables of what ``compile_finish`` returned (``got``, with csrc/tables.c's derived
    tables and byte classes), holding the door's bytes as ``Tables._raw`` (see there): no numpy
    array made, and the token-set and lookahead tables only for a grammar that has them."""
    rule_names, rule_state, acc = got[0], got[1], got[5]
    k, byte_class, trans, null, follow, ref_off, ref_rule, ref_target, tok_off, tok_set, tok_target, sets = (
        got[9][:12]
    )
    given = got[9][12]
    order = [names[i] for i in rule_names]
    n, ns = len(order), len(acc)
    set_tables = None
    if sets:
        set_tables = tuple(a.tobytes() for a in _token_set_tables([sess.token_sets[names[i]] for i in sets]))
    la = None
    if sess.markers:
        rule_la, la_next, la_union = lookahead_tables(order, sess.markers)
        if la_next is not _no_lookahead()[0]:
            la = (rule_la.tobytes(), la_next.tobytes(), la_union.tobytes())
    t = Tables.__new__(Tables)
    t.__dict__.update(
        rule_names=order,
        start_rule=0,
        stats=_stats(grammar, n, ns, k, len(ref_rule) // 4),
        _raw=(
            ns,
            n,
            k,
            byte_class,
            trans,
            _dag.state_rules(rule_state),
            acc,
            ref_off,
            ref_rule,
            ref_target,
            rule_state,
            null,
            follow,
            tok_off,
            tok_set,
            tok_target,
            set_tables,
            la,
            given,
        ),
    )
    return t


def _derived_in_python(f: Flat) -> Derived:
    """What csrc/tables.c derives, by the Python passes (the tests' reference, and grammars
    built without the C door)."""
    null = nullable(f)
    follow = follow_bytes(f, null)
    byte_class, trans = byte_classes(f)
    callers = sorted(f.refs)
    ref_off = np.zeros(f.n + 1, dtype=np.uint32)
    ref_off[np.asarray(callers, dtype=np.int64) + 1] = [len(f.refs[s]) for s in callers]
    np.cumsum(ref_off, out=ref_off)
    ref_edges = [e for s in callers for e in f.refs[s]]
    tok_states = sorted(f.tokens)
    tok_off = np.zeros(f.n + 1, dtype=np.uint32)
    tok_off[np.asarray(tok_states, dtype=np.int64) + 1] = [len(f.tokens[s]) for s in tok_states]
    np.cumsum(tok_off, out=tok_off)
    tok_edges = [e for s in tok_states for e in f.tokens[s]]
    follow_arr = np.zeros((len(follow), 8), dtype=np.uint32)
    for r, bits in enumerate(follow):
        for w in range(8):
            follow_arr[r, w] = (bits >> (32 * w)) & 0xFFFFFFFF
    return Derived(
        byte_class=byte_class,
        trans=trans,
        nullable=np.asarray(null, dtype=np.uint8),
        follow=follow_arr.reshape(-1),
        ref_off=ref_off,
        ref_rule=np.asarray([c for c, _ in ref_edges], dtype=np.uint32),
        ref_target=np.asarray([t for _, t in ref_edges], dtype=np.uint32),
        tok_off=tok_off,
        tok_set=np.asarray([k for k, _ in tok_edges], dtype=np.uint32),
        tok_target=np.asarray([t for _, t in tok_edges], dtype=np.uint32),
        token_sets=list(f.token_sets),
    )


def _tables(grammar: ir.Grammar, f: Flat, d: Derived, sess: Session) -> Tables:
    """The Tables of ``f`` from its derived parts (byte classes in Python where csrc/tables.c
    could not make them: a hash collision, or more states than weights).  Few numpy calls
    (``from_door`` says why): a grammar without token terminals shares its empty set tables."""
    if d.byte_class is None or d.trans is None:
        byte_class, trans = byte_classes(f)
    else:
        byte_class, trans = d.byte_class, d.trans
    set_off, set_ids, set_negated = _token_set_tables([sess.token_sets[label] for label in d.token_sets])
    rule_la, la_next, la_union = lookahead_tables(f.names, sess.markers)
    return Tables(
        rule_names=f.names,
        start_rule=0,
        byte_class=byte_class,
        trans=trans,
        state_rule=_contiguous(f.rule_of, np.uint32),
        accepting=_contiguous(f.accepting, np.uint8),
        ref_off=d.ref_off,
        ref_rule=d.ref_rule,
        ref_target=d.ref_target,
        rule_start=np.array(f.start_of, dtype=np.uint32) if d.rule_start is None else d.rule_start,
        rule_nullable=d.nullable,
        rule_follow=d.follow,
        tok_off=d.tok_off,
        tok_set=d.tok_set,
        tok_target=d.tok_target,
        set_off=set_off,
        set_ids=set_ids,
        set_negated=set_negated,
        rule_la=rule_la,
        la_next=la_next,
        la_union=la_union,
        stats=_stats(grammar, len(f.names), f.n, trans.shape[1], len(d.ref_rule)),
    )


def _stats(grammar: ir.Grammar, rules: int, states: int, classes: int, call_edges: int) -> dict[str, int]:
    """``Tables.stats``: the automaton sizes, whichever way the tables were made."""
    return {
        "source_rules": len(grammar.rules),
        "parser_rules": rules,
        "states": states,
        "byte_classes": int(classes),
        "call_edges": call_edges,
    }


def _contiguous(a: np.ndarray, dtype: type) -> np.ndarray:
    """``a`` as a C-contiguous array of ``dtype``: itself when it is one (no numpy call)."""
    return a if a.dtype == dtype and a.flags.c_contiguous else np.ascontiguousarray(a, dtype=dtype)


def _token_set_tables(sets: list[tuple[bool, list[int]]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """set_off, set_ids, set_negated (see Tables) of the token sets ``sets``."""
    if not sets:
        return _no_token_sets()
    set_off = np.zeros(len(sets) + 1, dtype=np.uint32)
    set_off[1:] = np.cumsum([len(ids) for _, ids in sets])
    set_ids = np.asarray([i for _, ids in sets for i in ids], dtype=np.uint32)
    return set_off, set_ids, np.asarray([neg for neg, _ in sets], dtype=np.uint8)


@functools.cache
def _no_token_sets() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The token-set tables of a grammar without token terminals (read-only, shared)."""
    out = np.zeros(1, dtype=np.uint32), np.zeros(0, dtype=np.uint32), np.zeros(0, dtype=np.uint8)
    for a in out:
        a.setflags(write=False)
    return out


def lookahead_tables(
    order: list[str], markers: dict[str, tuple[tuple[int, int], ...]]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """rule_la, la_next, la_union (see Tables) for the marker rules among ``order``."""
    marks = [markers.get(n) for n in order] if markers else []
    found = sorted({m for m in marks if m is not None})
    if not found:  # no marker among the runtime rules: the tables of no debt, made once
        return (_zeros_u8(len(order)), *_no_lookahead())
    try:
        classes, nxt, union = lookahead_classes(tuple(found))
    except ValueError as e:
        raise GrammarError(f"lookahead markers: {e}; not supported") from None
    rule_la = np.asarray([0 if m is None else found.index(m) + 1 for m in marks], dtype=np.uint8)
    return (
        rule_la,
        np.asarray(nxt, dtype=np.uint8).reshape(-1),
        np.asarray(union, dtype=np.uint8).reshape(-1),
    )


_ZEROS_U8 = np.zeros(1024, dtype=np.uint8)
_ZEROS_U8.setflags(write=False)


def _zeros_u8(n: int) -> np.ndarray:
    """n zero bytes, read-only: a view of one array made once a process, longer when needed
    (``np.zeros`` costs ~10 us a compile with the caches cold)."""
    global _ZEROS_U8
    if n > len(_ZEROS_U8):
        _ZEROS_U8 = np.zeros(max(n, 2 * len(_ZEROS_U8)), dtype=np.uint8)
        _ZEROS_U8.setflags(write=False)
    return _ZEROS_U8[:n]


@functools.cache
def _no_lookahead() -> tuple[np.ndarray, np.ndarray]:
    """la_next and la_union without markers (read-only: every grammar without one shares them)."""
    _, nxt, union = lookahead_classes(())
    out = np.asarray(nxt, dtype=np.uint8).reshape(-1), np.asarray(union, dtype=np.uint8).reshape(-1)
    for a in out:
        a.setflags(write=False)
    return out
