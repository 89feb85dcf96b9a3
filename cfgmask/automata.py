"""IR -> automaton tables for the C core.

Pipeline (docs/design.md has the why):

1. ``rewrite_repeats``: repetitions whose unrolled size would be large become
   a logarithmic family of helper rules (P_j = x^(2^j)), so ``{1,100000}`` costs
   O(log n) rules and never unrolls.
2. Strongly connected components of the rule graph.  Non-recursive rules and
   right-linear (tail-recursive) components are *regular*: they are inlined into
   their callers as byte automata.  Only genuinely recursive rules, the start
   rule, big repetition helpers and oversized automata stay rules the Earley
   parser calls.  This is what makes the cost depend on the language, not on
   how the grammar was written.
3. Each rule becomes a minimal DFA over bytes and calls; dead states and
   unproductive rules are trimmed so every Earley item can still complete.
4. Tables: global byte classes, the transition matrix, call edges, nullable
   rules and, per rule, the bytes that may follow it (FOLLOW; used to keep most
   tokens context-independent in the mask cache).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import itertools
import threading
import time
from array import array
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import deadline, ir
from .errors import GrammarError, LimitError
from .fsm import DFA, NFA, build_dfa, can_accept, trim
from .utf8 import byte_sequences


@dataclass(frozen=True)
class CompileLimits:
    max_dfa_states: int = 20_000  # one rule's automaton
    max_total_states: int = 2_000_000  # all rules together
    max_repeat_product: int = 10**9  # product of nested repetition bounds
    max_rules: int = 1_000_000
    inline_max_states: int = 2_000  # largest automaton copied into its only caller
    inline_shared_states: int = 64  # largest automaton copied into several callers
    unroll_budget: int = 1_024  # repetitions below this size are unrolled
    # Guards against hostile input (tests/test_hostile.py); no grammar of the corpora comes near.
    deadline_ms: int = 30_000  # wall clock for one compile (front end and automata); 0 = none
    max_compile_mb: int = 1024  # memory of one automaton build (NFA, subset sets, DFAs); 0 = none
    max_grammar_bytes: int = 16_000_000  # grammar / schema / regex source text (UTF-8 bytes)
    max_ir_nodes: int = 1_000_000  # IR expression nodes, all rules (a shared subtree counts per use)
    max_ir_depth: int = 200  # nesting of IR expressions inside one rule (passes recurse on it)


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
    # lookahead markers (ir.lookahead_rule): rule_la[r] is the debt a marker rule adds (0 for other
    # rules; see lookahead_classes); la_next[c * 256 + b] is what debt c leaves after byte b (255:
    # b is forbidden); la_union[a * n + b] owes both
    rule_la: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.uint8))
    la_next: np.ndarray = field(default_factory=lambda: np.zeros(256, dtype=np.uint8))
    la_union: np.ndarray = field(default_factory=lambda: np.zeros(1, dtype=np.uint8))
    stats: dict[str, int] = field(default_factory=dict)

    @property
    def max_token_id(self) -> int:
        return int(self.set_ids.max()) if self.set_ids.size else -1

    @property
    def n_states(self) -> int:
        return int(self.state_rule.shape[0])

    @property
    def n_classes(self) -> int:
        return int(self.trans.shape[1])


# ---- 0. the IR as a hash-consed DAG -------------------------------------------
#
# Front ends share subtrees (one JSON string body for every string property), and
# passes that walk the IR as a tree pay for every use.  Each distinct subtree gets an
# id (exact: a node's key is its kind, its data and its children's ids) and the facts
# the passes need are computed once per id; the automata are built in C from the
# DAG serialized once per compile (csrc/cfgmask.h, CM_IR_*).

_LIT, _BYTES, _UTF8, _SEQ, _ALT, _REPEAT, _REF, _BADTOKEN = 1, 2, 3, 4, 5, 6, 7, 8
_TOKEN = 9  # interned kind only: emitted as _REF (its label) or _BADTOKEN
_BADOP = 10  # a bound the C builder cannot take: that component is built in Python
_INF = 0xFFFFFFFF
_NO_USES: dict[str, int] = {}
_NO_REFS: frozenset[str] = frozenset()


class _Interner:
    """Ids of IR subtrees and per-id facts: tree size (a shared subtree counted per
    use), height, longest literal, rules referenced, references per rule (capped at 2)."""

    MAX_NODES = 1 << 18  # then a new generation (the ids are kept alive, and the GC walks them)

    def __init__(self, gen: int) -> None:
        self.gen = gen
        self.ids: dict[tuple, int] = {}  # type: ignore[type-arg]
        self.keys: list[tuple] = []  # type: ignore[type-arg]
        self.count: list[int] = []
        self.height: list[int] = []
        self.maxlit: list[int] = []
        self.refs: list[frozenset[str]] = []
        self.uses: list[dict[str, int]] = []
        self.maxprod: list[int] = []  # largest product of repetition bounds on a path down
        self.plain: list[bool] = []  # no repetition at all
        self.size0: dict[int, int] = {}  # _size of reference-free subtrees
        self.lock = threading.Lock()

    def add(self, key: tuple) -> int:  # type: ignore[type-arg]
        kind = key[0]
        count, height, maxlit, refs, uses, maxprod, plain = 1, 1, 0, _NO_REFS, _NO_USES, 1, True
        if kind == _SEQ or kind == _ALT:
            kids = key[1]
            if kids:
                count = 1 + sum(map(self.count.__getitem__, kids))
                height = 1 + max(map(self.height.__getitem__, kids))
                maxlit = max(map(self.maxlit.__getitem__, kids))
                maxprod = max(map(self.maxprod.__getitem__, kids))
                plain = all(map(self.plain.__getitem__, kids))
                rs = [r for r in map(self.refs.__getitem__, kids) if r]
                if rs:
                    refs = rs[0] if len(rs) == 1 else frozenset().union(*rs)
                    us = [u for u in map(self.uses.__getitem__, kids) if u]
                    if len(us) == 1:
                        uses = us[0]
                    else:
                        uses = {}
                        for u in us:
                            for n, v in u.items():
                                uses[n] = min(2, uses.get(n, 0) + v)
        elif kind == _REPEAT:
            k = key[1]
            count, height, maxlit = 1 + self.count[k], 1 + self.height[k], self.maxlit[k]
            refs, uses = self.refs[k], self.uses[k]
            maxprod = max(key[2], key[3] or 0, 1) * self.maxprod[k]
            plain = False
        elif kind == _LIT:
            maxlit = len(key[1])
        elif kind == _REF:
            refs, uses = frozenset((key[1],)), {key[1]: 1}
        with self.lock:
            got = self.ids.get(key)
            if got is not None:
                return got
            i = len(self.keys)
            self.count.append(count)
            self.height.append(height)
            self.maxlit.append(maxlit)
            self.refs.append(refs)
            self.uses.append(uses)
            self.maxprod.append(maxprod)
            self.plain.append(plain)
            self.keys.append(key)
            self.ids[key] = i
            return i


_INTERNER = _Interner(0)
_INTERNER_LOCK = threading.Lock()


def _reset_interner() -> None:
    global _INTERNER
    with _INTERNER_LOCK:
        _INTERNER = _Interner(_INTERNER.gen + 1)


def _current_interner() -> _Interner:
    if len(_INTERNER.keys) > _Interner.MAX_NODES:
        _reset_interner()
    return _INTERNER


class _TooBig(Exception):
    pass


class _Deep(Exception):
    pass


@functools.lru_cache(maxsize=4096)
def _utf8_code(ranges: tuple[tuple[int, int], ...]) -> tuple[int, ...]:
    """The code of a character class: its ranges, then its UTF-8 byte sequences."""
    out = [_UTF8, len(ranges)]
    for lo, hi in ranges:
        out += (lo, hi)
    seqs = byte_sequences(ranges)
    out.append(len(seqs))
    for seq in seqs:
        out.append(len(seq))
        for lo, hi in seq:
            out += (lo, hi)
    return tuple(out)


class _Session:
    """One compile's view of the DAG: node ids by object, and the encoded IR the C
    builder reads (nodes emitted on first use, names numbered on first use)."""

    def __init__(self, interner: _Interner | None = None) -> None:
        self.interner = interner or _current_interner()
        self.gen = self.interner.gen
        # node ids by object id; ``keep`` holds the objects, so no id is reused meanwhile
        self.memo: dict[int, int] = {}
        self.keep: list[ir.Expr] = []
        self._next_check = 1024
        self.code = array("I")
        self.offsets: dict[int, int] = {}
        self.names: list[str] = []
        self.name_idx: dict[str, int] = {}
        self._rank: array[int] | None = None
        self._sorted: list[str] = []
        self.roots: dict[str, int] = {}  # rule -> id, the grammar given to prepare()
        self.tokens: set[tuple[tuple[int, ...], bool]] = set()  # token terminals seen

    # -- ids

    def cid(self, root: ir.Expr, max_nodes: int | None = None) -> int:
        """The id of ``root`` (interned with its subtree if new).  Raises _TooBig past
        ``max_nodes`` nodes visited in this session."""
        memo = self.memo
        got = memo.get(id(root))
        if got is not None:
            return got
        self.max_nodes = max_nodes
        try:
            return self._cid_rec(root, 0)
        except _Deep:  # the rest without recursion (what is done is memoized)
            return self._cid_iter(root, max_nodes)

    max_nodes: int | None = None

    def _cid_rec(self, e: ir.Expr, depth: int) -> int:
        memo = self.memo
        t = type(e)
        key: tuple  # type: ignore[type-arg]
        if t is ir.Seq or t is ir.Alt:
            if depth > 200:
                raise _Deep
            kids = []
            ids = self.interner.ids
            keep = self.keep
            for x in e.items:  # type: ignore[attr-defined]
                g = memo.get(id(x))
                if g is None:
                    tx = type(x)  # leaves here, without a call
                    if tx is ir.Literal:
                        leaf: tuple = (_LIT, x.data)  # type: ignore[type-arg, attr-defined]
                    elif tx is ir.CharClass:
                        leaf = (_UTF8, x.ranges)  # type: ignore[attr-defined]
                    elif tx is ir.Ref:
                        leaf = (_REF, x.name)  # type: ignore[attr-defined]
                    elif tx is ir.ByteClass:
                        leaf = (_BYTES, x.ranges)  # type: ignore[attr-defined]
                    else:
                        kids.append(self._cid_rec(x, depth + 1))
                        continue
                    g = ids.get(leaf)
                    if g is None:
                        g = self.interner.add(leaf)
                    memo[id(x)] = g
                    keep.append(x)
                kids.append(g)
            key = (_SEQ if t is ir.Seq else _ALT, tuple(kids))
        elif t is ir.Literal:
            key = (_LIT, e.data)  # type: ignore[attr-defined]
        elif t is ir.CharClass:
            key = (_UTF8, e.ranges)  # type: ignore[attr-defined]
        elif t is ir.Ref:
            key = (_REF, e.name)  # type: ignore[attr-defined]
        elif t is ir.ByteClass:
            key = (_BYTES, e.ranges)  # type: ignore[attr-defined]
        elif t is ir.Repeat:
            if depth > 200:
                raise _Deep
            x = e.item  # type: ignore[attr-defined]
            g = memo.get(id(x))
            k = self._cid_rec(x, depth + 1) if g is None else g
            key = (_REPEAT, k, e.lo, e.hi)  # type: ignore[attr-defined]
        else:
            return self._cid_iter(e, self.max_nodes)
        i = self.interner.ids.get(key)
        if i is None:
            i = self.interner.add(key)
        memo[id(e)] = i
        self.keep.append(e)
        if len(self.keep) >= self._next_check:
            self._next_check = len(self.keep) + 1024
            if self.max_nodes is not None and len(self.keep) > self.max_nodes:
                raise _TooBig
            deadline.check("IR walk")
        return i

    def _cid_iter(self, root: ir.Expr, max_nodes: int | None) -> int:
        memo = self.memo
        got = memo.get(id(root))
        if got is not None:
            return got
        interner = self.interner
        ids = interner.ids
        stack = [root]
        while stack:
            e = stack[-1]
            got = memo.get(id(e))
            if got is not None:
                stack.pop()
                continue
            t = type(e)
            key: tuple  # type: ignore[type-arg]
            if t is ir.Seq or t is ir.Alt or (t is not ir.Repeat and isinstance(e, (ir.Seq, ir.Alt))):
                kids = []
                missing = False
                for x in e.items:  # type: ignore[attr-defined]
                    g = memo.get(id(x))
                    if g is None:
                        stack.append(x)
                        missing = True
                    else:
                        kids.append(g)
                if missing:
                    continue
                key = (_SEQ if isinstance(e, ir.Seq) else _ALT, tuple(kids))
            elif isinstance(e, ir.Repeat):
                g = memo.get(id(e.item))
                if g is None:
                    stack.append(e.item)
                    continue
                key = (_REPEAT, g, e.lo, e.hi)
            elif isinstance(e, ir.Literal):
                key = (_LIT, e.data)
            elif isinstance(e, ir.Ref):
                key = (_REF, e.name)
            elif isinstance(e, ir.CharClass):
                key = (_UTF8, e.ranges)
            elif isinstance(e, ir.ByteClass):
                key = (_BYTES, e.ranges)
            elif isinstance(e, ir.Token):
                key = (_TOKEN, e.ids, e.negated)
                self.tokens.add((e.ids, e.negated))
            else:
                raise TypeError(f"not an IR expression: {e!r}")
            stack.pop()
            i = ids.get(key)
            if i is None:
                i = interner.add(key)
            memo[id(e)] = i
            self.keep.append(e)
            if max_nodes is not None and len(self.keep) > max_nodes:
                raise _TooBig
            if not len(self.keep) & 1023:
                deadline.check("IR walk")
        return memo[id(root)]

    def refs(self, cid: int) -> frozenset[str]:
        return self.interner.refs[cid]

    # -- sizes (automata._size over the DAG)

    def size(self, cid: int, rule_size: dict[str, int], memo: dict[int, int]) -> int:
        it = self.interner
        if not it.refs[cid]:
            got = it.size0.get(cid)
            if got is None:
                got = it.size0[cid] = self._size(cid, rule_size, {})
            return got
        got = memo.get(cid)
        if got is None:
            got = memo[cid] = self._size(cid, rule_size, memo)
        return got

    def _size(self, cid: int, rule_size: dict[str, int], memo: dict[int, int]) -> int:
        key = self.interner.keys[cid]
        kind = key[0]
        if kind == _LIT:
            return max(1, len(key[1]))
        if kind == _UTF8:
            return min(12, 2 * max(1, len(key[1])))
        if kind == _REF:
            return rule_size.get(key[1], 4)
        if kind == _BYTES or kind == _TOKEN:
            return 1
        if kind == _SEQ or kind == _ALT:
            total = 1
            for k in key[1]:
                got = memo.get(k)
                total += self.size(k, rule_size, memo) if got is None else got
            return total
        _, item, lo, hi = key
        n = hi if hi is not None else max(lo, 1)
        return 1 + self.size(item, rule_size, memo) * max(n, 1)

    # -- the encoded IR

    def name(self, n: str) -> int:
        i = self.name_idx.get(n)
        if i is None:
            i = self.name_idx[n] = len(self.names)
            self.names.append(n)
            self._rank = None
        return i

    def rank(self) -> tuple[array[int], list[str]]:
        """Label value of each name (its position in name order) and the names in order."""
        if self._rank is None:
            order = sorted(range(len(self.names)), key=self.names.__getitem__)
            rank = array("I", bytes(4 * len(order)))
            for r, i in enumerate(order):
                rank[i] = r
            self._rank = rank
            self._sorted = [self.names[i] for i in order]
        return self._rank, self._sorted

    def emit(self, root: int) -> int:
        """Offset of node ``root`` in ``code`` (emitted with its subtree if new)."""
        got = self.offsets.get(root)
        if got is not None:
            return got
        try:
            return self._emit_rec(root, 0)
        except _Deep:  # the rest without recursion (what is done is kept)
            return self._emit_iter(root)

    def _emit_rec(self, cid: int, depth: int) -> int:
        key = self.interner.keys[cid]
        kind = key[0]
        offsets = self.offsets
        body: Any
        if kind == _SEQ or kind == _ALT:
            if depth > 200:
                raise _Deep
            offs = []
            for k in key[1]:
                o = offsets.get(k)
                offs.append(self._emit_rec(k, depth + 1) if o is None else o)
            body = (kind, len(offs), *offs)
        elif kind == _REPEAT:
            if depth > 200:
                raise _Deep
            o = offsets.get(key[1])
            body = self._repeat_code(key, self._emit_rec(key[1], depth + 1) if o is None else o)
        else:
            body = self._leaf_code(key)
        off = offsets[cid] = len(self.code)
        self.code.extend(body)
        return off

    def _emit_iter(self, root: int) -> int:
        offsets = self.offsets
        keys = self.interner.keys
        code = self.code
        stack = [root]
        while stack:
            cid = stack[-1]
            if cid in offsets:
                stack.pop()
                continue
            key = keys[cid]
            kind = key[0]
            if kind == _SEQ or kind == _ALT:
                missing = [k for k in key[1] if k not in offsets]
                if missing:
                    stack.extend(missing)
                    continue
                body: Any = (kind, len(key[1]), *[offsets[k] for k in key[1]])
            elif kind == _REPEAT:
                if key[1] not in offsets:
                    stack.append(key[1])
                    continue
                body = self._repeat_code(key, offsets[key[1]])
            else:
                body = self._leaf_code(key)
            stack.pop()
            offsets[cid] = len(code)
            code.extend(body)
        return offsets[root]

    @staticmethod
    def _repeat_code(key: tuple, item: int) -> tuple[int, ...]:  # type: ignore[type-arg]
        _, _, lo, hi = key
        if 0 <= lo < _INF and (hi is None or lo <= hi < _INF):
            return (_REPEAT, lo, _INF if hi is None else hi, item)
        return (_BADOP, 0)

    def _leaf_code(self, key: tuple) -> Any:  # type: ignore[type-arg]
        kind = key[0]
        if kind == _LIT:
            return (_LIT, len(key[1]), *key[1])
        if kind == _BYTES:
            body = [_BYTES, len(key[1])]
            for lo, hi in key[1]:
                body += (lo, hi) if 0 <= lo <= hi <= 255 else (1, 0)  # (1, 0): rejected by C
            return body
        if kind == _UTF8:
            return _utf8_code(key[1])
        if kind == _REF:
            return (_REF, self.name(key[1]))
        if key[1]:  # _TOKEN
            return (_REF, self.name(token_label(ir.Token(key[1], key[2]))))
        return (_BADTOKEN, 0)

    def build(
        self,
        rules: dict[str, ir.Expr],
        comp: list[str],
        right_linear: bool,
        usable: list[str],
        fragments: dict[str, DFA],
        limits: CompileLimits,
    ) -> dict[str, DFA]:
        """``_component``'s automata, built in C."""
        from ._core import fsm_build_ir

        roots = array("I", [self.emit(self.cid(rules[m])) for m in comp])
        over = []
        if right_linear:
            over += [(self.name(m), 1, i) for i, m in enumerate(comp)]  # CM_IR_REF_ENTRY
        frag_names = []
        for j, c in enumerate(usable):
            over.append((self.name(c), 2, j))  # CM_IR_REF_EMBED
            frag_names.append([self.name(n) for n in fragments[c].names or ()])
        rank, ordered = self.rank()
        over.sort()
        refs = array("I", [x for t in over for x in t])
        frags = []
        for c, idx in zip(usable, frag_names, strict=True):
            h = fragments[c].handle
            assert h is not None
            frags.append((h, array("I", [rank[i] for i in idx])))
        deadline.check("automaton build")
        left = deadline.remaining()  # first: C's deadline is then never before check()'s
        try:
            built = fsm_build_ir(
                self.code,
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
        return {
            m: DFA(handle=h, names=[ordered[r] for r in used])
            for m, (h, used) in zip(comp, built, strict=True)
        }


# ---- 1. repetitions -----------------------------------------------------------


def _size(expr: ir.Expr, rule_size: dict[str, int] | None = None) -> int:
    """A rough NFA size estimate used only to choose unrolling vs helper rules;
    a reference counts as the estimated size of the rule (it may be inlined)."""
    if isinstance(expr, ir.Literal):
        return max(1, len(expr.data))
    if isinstance(expr, ir.CharClass):
        return min(12, 2 * max(1, len(expr.ranges)))  # a class's UTF-8 DFA is shallow
    if isinstance(expr, ir.Ref):
        return (rule_size or {}).get(expr.name, 4)
    if isinstance(expr, (ir.ByteClass, ir.Token)):
        return 1
    if isinstance(expr, (ir.Seq, ir.Alt)):
        return 1 + sum(_size(e, rule_size) for e in expr.items)
    if isinstance(expr, ir.Repeat):
        n = expr.hi if expr.hi is not None else max(expr.lo, 1)
        return 1 + _size(expr.item, rule_size) * max(n, 1)
    raise TypeError(f"not an IR expression: {expr!r}")


def _rule_sizes(
    rules: dict[str, ir.Expr], sess: _Session | None = None, memo: dict[int, int] | None = None
) -> dict[str, int]:
    """Estimated sizes of every rule, references expanded (recursion counts 4), capped.
    ``memo`` receives the sizes of subtrees (by id) that hold for the final rule sizes."""
    cap = 1 << 30
    sizes: dict[str, int] = {}
    if sess is None:
        graph = {n: ir.Grammar(rules, n).references(b) for n, b in rules.items()}
    else:
        cids = {n: sess.cid(b) for n, b in rules.items()}
        graph = {n: set(sess.refs(c)) for n, c in cids.items()}
    final: dict[int, int] = {} if memo is None else memo
    for comp in _sccs_all(graph):
        for n in comp:
            sizes.setdefault(n, 4)
        # a rule outside any cycle refers only to rules sized already: its subtrees' sizes are final
        settled = len(comp) == 1 and comp[0] not in graph[comp[0]]
        for n in comp:
            if sess is None:
                size = _size(rules[n], sizes)
            else:
                size = sess.size(cids[n], sizes, final if settled else {})
            sizes[n] = min(cap, size)
    return sizes


class _RepeatRewriter:
    def __init__(
        self, rules: dict[str, ir.Expr], limits: CompileLimits, sess: _Session | None = None
    ) -> None:
        self.rules = dict(rules)
        self.limits = limits
        self.outlined: set[str] = set()
        self.count = 0
        self.sess = sess
        self._sizes: dict[int, int] = {}
        self.rule_size = _rule_sizes(self.rules, sess, self._sizes)
        self._clean: dict[int, bool] = {}

    def run(self) -> dict[str, ir.Expr]:
        for name in list(self.rules):
            self.rules[name] = self.expr(self.rules[name], name, 1)
        return self.rules

    def clean(self, cid: int) -> bool:
        """Does the subtree need no rewriting (and have valid bounds)?"""
        assert self.sess is not None
        it = self.sess.interner
        if it.plain[cid]:
            return True
        got = self._clean.get(cid)
        if got is not None:
            return got
        key = it.keys[cid]
        if key[0] == _SEQ or key[0] == _ALT:
            got = all(self.clean(k) for k in key[1])
        elif key[0] == _REPEAT:
            _, item, lo, hi = key
            bound = max(lo, hi or 0, 1)
            got = (
                lo >= 0
                and (hi is None or hi >= lo)
                and self.clean(item)
                and (
                    bound <= 1
                    or self.sess.size(item, self.rule_size, self._sizes) * bound <= self.limits.unroll_budget
                )
            )
        else:
            got = True
        self._clean[cid] = got
        return got

    def expr(self, e: ir.Expr, rule: str, product: int) -> ir.Expr:
        if self.sess is not None:
            cid = self.sess.cid(e)
            if (
                self.clean(cid)
                and product * self.sess.interner.maxprod[cid] <= self.limits.max_repeat_product
            ):
                return e  # nothing to rewrite below: keep the node (and its sharing)
        deadline.check("repetitions")
        if isinstance(e, ir.Seq):
            return ir.Seq(tuple(self.expr(x, rule, product) for x in e.items))
        if isinstance(e, ir.Alt):
            return ir.Alt(tuple(self.expr(x, rule, product) for x in e.items))
        if not isinstance(e, ir.Repeat):
            return e
        if e.lo < 0 or (e.hi is not None and e.hi < e.lo):
            raise GrammarError(f"bad repetition bounds {{{e.lo},{e.hi}}} in rule {rule!r}")
        bound = max(e.lo, e.hi or 0, 1)
        product *= bound
        if product > self.limits.max_repeat_product:
            raise LimitError(
                f"nested repetition bounds in rule {rule!r} multiply to more than "
                f"max_repeat_product={self.limits.max_repeat_product}",
                limit="max_repeat_product",
                value=self.limits.max_repeat_product,
            )
        item = self.expr(e.item, rule, product)
        if bound <= 1 or _size(item, self.rule_size) * bound <= self.limits.unroll_budget:
            return ir.Repeat(item, e.lo, e.hi)
        return self.helpers(item, e.lo, e.hi, rule)

    def helpers(self, item: ir.Expr, lo: int, hi: int | None, rule: str) -> ir.Expr:
        """``item{lo,hi}`` as unrolled blocks of B items counted by helper rules.

        With B = unroll_budget / size(item), a block is a plain automaton, so tokens
        inside a long bounded string stay context-independent; only tokens that
        cross a block boundary (every B items) depend on the count."""
        block = max(1, self.limits.unroll_budget // max(1, _size(item, self.rule_size)))
        unit = item if block == 1 else ir.Repeat(item, block, block)
        self.count += 1
        base = f"{rule}#rep{self.count}"
        top = max(lo, (hi - lo) if hi is not None else 0) // block
        names = [f"{base}.p{j}" for j in range(max(1, top.bit_length()))]
        self.rules[names[0]] = unit
        for j in range(1, len(names)):
            self.rules[names[j]] = ir.Seq((ir.Ref(names[j - 1]), ir.Ref(names[j - 1])))
            self.outlined.add(names[j])
        if len(self.rules) > self.limits.max_rules:
            raise LimitError(f"grammar exceeds max_rules={self.limits.max_rules}", limit="max_rules")

        def units_exact(n: int) -> ir.Expr:
            """unit^n"""
            return (
                ir.seq(*[ir.Ref(names[j]) for j in reversed(range(n.bit_length())) if n >> j & 1])
                if n
                else ir.EPSILON
            )

        def units_upto(m: int) -> ir.Expr:
            """unit{0,m}: Q_k | P_k unit{0,m-2^k}, unambiguous by count."""
            if m == 0:
                return ir.EPSILON
            k = m.bit_length() - 1
            low = (
                ir.seq(*[ir.Alt((ir.Ref(names[j]), ir.EPSILON)) for j in reversed(range(k))])
                if k
                else ir.EPSILON
            )
            return ir.alt(low, ir.seq(ir.Ref(names[k]), units_upto(m - (1 << k))))

        def exact(n: int) -> ir.Expr:
            return ir.seq(units_exact(n // block), ir.Repeat(item, n % block, n % block))

        def upto(m: int) -> ir.Expr:
            q, r = divmod(m, block)
            if q == 0:
                return ir.Repeat(item, 0, r)
            partial = ir.seq(units_upto(q - 1), ir.Repeat(item, 0, block - 1))
            return ir.alt(partial, ir.seq(units_exact(q), ir.Repeat(item, 0, r)))

        tail = ir.Repeat(item, 0, None) if hi is None else upto(hi - lo)
        return ir.seq(exact(lo), tail)


# ---- 2. the rule graph --------------------------------------------------------


def _sccs(
    graph: dict[str, set[str]],
    root: str,
    index: dict[str, int] | None = None,
    low: dict[str, int] | None = None,
) -> list[list[str]]:
    """Tarjan's SCCs of the part reachable from root, callees before callers.  With
    ``index`` and ``low`` of earlier calls, the nodes they visited are skipped (their
    components are complete: nothing reachable from them is new)."""
    if index is None or low is None:
        index, low = {}, {}
    on: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    work = [(root, iter(sorted(graph[root])))]
    index[root] = low[root] = len(index)
    stack.append(root)
    on.add(root)
    while work:
        node, it = work[-1]
        child = next(it, None)
        if child is not None:
            if child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on.add(child)
                work.append((child, iter(sorted(graph[child]))))
            elif child in on:
                low[node] = min(low[node], index[child])
            continue
        work.pop()
        if work:
            low[work[-1][0]] = min(low[work[-1][0]], low[node])
        if low[node] == index[node]:
            comp = []
            while True:
                x = stack.pop()
                on.discard(x)
                comp.append(x)
                if x == node:
                    break
            out.append(comp)
    return out


def _sccs_all(graph: dict[str, set[str]]) -> list[list[str]]:
    """SCCs of the whole graph, callees before callers."""
    out: list[list[str]] = []
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    inside = {k: {c for c in v if c in graph} for k, v in graph.items()}
    for root in graph:
        if root not in index:
            out.extend(_sccs(inside, root, index, low))
    return out


def _tail_only(e: ir.Expr, members: set[str], tail: bool) -> bool:
    """Are all references to ``members`` inside ``e`` in tail position?"""
    if isinstance(e, ir.Ref):
        return tail or e.name not in members
    if isinstance(e, ir.Seq):
        n = len(e.items)
        return all(_tail_only(x, members, tail and i == n - 1) for i, x in enumerate(e.items))
    if isinstance(e, ir.Alt):
        return all(_tail_only(x, members, tail) for x in e.items)
    if isinstance(e, ir.Repeat):
        return _tail_only(e.item, members, False)
    return True


# ---- 3. automata --------------------------------------------------------------


class _Builder:
    """Thompson construction of one rule (or one right-linear component)."""

    def __init__(
        self, nfa: NFA, fragments: dict[str, DFA], inline: set[str], entries: dict[str, int]
    ) -> None:
        self.nfa = nfa
        self.fragments = fragments
        self.inline = inline
        self.entries = entries  # members of the right-linear component being built

    def build(self, e: ir.Expr, start: int, end: int, tail: bool) -> None:
        deadline.check("NFA construction")
        nfa = self.nfa
        if isinstance(e, ir.Literal):
            cur = start
            for i, b in enumerate(e.data):
                nxt = end if i == len(e.data) - 1 else nfa.state()
                nfa.bytes[cur].append((b, b, nxt))
                cur = nxt
            if not e.data:
                nfa.eps[start].append(end)
        elif isinstance(e, ir.ByteClass):
            nfa.bytes[start].extend((lo, hi, end) for lo, hi in e.ranges)
        elif isinstance(e, ir.CharClass):
            for seq in byte_sequences(e.ranges):
                cur = start
                for i, (lo, hi) in enumerate(seq):
                    nxt = end if i == len(seq) - 1 else nfa.state()
                    nfa.bytes[cur].append((lo, hi, nxt))
                    cur = nxt
        elif isinstance(e, ir.Seq):
            cur = start
            for i, x in enumerate(e.items):
                last = i == len(e.items) - 1
                nxt = end if last else nfa.state()
                self.build(x, cur, nxt, tail and last)
                cur = nxt
            if not e.items:
                nfa.eps[start].append(end)
        elif isinstance(e, ir.Alt):
            for x in e.items:
                s = nfa.state()
                nfa.eps[start].append(s)
                self.build(x, s, end, tail)
        elif isinstance(e, ir.Repeat):
            self.repeat(e, start, end)
        elif isinstance(e, ir.Ref):
            self.ref(e.name, start, end, tail)
        elif isinstance(e, ir.Token):
            nfa.refs[start].append((token_label(e), end))
        else:
            raise TypeError(f"not an IR expression: {e!r}")

    def repeat(self, e: ir.Repeat, start: int, end: int) -> None:
        nfa = self.nfa
        cur = start
        for _ in range(e.lo):
            nxt = nfa.state()
            self.build(e.item, cur, nxt, False)
            cur = nxt
        if e.hi is None:
            loop = nfa.state()
            nfa.eps[cur].append(loop)
            body = nfa.state()
            nfa.eps[loop].append(body)
            self.build(e.item, body, loop, False)
            nfa.eps[loop].append(end)
            return
        for _ in range(e.hi - e.lo):
            nxt = nfa.state()
            nfa.eps[cur].append(end)
            self.build(e.item, cur, nxt, False)
            cur = nxt
        nfa.eps[cur].append(end)

    def ref(self, name: str, start: int, end: int, tail: bool) -> None:
        if name in self.entries:
            assert tail, "right-linear components only have tail calls"
            self.nfa.eps[start].append(self.entries[name])
        elif name in self.inline:
            self.nfa.embed(self.fragments[name], start, end)
        else:
            self.nfa.refs[start].append((name, end))


def _rule_dfas(
    rules: dict[str, ir.Expr],
    start: str,
    outlined: set[str],
    limits: CompileLimits,
    sess: _Session | None = None,
) -> dict[str, DFA]:
    if sess is None:
        sess = _Session()
    cids = {name: sess.cid(body) for name, body in rules.items()}
    graph = {name: set(sess.refs(c)) for name, c in cids.items()}
    uses = _use_counts_dag(sess, cids)
    for name in sorted(rules):  # number the names once: label values need their order
        sess.name(name)
    for t in sorted(sess.tokens):
        if t[0]:
            sess.name(token_label(ir.Token(*t)))
    fragments: dict[str, DFA] = {}
    inline: set[str] = set()
    keys: dict[str, tuple[int, str]] = {}
    for comp in _sccs(graph, start):
        members = set(comp)
        recursive = len(comp) > 1 or comp[0] in graph[comp[0]]
        regular = not recursive or all(_tail_only(rules[m], members, True) for m in comp)
        deadline.check("rule loop")
        callees = sorted({c for m in comp for c in graph[m]} - members)
        key = (
            sess.gen,
            tuple((m, cids[m]) for m in comp),
            tuple((c, keys[c] if c in inline else None) for c in callees),
            recursive,
            regular,
            limits,
        )
        got = _FRAGMENT_CACHE.get(key)
        if got is None:
            dfas = _build_component(
                rules, comp, recursive and regular, fragments, inline, limits, sess, callees
            )
            got = (next(_SERIAL), dfas)
            with _FRAGMENT_LOCK:
                if len(_FRAGMENT_CACHE) >= _FRAGMENT_CACHE_MAX:
                    _FRAGMENT_CACHE.pop(next(iter(_FRAGMENT_CACHE)), None)
                _FRAGMENT_CACHE[key] = got
        serial, dfas = got
        for m in comp:
            keys[m] = (serial, m)
        fragments.update(dfas)
        for m in comp:
            # Copying a rule into every caller makes tokens that span it context-independent,
            # but copies of copies grow exponentially (e.g. one rule per subset of object keys):
            # big automata are copied only into a single caller.
            cap = limits.inline_max_states if uses.get(m, 0) <= 1 else limits.inline_shared_states
            if regular and m not in outlined and len(dfas[m]) <= cap:
                inline.add(m)
    return fragments


class _FragmentCache(dict):  # type: ignore[type-arg]
    """``clear()`` also forgets the IR ids (keys hold them) and the character-class codes:
    a cleared cache means a cold compile."""

    def clear(self) -> None:
        super().clear()
        _reset_interner()
        _utf8_code.cache_clear()


# Automata of rule components, keyed by their IR (ids of the interned DAG), their callees'
# keys and the limits: grammars from one front end share most rules (JSON strings, numbers,
# whitespace), so a process compiling many schemas builds each shared part once.  Values
# are (serial, automata); callers' keys name a callee by its serial.  DFAs are never
# mutated after construction.
_FRAGMENT_CACHE: dict[tuple, tuple[int, dict[str, DFA]]] = _FragmentCache()  # type: ignore[type-arg]
_FRAGMENT_CACHE_MAX = 4096
_FRAGMENT_LOCK = threading.Lock()
_SERIAL = itertools.count()

# The builder of the automata: C (from the encoded IR) or Python (_Builder: the reference
# the tests compare it with).
_C_BUILDER = True


def _build_component(
    rules: dict[str, ir.Expr],
    comp: list[str],
    right_linear: bool,
    fragments: dict[str, DFA],
    inline: set[str],
    limits: CompileLimits,
    sess: _Session | None = None,
    callees: list[str] | None = None,
) -> dict[str, DFA]:
    """A component's automata, with less inlining if the full inlining blows up."""
    if callees is None:
        members = set(comp)
        callees = sorted({c for m in comp for c in ir.Grammar(rules, m).references(rules[m])} - members)
    for budget in (limits.inline_max_states, 64, 0):
        try:
            return _component(rules, comp, right_linear, fragments, inline, budget, limits, sess, callees)
        except LimitError as e:
            if budget == 0 or e.limit in ("deadline_ms", "max_compile_mb"):
                raise
    raise AssertionError("unreachable")


def _use_counts(rules: dict[str, ir.Expr]) -> dict[str, int]:
    """How many references to each rule appear in all rule bodies."""
    counts: dict[str, int] = {}
    stack = list(rules.values())
    while stack:
        e = stack.pop()
        if isinstance(e, ir.Ref):
            counts[e.name] = counts.get(e.name, 0) + 1
        elif isinstance(e, (ir.Seq, ir.Alt)):
            stack.extend(e.items)
        elif isinstance(e, ir.Repeat):
            stack.append(e.item)
    return counts


def _use_counts_dag(sess: _Session, cids: dict[str, int]) -> dict[str, int]:
    """``_use_counts`` capped at 2 (all that inlining asks: one use or more)."""
    counts: dict[str, int] = {}
    uses = sess.interner.uses
    for c in cids.values():
        for n, v in uses[c].items():
            counts[n] = min(2, counts.get(n, 0) + v)
    return counts


def _component(
    rules: dict[str, ir.Expr],
    comp: list[str],
    right_linear: bool,
    fragments: dict[str, DFA],
    inline: set[str],
    budget: int,
    limits: CompileLimits,
    sess: _Session | None = None,
    callees: list[str] | None = None,
) -> dict[str, DFA]:
    if callees is None:
        callees = sorted(inline)
    usable = [n for n in callees if n in inline and len(fragments[n]) <= budget]
    if _C_BUILDER and sess is not None and all(fragments[n].handle is not None for n in usable):
        try:
            return sess.build(rules, comp, right_linear, usable, fragments, limits)
        except ValueError:
            pass  # a token terminal without ids or a bound C cannot take: the Python builder says which
    return _component_py(rules, comp, right_linear, fragments, set(usable), limits)


def _component_py(
    rules: dict[str, ir.Expr],
    comp: list[str],
    right_linear: bool,
    fragments: dict[str, DFA],
    usable: set[str],
    limits: CompileLimits,
) -> dict[str, DFA]:
    nfa = NFA()
    final = nfa.state()
    out: dict[str, DFA] = {}
    if right_linear:
        entries = {m: nfa.state() for m in comp}
        b = _Builder(nfa, fragments, usable, entries)
        for m in comp:
            b.build(rules[m], entries[m], final, True)
        for m in comp:
            out[m] = build_dfa(nfa, entries[m], final, limits.max_dfa_states, limits.max_compile_mb << 20)
        return out
    for m in comp:  # members only call each other: one small NFA each
        nfa = NFA()
        final = nfa.state()
        s = nfa.state()
        _Builder(nfa, fragments, usable, {}).build(rules[m], s, final, True)
        out[m] = build_dfa(nfa, s, final, limits.max_dfa_states, limits.max_compile_mb << 20)
    return out


TOKEN_LABEL = "\x00tok:"


def token_label(t: ir.Token) -> str:
    """The edge label of a token terminal: ``<[1,2]>`` -> "\0tok:1,2", ``!<[3]>`` -> "\0tok:!3"."""
    if not t.ids:
        raise GrammarError("a token terminal needs at least one token id")
    return TOKEN_LABEL + ("!" if t.negated else "") + ",".join(str(i) for i in sorted(set(t.ids)))


def _token_set(label: str) -> tuple[bool, list[int]]:
    body = label[len(TOKEN_LABEL) :]
    negated = body.startswith("!")
    return negated, [int(x) for x in body.lstrip("!").split(",")]


def _callees_in_order(dfa: DFA) -> list[str]:
    """The labels of ``dfa`` in order of first use (states in order, labels by name)."""
    if dfa.handle is None:
        return list(dict.fromkeys(c for st in dfa.states for c, _ in st.refs))
    names = dfa.names or []
    if len(names) <= 1:
        return list(names)
    return [names[i] for i in dfa.handle.label_order()]


def _runtime_rules(dfas: dict[str, DFA], start: str) -> list[str]:
    order = [start]
    seen = {start}
    for name in order:
        for callee in _callees_in_order(dfas[name]):
            if callee not in seen and not callee.startswith(TOKEN_LABEL):
                seen.add(callee)
                order.append(callee)
    return order


def _trim_all(dfas: dict[str, DFA], start: str) -> dict[str, DFA]:
    names = _runtime_rules(dfas, start)
    # token terminals always match something
    productive: set[str] = {c for n in names for c in _labels(dfas[n]) if c.startswith(TOKEN_LABEL)}
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
    return {n: trimmed[n] for n in _runtime_rules(trimmed, start)}


def _labels(dfa: DFA) -> list[str]:
    if dfa.handle is None:
        return [c for st in dfa.states for c, _ in st.refs]
    return dfa.names or []


# ---- 4. tables ----------------------------------------------------------------


def _fixpoint_sets(n: int, step) -> list[int]:  # type: ignore[no-untyped-def]
    """Iterate ``vals[i] = step(i, vals)`` (monotone, bitsets as ints) to a fixpoint."""
    vals = [0] * n
    changed = True
    while changed:
        changed = False
        deadline.check("fixpoint")
        for i in range(n):
            v = step(i, vals)
            if v != vals[i]:
                vals[i] = v
                changed = True
    return vals


@dataclass
class _Flat:
    """All runtime rules' states in one numbering."""

    names: list[str]
    rule_of: np.ndarray  # uint32 [states]
    start_of: list[int]
    accepting: np.ndarray  # uint8 [states]
    # per rule: its byte transitions, int32 [its states, its byte classes] (global state
    # numbers, -1 = none) and the class of each byte, intp [256]
    parts: list[tuple[np.ndarray, np.ndarray]]
    refs: dict[int, list[tuple[int, int]]]  # (rule, target) per state that calls rules
    tokens: dict[int, list[tuple[int, int]]]  # (token set, target) per state with token edges
    token_sets: list[str]

    @property
    def n(self) -> int:
        return int(self.rule_of.shape[0])

    def byte_targets(self, states: list[int]) -> np.ndarray:
        """int32 [len(states), 256]: the target of each state on each byte (-1: none)."""
        out = np.empty((len(states), 256), dtype=np.int32)
        if not states:
            return out
        idx = np.asarray(states, dtype=np.int64)
        rules = self.rule_of[idx]
        for r in sorted(set(rules.tolist())):
            rows = np.nonzero(rules == r)[0]
            trans, cls = self.parts[r]
            out[rows] = trans[idx[rows] - self.start_of[r]][:, cls]
        return out

    def full(self) -> np.ndarray:
        """int32 [states, 256]: every state's target on every byte (-1: none)."""
        return (
            np.concatenate([trans[:, cls] for trans, cls in self.parts])
            if self.parts
            else (np.zeros((0, 256), dtype=np.int32))
        )


def _flatten(dfas: dict[str, DFA], order: list[str]) -> _Flat:
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
        assert d.handle is not None
        cls_b, trans_b, acc_b, labels = d.handle.flat(base)
        ns = len(acc_b)
        cls = np.frombuffer(cls_b, dtype=np.uint8).astype(np.intp)
        parts.append((np.frombuffer(trans_b, dtype=np.int32).reshape(ns, -1), cls))
        accs.append(np.frombuffer(acc_b, dtype=np.uint8))
        rule_of.append(np.full(ns, r, dtype=np.uint32))
        start_of.append(base)
        if labels:
            names = d.names or []
            is_tok = [c.startswith(TOKEN_LABEL) for c in names]
            for s, lab, to in labels:
                c = names[lab]
                if is_tok[lab]:
                    tokens.setdefault(base + s, []).append((sets.setdefault(c, len(sets)), to))
                else:
                    refs.setdefault(base + s, []).append((rid[c], to))
        base += ns
    return _Flat(
        order,
        np.concatenate(rule_of) if rule_of else np.zeros(0, dtype=np.uint32),
        start_of,
        np.concatenate(accs) if accs else np.zeros(0, dtype=np.uint8),
        parts,
        refs,
        tokens,
        list(sets),
    )


def _nullable(f: _Flat) -> list[bool]:
    n_rules = len(f.names)
    null = [False] * n_rules
    changed = True
    while changed:
        changed = False
        deadline.check("fixpoint")
        for r in range(n_rules):
            if null[r]:
                continue
            seen = {f.start_of[r]}
            stack = [f.start_of[r]]
            while stack and not null[r]:
                s = stack.pop()
                if f.accepting[s]:
                    null[r] = changed = True
                for c, t in f.refs.get(s, ()):
                    if null[c] and t not in seen:
                        seen.add(t)
                        stack.append(t)
    return null


ALL_BYTES = (1 << 256) - 1


def _byte_bits(edges: list[tuple[int, int, int]]) -> int:
    bits = 0
    for lo, hi, _ in edges:
        bits |= ((1 << (hi - lo + 1)) - 1) << lo
    return bits


def _follow(f: _Flat, null: list[bool]) -> list[int]:
    """Per rule: bytes that may come right after it completes (FOLLOW, as 256-bit ints).
    An over-approximation is always safe; the mask cache uses it to keep tokens
    that leave a rule context-independent when their next byte cannot follow.
    Only states that call rules change in the fixpoints below; the others keep
    their own values (accepting; the bytes they consume).  Each fixpoint is the least
    one whatever the order of the updates; the orders below (states of callees and
    later states first for can_end and nxt, callers first for follow) need few rounds."""
    callers = sorted(f.refs)
    backwards = callers[::-1]
    refs = f.refs
    acc = f.accepting.tolist()
    can_end = {s: bool(acc[s]) for s in callers}
    for s in callers:
        for _, t in refs[s]:
            can_end.setdefault(t, bool(acc[t]))
    changed = True
    while changed:
        changed = False
        deadline.check("fixpoint")
        for s in backwards:
            if not can_end[s] and any(null[c] and can_end[t] for c, t in refs[s]):
                can_end[s] = changed = True
    # first[r]: bytes rule r can start with; nxt[s]: bytes consumable from state s
    need = sorted(set(can_end) | set(f.start_of))
    nxt: dict[int, int] = {}
    if need:
        packed = np.packbits(f.byte_targets(need) >= 0, axis=1, bitorder="little")
        for s, row in zip(need, packed, strict=True):
            # a token terminal may be any text token: any byte can come next
            nxt[s] = ALL_BYTES if s in f.tokens else int.from_bytes(row.tobytes(), "little")
    first = [nxt[s] for s in f.start_of]
    rule_at = {s: r for r, s in enumerate(f.start_of)}
    changed = True
    while changed:
        changed = False
        deadline.check("fixpoint")
        for s in backwards:
            v = nxt[s]
            for c, t in refs[s]:
                v |= first[c] | (nxt[t] if null[c] else 0)
            if v != nxt[s]:
                nxt[s] = v
                changed = True
                r = rule_at.get(s)
                if r is not None:
                    first[r] = v
    follow = [0] * len(f.names)
    rule_of = f.rule_of.tolist()
    changed = True
    while changed:
        changed = False
        deadline.check("fixpoint")
        for s in callers:
            caller = rule_of[s]
            for c, t in refs[s]:
                v = follow[c] | nxt[t] | (follow[caller] if can_end[t] else 0)
                if v != follow[c]:
                    follow[c] = v
                    changed = True
    return follow


def _rows_as_void(a: np.ndarray) -> np.ndarray:
    """The rows of a 2-D array as opaque scalars (equal rows, equal scalars)."""
    a = np.ascontiguousarray(a)
    return a.view(np.dtype((np.void, a.dtype.itemsize * a.shape[1]))).reshape(a.shape[0])


_WEIGHTS = np.zeros(0, dtype=np.int64)


def _class_weights(n: int) -> np.ndarray:
    """n fixed odd random weights for hashing columns (a new Generator costs 0.1 ms a compile)."""
    global _WEIGHTS
    if len(_WEIGHTS) < n:
        size = max(n, 2 * len(_WEIGHTS), 4096)
        _WEIGHTS = np.random.default_rng(0xC1A55).integers(1, 2**62, size=size, dtype=np.int64) | 1
    return _WEIGHTS[:n]


def _classes(f: _Flat) -> tuple[np.ndarray, np.ndarray]:
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
        cols = np.concatenate([trans[:, cls[reps]] for trans, cls in f.parts])
        keys = np.zeros(cols.shape[1], dtype=np.int64)
        with np.errstate(over="ignore"):
            for i in range(0, n, 4096):  # in slices: the sum wraps modulo 2**64 either way
                keys += weights[i : i + 4096] @ (cols[i : i + 4096].astype(np.int64) + 2)
        _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
        inverse = inverse.reshape(-1)
        if np.array_equal(cols, cols[:, first[inverse]]):  # no hash collision: as from the full matrix
            byte_class = np.asarray(inverse[fine.reshape(-1)], dtype=np.uint8).reshape(256)
            return byte_class, np.ascontiguousarray(cols[:, first])
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


def _build_dfas(grammar: ir.Grammar, limits: CompileLimits, sess: _Session | None = None) -> dict[str, DFA]:
    if sess is None:
        sess = _Session()
    rw = _RepeatRewriter(grammar.rules, limits, sess)
    rules = rw.run()
    # a lookahead marker stays a rule the parser calls: inlined, it would match "" unconditionally
    markers = {n for n in rules if ir.lookahead_chars(n) is not None}
    return _trim_all(_rule_dfas(rules, grammar.start, rw.outlined | markers, limits, sess), grammar.start)


def prepare(grammar: ir.Grammar, limits: CompileLimits) -> _Session:
    """``check_ir`` and the IR's ids, which ``tables_key`` and ``build_tables`` use."""
    sess = _Session()
    if len(grammar.rules) > limits.max_rules:
        _check_ir_exact(grammar, limits)
    try:
        for name, body in grammar.rules.items():
            sess.roots[name] = sess.cid(body, limits.max_ir_nodes)
    except _TooBig:  # more distinct nodes than max_ir_nodes: more tree nodes too
        _check_ir_exact(grammar, limits)
        raise AssertionError("check_ir missed a limit") from None
    it = sess.interner
    roots = sess.roots.values()
    if (
        sum(it.count[c] for c in roots) > limits.max_ir_nodes
        or max((it.height[c] for c in roots), default=0) > limits.max_ir_depth
        or max((it.maxlit[c] for c in roots), default=0) >= limits.max_dfa_states
    ):
        _check_ir_exact(grammar, limits)  # raises the error the tree walk meets first
    return sess


def tables_key(sess: _Session, grammar: ir.Grammar, limits: CompileLimits) -> str:
    """A key of the grammar's tables: equal keys, equal IR (by node ids) and limits."""
    body = repr((sess.gen, sorted(sess.roots.items()), grammar.start, limits))
    return hashlib.sha256(body.encode()).hexdigest()


def build_tables(
    grammar: ir.Grammar, limits: CompileLimits | None = None, session: _Session | None = None
) -> Tables:
    """Compile an IR grammar to the C core's tables.  Raises LimitError past any of
    ``limits`` (``deadline_ms`` included: it bounds the whole build).  ``session``:
    what ``prepare(grammar, limits)`` returned, if the caller has it."""
    limits = limits or CompileLimits()
    with deadline.Deadline(limits.deadline_ms, "compile"):
        if session is None:
            session = prepare(grammar, limits)
        return _build_tables(grammar, limits, session)


def _build_tables(grammar: ir.Grammar, limits: CompileLimits, sess: _Session | None = None) -> Tables:
    if sess is None:
        sess = prepare(grammar, limits)
    _validate(grammar, sess)
    try:
        dfas = _build_dfas(grammar, limits, sess)
    except LimitError as e:
        if e.limit != "max_dfa_states" or limits.unroll_budget == 0:
            raise
        # Unrolled bounded repetitions can make subset construction explode
        # ((a x{0,20})* tracks every counter combination); helper rules never do.
        dfas = _build_dfas(grammar, dataclasses.replace(limits, unroll_budget=0), sess)
    order = list(dfas)
    total = sum(len(d) for d in dfas.values())
    if total > limits.max_total_states:
        raise LimitError(
            f"grammar automata have {total} states, over max_total_states={limits.max_total_states}",
            limit="max_total_states",
            value=limits.max_total_states,
        )
    f = _flatten(dfas, order)
    null = _nullable(f)
    follow = _follow(f, null)
    byte_class, trans = _classes(f)
    n_states = f.n
    callers = sorted(f.refs)
    ref_off = np.zeros(n_states + 1, dtype=np.uint32)
    ref_off[np.asarray(callers, dtype=np.int64) + 1] = [len(f.refs[s]) for s in callers]
    np.cumsum(ref_off, out=ref_off)
    ref_edges = [e for s in callers for e in f.refs[s]]
    tok_states = sorted(f.tokens)
    tok_off = np.zeros(n_states + 1, dtype=np.uint32)
    tok_off[np.asarray(tok_states, dtype=np.int64) + 1] = [len(f.tokens[s]) for s in tok_states]
    np.cumsum(tok_off, out=tok_off)
    tok_edges = [e for s in tok_states for e in f.tokens[s]]
    sets = [_token_set(label) for label in f.token_sets]
    set_off = np.zeros(len(sets) + 1, dtype=np.uint32)
    set_off[1:] = np.cumsum([len(ids) for _, ids in sets])
    follow_arr = np.zeros((len(follow), 8), dtype=np.uint32)
    for r, bits in enumerate(follow):
        for w in range(8):
            follow_arr[r, w] = (bits >> (32 * w)) & 0xFFFFFFFF
    rule_la, la_next, la_union = _lookahead_tables(order)
    return Tables(
        rule_names=order,
        start_rule=0,
        byte_class=byte_class,
        trans=trans,
        state_rule=np.ascontiguousarray(f.rule_of, dtype=np.uint32),
        accepting=np.ascontiguousarray(f.accepting, dtype=np.uint8),
        ref_off=ref_off,
        ref_rule=np.asarray([c for c, _ in ref_edges], dtype=np.uint32),
        ref_target=np.asarray([t for _, t in ref_edges], dtype=np.uint32),
        rule_start=np.asarray(f.start_of, dtype=np.uint32),
        rule_nullable=np.asarray(null, dtype=np.uint8),
        rule_follow=follow_arr.reshape(-1),
        tok_off=tok_off,
        tok_set=np.asarray([k for k, _ in tok_edges], dtype=np.uint32),
        tok_target=np.asarray([t for _, t in tok_edges], dtype=np.uint32),
        set_off=set_off,
        set_ids=np.asarray([i for _, ids in sets for i in ids], dtype=np.uint32),
        set_negated=np.asarray([neg for neg, _ in sets], dtype=np.uint8),
        rule_la=rule_la,
        la_next=la_next,
        la_union=la_union,
        stats={
            "source_rules": len(grammar.rules),
            "parser_rules": len(order),
            "states": total,
            "byte_classes": int(trans.shape[1]),
            "call_edges": int(ref_off[-1]),
        },
    )


_Debt = frozenset[tuple[tuple[int, int], ...]]  # byte-range sequences a forbidden character may still spell


def lookahead_classes(
    markers: list[tuple[tuple[int, int], ...]],
) -> tuple[list[_Debt], list[list[int]], list[list[int]]]:
    """The *debts* an Earley item may owe its next bytes, given the markers' forbidden
    characters: a debt is the set of byte sequences that, read next, would spell a forbidden
    character (class 0: none).  Returns the classes (the markers' own first, in order), the
    transition ``next[c][b]`` (0: paid, 255: ``b`` completes a forbidden character, else the
    debt left for the byte after; a character may be told from a forbidden one only by its
    second or third byte: ``K`` KELVIN SIGN against the spaces U+2000..) and ``union[a][b]``
    (255 inside a character, where debts never meet).  Raises ValueError past 254 classes."""
    classes: list[_Debt] = [frozenset()]
    ids: dict[_Debt, int] = {frozenset(): 0}

    def cid(d: _Debt) -> int:
        if d not in ids:
            if len(classes) >= 255:
                raise ValueError("over 254 lookahead debts")
            ids[d] = len(classes)
            classes.append(d)
        return ids[d]

    for chars in markers:
        cid(frozenset(byte_sequences(chars)))
    # Debts meet (a marker after a completion, a completion of an empty callee) only between
    # characters: the debts owed there are the markers' and their unions ...
    i = 1
    while i < len(classes):
        for j in range(1, i):
            cid(classes[i] | classes[j])
        i += 1
    boundary = len(classes)
    # ... and inside a character, what they leave after its first bytes
    nxt: list[list[int]] = []
    i = 0
    while i < len(classes):
        deadline.check("lookahead classes")
        row = []
        for b in range(256):
            rest = frozenset(seq[1:] for seq in classes[i] if seq[0][0] <= b <= seq[0][1])
            row.append(255 if () in rest else cid(rest))
        nxt.append(row)
        i += 1
    union = [
        [ids[a | b] if i < boundary and j < boundary else 255 for j, b in enumerate(classes)]
        for i, a in enumerate(classes)
    ]
    return classes, nxt, union


def _lookahead_tables(order: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """rule_la, la_next, la_union (see Tables) for the marker rules among ``order``."""
    marks = [ir.lookahead_chars(n) for n in order]
    found = sorted({m for m in marks if m is not None})
    try:
        classes, nxt, union = lookahead_classes(found)
    except ValueError as e:
        raise GrammarError(f"lookahead markers: {e}; not supported") from None
    rule_la = np.asarray([0 if m is None else found.index(m) + 1 for m in marks], dtype=np.uint8)
    return (
        rule_la,
        np.asarray(nxt, dtype=np.uint8).reshape(-1),
        np.asarray(union, dtype=np.uint8).reshape(-1),
    )


def check_ir(grammar: ir.Grammar, limits: CompileLimits) -> None:
    """Size checks that run before any pass that recurses on the IR or builds automata:
    rule count, IR nodes, nesting depth, and literals too long for one rule's DFA.
    Counted over the DAG of distinct subtrees (see ``prepare``); the tree walk
    (``_check_ir_exact``) runs only to report a limit that is exceeded."""
    prepare(grammar, limits)


def _check_ir_exact(grammar: ir.Grammar, limits: CompileLimits) -> None:
    """Size checks that run before any pass that recurses on the IR or builds automata:
    rule count, IR nodes, nesting depth, and literals too long for one rule's DFA.
    Iterative, and stops at the first limit, so it is cheap on hostile input too."""
    if len(grammar.rules) > limits.max_rules:
        raise LimitError(
            f"grammar has {len(grammar.rules)} rules, over max_rules={limits.max_rules}",
            limit="max_rules",
            value=limits.max_rules,
        )
    nodes = 0
    for name, body in grammar.rules.items():
        stack = [(body, 1)]
        while stack:
            e, depth = stack.pop()
            nodes += 1
            if nodes > limits.max_ir_nodes:
                raise LimitError(
                    f"grammar has more than max_ir_nodes={limits.max_ir_nodes} IR nodes",
                    limit="max_ir_nodes",
                    value=limits.max_ir_nodes,
                )
            if depth > limits.max_ir_depth:
                raise LimitError(
                    f"rule {name!r} nests expressions more than max_ir_depth={limits.max_ir_depth} deep",
                    limit="max_ir_depth",
                    value=limits.max_ir_depth,
                )
            if isinstance(e, (ir.Seq, ir.Alt)):
                stack.extend((x, depth + 1) for x in e.items)
            elif isinstance(e, ir.Repeat):
                stack.append((e.item, depth + 1))
            elif isinstance(e, ir.Literal) and len(e.data) >= limits.max_dfa_states:
                raise LimitError(
                    f"rule {name!r} has a literal of {len(e.data)} bytes: its automaton needs more "
                    f"than max_dfa_states={limits.max_dfa_states}",
                    limit="max_dfa_states",
                    value=limits.max_dfa_states,
                )


def _validate(grammar: ir.Grammar, sess: _Session | None = None) -> None:
    if grammar.start not in grammar.rules:
        raise GrammarError(f"start rule {grammar.start!r} is not defined")
    for name, body in grammar.rules.items():
        if ir.lookahead_chars(name) is not None and body != ir.EPSILON:
            raise GrammarError(f"lookahead marker rule {name!r} must match only the empty string")
        refs = grammar.references(body) if sess is None else sess.refs(sess.cid(body))
        for ref in refs:
            if ref not in grammar.rules:
                raise GrammarError(f"rule {name!r} refers to undefined rule {ref!r}")
