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
import hashlib
from dataclasses import dataclass, field

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


def _rule_sizes(rules: dict[str, ir.Expr]) -> dict[str, int]:
    """Estimated sizes of every rule, references expanded (recursion counts 4), capped."""
    cap = 1 << 30
    sizes: dict[str, int] = {}
    graph = {n: ir.Grammar(rules, n).references(b) for n, b in rules.items()}
    for comp in _sccs_all(graph):
        for n in comp:
            sizes.setdefault(n, 4)
        for n in comp:
            sizes[n] = min(cap, _size(rules[n], sizes))
    return sizes


class _RepeatRewriter:
    def __init__(self, rules: dict[str, ir.Expr], limits: CompileLimits) -> None:
        self.rules = dict(rules)
        self.limits = limits
        self.outlined: set[str] = set()
        self.count = 0
        self.rule_size = _rule_sizes(self.rules)

    def run(self) -> dict[str, ir.Expr]:
        for name in list(self.rules):
            self.rules[name] = self.expr(self.rules[name], name, 1)
        return self.rules

    def expr(self, e: ir.Expr, rule: str, product: int) -> ir.Expr:
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


def _sccs(graph: dict[str, set[str]], root: str) -> list[list[str]]:
    """Tarjan's SCCs of the part reachable from root, callees before callers."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    work = [(root, iter(sorted(graph[root])))]
    index[root] = low[root] = 0
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
    seen: set[str] = set()
    for root in graph:
        if root in seen:
            continue
        comps = _sccs({k: {c for c in v if c in graph} for k, v in graph.items()}, root)
        for comp in comps:
            if comp[0] not in seen:
                out.append(comp)
                seen.update(comp)
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
    rules: dict[str, ir.Expr], start: str, outlined: set[str], limits: CompileLimits
) -> dict[str, DFA]:
    graph = {name: ir.Grammar(rules, start).references(body) for name, body in rules.items()}
    uses = _use_counts(rules)
    fragments: dict[str, DFA] = {}
    inline: set[str] = set()
    keys: dict[str, str] = {}
    for comp in _sccs(graph, start):
        members = set(comp)
        recursive = len(comp) > 1 or comp[0] in graph[comp[0]]
        regular = not recursive or all(_tail_only(rules[m], members, True) for m in comp)
        deadline.check("rule loop")
        callees = sorted({c for m in comp for c in graph[m]} - members)
        key = hashlib.sha1(
            repr(
                (
                    [(m, rules[m]) for m in comp],
                    [(c, keys[c] if c in inline else None) for c in callees],
                    recursive,
                    regular,
                    limits,
                )
            ).encode()
        ).hexdigest()
        dfas = _FRAGMENT_CACHE.get(key)
        if dfas is None:
            dfas = _build_component(rules, comp, recursive and regular, fragments, inline, limits)
            if len(_FRAGMENT_CACHE) >= _FRAGMENT_CACHE_MAX:
                _FRAGMENT_CACHE.pop(next(iter(_FRAGMENT_CACHE)))
            _FRAGMENT_CACHE[key] = dfas
        for m in comp:
            keys[m] = f"{key}:{m}"
        fragments.update(dfas)
        for m in comp:
            # Copying a rule into every caller makes tokens that span it context-independent,
            # but copies of copies grow exponentially (e.g. one rule per subset of object keys):
            # big automata are copied only into a single caller.
            cap = limits.inline_max_states if uses.get(m, 0) <= 1 else limits.inline_shared_states
            if regular and m not in outlined and len(dfas[m]) <= cap:
                inline.add(m)
    return fragments


# Automata of rule components, keyed by their IR and their callees' keys: grammars
# from one front end share most rules (JSON strings, numbers, whitespace), so a
# process compiling many schemas builds each shared part once.  DFAs are never
# mutated after construction.
_FRAGMENT_CACHE: dict[str, dict[str, DFA]] = {}
_FRAGMENT_CACHE_MAX = 4096


def _build_component(
    rules: dict[str, ir.Expr],
    comp: list[str],
    right_linear: bool,
    fragments: dict[str, DFA],
    inline: set[str],
    limits: CompileLimits,
) -> dict[str, DFA]:
    """A component's automata, with less inlining if the full inlining blows up."""
    for budget in (limits.inline_max_states, 64, 0):
        try:
            return _component(rules, comp, right_linear, fragments, inline, budget, limits)
        except LimitError as e:
            if budget == 0 or e.limit == "deadline_ms":
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


def _component(
    rules: dict[str, ir.Expr],
    comp: list[str],
    right_linear: bool,
    fragments: dict[str, DFA],
    inline: set[str],
    budget: int,
    limits: CompileLimits,
) -> dict[str, DFA]:
    usable = {n for n in inline if len(fragments[n]) <= budget}
    nfa = NFA()
    final = nfa.state()
    out: dict[str, DFA] = {}
    if right_linear:
        entries = {m: nfa.state() for m in comp}
        b = _Builder(nfa, fragments, usable, entries)
        for m in comp:
            b.build(rules[m], entries[m], final, True)
        for m in comp:
            out[m] = build_dfa(nfa, entries[m], final, limits.max_dfa_states)
        return out
    for m in comp:  # members only call each other: one small NFA each
        nfa = NFA()
        final = nfa.state()
        s = nfa.state()
        _Builder(nfa, fragments, usable, {}).build(rules[m], s, final, True)
        out[m] = build_dfa(nfa, s, final, limits.max_dfa_states)
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


def _runtime_rules(dfas: dict[str, DFA], start: str) -> list[str]:
    order = [start]
    seen = {start}
    for name in order:
        for st in dfas[name].states:
            for callee, _ in st.refs:
                if callee not in seen and not callee.startswith(TOKEN_LABEL):
                    seen.add(callee)
                    order.append(callee)
    return order


def _trim_all(dfas: dict[str, DFA], start: str) -> dict[str, DFA]:
    names = _runtime_rules(dfas, start)
    # token terminals always match something
    productive: set[str] = {
        c for n in names for st in dfas[n].states for c, _ in st.refs if c.startswith(TOKEN_LABEL)
    }
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
    rule_of: list[int]
    start_of: list[int]
    accepting: list[bool]
    bytes: list[list[tuple[int, int, int]]]
    refs: list[list[tuple[int, int]]]
    tokens: list[list[tuple[int, int]]]  # (token set, target) per state
    token_sets: list[str]


def _flatten(dfas: dict[str, DFA], order: list[str]) -> _Flat:
    rid = {n: i for i, n in enumerate(order)}
    base: dict[str, int] = {}
    total = 0
    for n in order:
        base[n] = total
        total += len(dfas[n])
    f = _Flat(order, [], [base[n] for n in order], [], [], [], [], [])
    sets: dict[str, int] = {}
    for n in order:
        b = base[n]
        for st in dfas[n].states:
            f.rule_of.append(rid[n])
            f.accepting.append(st.accepting)
            f.bytes.append([(lo, hi, b + t) for lo, hi, t in st.bytes])
            f.refs.append([(rid[c], b + t) for c, t in st.refs if not c.startswith(TOKEN_LABEL)])
            f.tokens.append(
                [(sets.setdefault(c, len(sets)), b + t) for c, t in st.refs if c.startswith(TOKEN_LABEL)]
            )
    f.token_sets = list(sets)
    return f


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
                for c, t in f.refs[s]:
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
    that leave a rule context-independent when their next byte cannot follow."""
    n = len(f.rule_of)
    can_end = [False] * n
    changed = True
    while changed:
        changed = False
        deadline.check("fixpoint")
        for s in range(n):
            if not can_end[s] and (f.accepting[s] or any(null[c] and can_end[t] for c, t in f.refs[s])):
                can_end[s] = changed = True
    # first[r]: bytes rule r can start with; nxt[s]: bytes consumable from state s
    first = [0] * len(f.names)
    # a token terminal may be any text token: any byte can come next
    nxt = [_byte_bits(b) | (ALL_BYTES if f.tokens[s] else 0) for s, b in enumerate(f.bytes)]
    changed = True
    while changed:
        changed = False
        deadline.check("fixpoint")
        for s in range(n):
            v = nxt[s]
            for c, t in f.refs[s]:
                v |= first[c] | (nxt[t] if null[c] else 0)
            if v != nxt[s]:
                nxt[s] = v
                changed = True
        for r in range(len(f.names)):
            v = nxt[f.start_of[r]]
            if v != first[r]:
                first[r] = v
                changed = True
    follow = [0] * len(f.names)
    changed = True
    while changed:
        changed = False
        deadline.check("fixpoint")
        for s in range(n):
            for c, t in f.refs[s]:
                v = follow[c] | nxt[t] | (follow[f.rule_of[s]] if can_end[t] else 0)
                if v != follow[c]:
                    follow[c] = v
                    changed = True
    return follow


def _classes(f: _Flat) -> tuple[np.ndarray, np.ndarray]:
    n = len(f.rule_of)
    full = np.full((n, 256), -1, dtype=np.int32)
    for s, edges in enumerate(f.bytes):
        for lo, hi, t in edges:
            full[s, lo : hi + 1] = t
    # identical columns = one byte class; hash the columns, then check the grouping exactly
    weights = np.random.default_rng(0xC1A55).integers(1, 2**62, size=n, dtype=np.int64) | 1
    with np.errstate(over="ignore"):
        keys = weights @ (full.astype(np.int64) + 2)
    _, first_col, inverse = np.unique(keys, return_index=True, return_inverse=True)
    inverse = inverse.reshape(-1)
    if not np.array_equal(full, full[:, first_col[inverse]]):
        _, first_col, inverse = np.unique(full, axis=1, return_index=True, return_inverse=True)
    byte_class = np.asarray(inverse, dtype=np.uint8).reshape(256)
    trans = np.ascontiguousarray(full[:, first_col])
    return byte_class, trans


def _build_dfas(grammar: ir.Grammar, limits: CompileLimits) -> dict[str, DFA]:
    rw = _RepeatRewriter(grammar.rules, limits)
    rules = rw.run()
    return _trim_all(_rule_dfas(rules, grammar.start, rw.outlined, limits), grammar.start)


def build_tables(grammar: ir.Grammar, limits: CompileLimits | None = None) -> Tables:
    """Compile an IR grammar to the C core's tables.  Raises LimitError past any of
    ``limits`` (``deadline_ms`` included: it bounds the whole build)."""
    limits = limits or CompileLimits()
    with deadline.Deadline(limits.deadline_ms, "compile"):
        check_ir(grammar, limits)
        return _build_tables(grammar, limits)


def _build_tables(grammar: ir.Grammar, limits: CompileLimits) -> Tables:
    _validate(grammar)
    try:
        dfas = _build_dfas(grammar, limits)
    except LimitError as e:
        if e.limit != "max_dfa_states" or limits.unroll_budget == 0:
            raise
        # Unrolled bounded repetitions can make subset construction explode
        # ((a x{0,20})* tracks every counter combination); helper rules never do.
        dfas = _build_dfas(grammar, dataclasses.replace(limits, unroll_budget=0))
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
    ref_off = np.zeros(len(f.refs) + 1, dtype=np.uint32)
    ref_off[1:] = np.cumsum([len(r) for r in f.refs])
    tok_off = np.zeros(len(f.tokens) + 1, dtype=np.uint32)
    tok_off[1:] = np.cumsum([len(r) for r in f.tokens])
    sets = [_token_set(label) for label in f.token_sets]
    set_off = np.zeros(len(sets) + 1, dtype=np.uint32)
    set_off[1:] = np.cumsum([len(ids) for _, ids in sets])
    follow_arr = np.zeros((len(follow), 8), dtype=np.uint32)
    for r, bits in enumerate(follow):
        for w in range(8):
            follow_arr[r, w] = (bits >> (32 * w)) & 0xFFFFFFFF
    return Tables(
        rule_names=order,
        start_rule=0,
        byte_class=byte_class,
        trans=trans,
        state_rule=np.asarray(f.rule_of, dtype=np.uint32),
        accepting=np.asarray(f.accepting, dtype=np.uint8),
        ref_off=ref_off,
        ref_rule=np.asarray([c for r in f.refs for c, _ in r], dtype=np.uint32),
        ref_target=np.asarray([t for r in f.refs for _, t in r], dtype=np.uint32),
        rule_start=np.asarray(f.start_of, dtype=np.uint32),
        rule_nullable=np.asarray(null, dtype=np.uint8),
        rule_follow=follow_arr.reshape(-1),
        tok_off=tok_off,
        tok_set=np.asarray([k for r in f.tokens for k, _ in r], dtype=np.uint32),
        tok_target=np.asarray([t for r in f.tokens for _, t in r], dtype=np.uint32),
        set_off=set_off,
        set_ids=np.asarray([i for _, ids in sets for i in ids], dtype=np.uint32),
        set_negated=np.asarray([neg for neg, _ in sets], dtype=np.uint8),
        stats={
            "source_rules": len(grammar.rules),
            "parser_rules": len(order),
            "states": total,
            "byte_classes": int(trans.shape[1]),
            "call_edges": int(ref_off[-1]),
        },
    )


def check_ir(grammar: ir.Grammar, limits: CompileLimits) -> None:
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


def _validate(grammar: ir.Grammar) -> None:
    if grammar.start not in grammar.rules:
        raise GrammarError(f"start rule {grammar.start!r} is not defined")
    for name, body in grammar.rules.items():
        for ref in grammar.references(body):
            if ref not in grammar.rules:
                raise GrammarError(f"rule {name!r} refers to undefined rule {ref!r}")
