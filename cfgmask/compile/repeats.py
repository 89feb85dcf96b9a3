"""Pass 1: big counted repetitions become a logarithmic family of helper rules.

``x{m,n}`` whose unrolled size would exceed ``CompileLimits.unroll_whole`` (and
``unroll_budget``) is cut into unrolled blocks ``B = x^b`` of about ``unroll_budget``, counted
by rules ``P_j = B^(2^j)``, so ``{1,100000}`` costs O(log n) rules and a token inside a long
bounded string is still decided by one automaton (docs/design.md, section 2, item 1).
"""

from __future__ import annotations

from collections.abc import Set as AbstractSet

from .. import deadline, ir
from ..errors import GrammarError, LimitError
from . import _dag
from .encode import _ALT, _BYTES, _LIT, _LOOKAHEAD, _REF, _REPEAT, _SEQ, _TOKEN, _UTF8, _WORDS, Session
from .graph import sccs_all
from .limits import CompileLimits, whole_budget


def size_estimate(expr: ir.Expr, rule_size: dict[str, int] | None = None) -> int:
    """A rough NFA size estimate used only to choose unrolling vs helper rules;
    a reference counts as the estimated size of the rule (it may be inlined)."""
    if isinstance(expr, ir.Literal):
        return max(1, len(expr.data))
    if isinstance(expr, ir.CharClass):
        return min(12, 2 * max(1, len(expr.ranges)))  # a class's UTF-8 DFA is shallow
    if isinstance(expr, ir.Ref):
        return (rule_size or {}).get(expr.name, 4)
    if isinstance(expr, (ir.ByteClass, ir.Token, ir.Lookahead)):
        return 1
    if isinstance(expr, ir.LiteralSet):
        return max(1, sum(map(len, expr.words)))
    if isinstance(expr, (ir.Seq, ir.Alt)):
        return 1 + sum(size_estimate(e, rule_size) for e in expr.items)
    if isinstance(expr, ir.Repeat):
        n = expr.hi if expr.hi is not None else max(expr.lo, 1)
        return 1 + size_estimate(expr.item, rule_size) * max(n, 1)
    raise TypeError(f"not an IR expression: {expr!r}")


def dag_size(sess: Session, cid: int, rule_size: dict[str, int], memo: dict[int, int]) -> int:
    """:func:`size_estimate` of the interned subtree ``cid``; sizes of reference-free subtrees
    are kept by the interner, the others in ``memo`` (valid for one ``rule_size``).  Compiled
    (``_dag.Sizes``); past its recursion cap, the rest in :func:`dag_size_py`."""
    try:
        return sess.interner.sizes(cid, rule_size, memo)  # type: ignore[no-any-return]
    except _dag.Deep:
        return dag_size_py(sess, cid, rule_size, memo)


def dag_size_py(sess: Session, cid: int, rule_size: dict[str, int], memo: dict[int, int]) -> int:
    """:func:`dag_size` in Python (the compiled walk's fallback past its recursion cap, and
    its reference in tests/test_compile_passes.py)."""
    it = sess.interner
    if not it.refs[cid]:
        got = it.size0.get(cid)
        if got is None:
            got = it.size0[cid] = _dag_size_py(sess, cid, rule_size, {})
        return got
    got = memo.get(cid)
    if got is None:
        got = memo[cid] = _dag_size_py(sess, cid, rule_size, memo)
    return got


def _dag_size_py(sess: Session, cid: int, rule_size: dict[str, int], memo: dict[int, int]) -> int:
    key = sess.interner.keys[cid]
    kind = key[0]
    if kind == _LIT:
        return max(1, len(key[1]))
    if kind == _UTF8:
        return min(12, 2 * max(1, len(key[1])))
    if kind == _REF:
        return rule_size.get(key[1], 4)
    if kind == _BYTES or kind == _TOKEN or kind == _LOOKAHEAD:
        return 1
    if kind == _WORDS:
        return max(1, sum(map(len, key[1])))
    if kind == _SEQ or kind == _ALT:
        total = 1
        for k in key[1]:
            got = memo.get(k)
            total += dag_size_py(sess, k, rule_size, memo) if got is None else got
        return total
    _, item, lo, hi = key
    n = hi if hi is not None else max(lo, 1)
    return 1 + dag_size_py(sess, item, rule_size, memo) * max(n, 1)


def rule_sizes(
    rules: dict[str, ir.Expr], sess: Session | None = None, memo: dict[int, int] | None = None
) -> dict[str, int]:
    """Estimated sizes of every rule, references expanded (recursion counts 4), capped.
    ``memo`` receives the sizes of subtrees (by id) that hold for the final rule sizes."""
    final: dict[int, int] = {} if memo is None else memo
    if sess is not None:  # over the DAG, compiled (the same loop as below, each size by dag_size)
        return _dag.rule_sizes(sess, rules, final, dag_size_py)  # type: ignore[no-any-return]
    cap = 1 << 30
    sizes: dict[str, int] = {}
    graph: dict[str, AbstractSet[str]] = {n: ir.Grammar(rules, n).references(b) for n, b in rules.items()}
    for comp in sccs_all(graph):
        for n in comp:
            sizes.setdefault(n, 4)
        for n in comp:
            sizes[n] = min(cap, size_estimate(rules[n], sizes))
    return sizes


class RepeatRewriter:
    # one family of counting rules per distinct block unit (tests/test_shared_repeats.py turns it
    # off to compare with a family per repetition)
    share_counts = True

    def __init__(self, rules: dict[str, ir.Expr], limits: CompileLimits, sess: Session | None = None) -> None:
        self.rules = dict(rules)
        self.limits = limits
        self.outlined: set[str] = set()
        self.count = 0
        self.sess = sess
        self._sizes: dict[int, int] = {}
        self._given = self.rules.copy()  # run() rewrites self.rules; sizes are of the rules given
        self._rule_size: dict[str, int] | None = None
        self._clean: dict[int, bool] = {}
        self.compiled = sess is not None  # clean() by the compiled walk (tests compare it with clean_py)
        self._families: dict[object, list[str]] = {}  # unit (its DAG id) -> its counting rules

    @property
    def rule_size(self) -> dict[str, int]:
        """Estimated sizes of the given rules, made on first use: a grammar whose bounded
        repetitions repeat only reference-free items (a JSON string's characters) never needs them."""
        if self._rule_size is None:
            self._rule_size = rule_sizes(self._given, self.sess, self._sizes)
        return self._rule_size

    def run(self) -> dict[str, ir.Expr]:
        if not self.compiled:
            names = list(self.rules)
        else:  # the rules kept as they are found in one compiled loop (most of them)
            names = _dag.dirty_rules(self.sess, self.rules, self._walk(), self.limits.max_repeat_product)
        for name in names:
            self.rules[name] = self.expr(self.rules[name], name, 1)
        return self.rules

    def clean(self, cid: int) -> bool:
        """Does the subtree need no rewriting (and have valid bounds)?  Compiled
        (``_dag.Clean``); past its recursion cap, the rest in :meth:`clean_py`."""
        if self.compiled:
            try:
                return self._walk()(cid)
            except _dag.Deep:
                pass
        return self.clean_py(cid)

    def _walk(self) -> _dag.Clean:
        """The compiled walk of ``clean``, sharing its answers.  Made when used and not kept:
        it holds ``_item_size``, and a rewriter holding it would be a cycle that outlives the
        compile until the collector runs."""
        assert self.sess is not None
        return _dag.Clean(self.sess.interner, self._clean, self._item_size, whole_budget(self.limits))

    def _item_size(self, item: int) -> int:
        """The size estimate of a repeated item, as ``clean`` weighs it against the budget."""
        assert self.sess is not None
        return dag_size(self.sess, item, self.rule_size if self.sess.interner.refs[item] else {}, self._sizes)

    def clean_py(self, cid: int) -> bool:
        """``clean`` in Python (the compiled walk's fallback past its recursion cap, and its
        reference in tests/test_repeats.py)."""
        assert self.sess is not None
        it = self.sess.interner
        if it.plain[cid]:
            return True
        got = self._clean.get(cid)
        if got is not None:
            return got
        key = it.keys[cid]
        if key[0] == _SEQ or key[0] == _ALT:
            plain, memo = it.plain, self._clean
            got = True
            for k in key[1]:  # all(), without a call for the plain and known parts
                if not (plain[k] or (memo[k] if k in memo else self.clean_py(k))):
                    got = False
                    break
        elif key[0] == _REPEAT:
            _, item, lo, hi = key
            bound = max(lo, hi or 0, 1)
            got = (
                lo >= 0
                and (hi is None or hi >= lo)
                and self.clean_py(item)
                and (bound <= 1 or self._item_size(item) * bound <= whole_budget(self.limits))
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
        if bound <= 1 or size_estimate(item, self.rule_size) * bound <= whole_budget(self.limits):
            return ir.Repeat(item, e.lo, e.hi)
        return self.helpers(item, e.lo, e.hi, rule)

    def family(self, unit: ir.Expr, rule: str, n: int) -> list[str]:
        """The first ``n`` rules ``P_j = unit^(2^j)`` counting ``unit``.  With ``share_counts``
        one family per distinct unit (by content) serves every count of it in the grammar, each
        count using the powers it needs: the strings of one schema with different
        ``maxLength`` share their blocks' states and entries (docs/design.md §7, session 32).
        The key is the unit's DAG id: the session keeps every interned object, so no id of a
        unit dropped after its lookup is reused."""
        key: object = None
        if self.share_counts:
            key = self.sess.cid(unit) if self.sess is not None else unit
            names = self._families.get(key)
        if not self.share_counts or names is None:
            self.count += 1
            names = [f"{rule}#rep{self.count}.p0"]
            self.rules[names[0]] = unit
            if key is not None:
                self._families[key] = names
        while len(names) < n:  # the family grown in place: the rules made so far keep their names
            j = len(names)
            names.append(f"{names[0][:-1]}{j}")
            self.rules[names[j]] = ir.Seq((ir.Ref(names[j - 1]), ir.Ref(names[j - 1])))
            self.outlined.add(names[j])
        return names[:n]

    def helpers(self, item: ir.Expr, lo: int, hi: int | None, rule: str) -> ir.Expr:
        """``item{lo,hi}`` as unrolled blocks of B items counted by helper rules.

        With B = unroll_budget / size(item), a block is a plain automaton, so tokens
        inside a long bounded string stay context-independent; only tokens that
        cross a block boundary (every B items) depend on the count."""
        block = max(1, self.limits.unroll_budget // max(1, size_estimate(item, self.rule_size)))
        unit = item if block == 1 else ir.Repeat(item, block, block)
        # a minimum below one block (a string's minLength 1 under a maxLength 255) stays in the
        # first block's chain instead of leading it as positions of their own (see below)
        low_min = 0 < lo < block and hi is not None and hi >= block
        top = (hi if low_min and hi is not None else max(lo, (hi - lo) if hi is not None else 0)) // block
        names = self.family(unit, rule, max(1, top.bit_length()))
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

        if low_min:
            assert hi is not None
            # item{lo,hi}, 0 < lo < block <= hi, by its count of whole units: none (lo to block-1
            # items, one unrolled chain whose first lo positions cannot end), 1 to q-1 (then 0 to
            # block-1 items), or q (then 0 to r): unambiguous by count, like upto.  Spelled as
            # exact(lo) then upto(hi - lo), the lo leading positions would be followed by
            # calls and a chain, so the first position's entry (a string's start) could not
            # come from the chain's shared walk: a whole trie walk at the first mask.
            q, r = divmod(hi, block)
            parts: list[ir.Expr] = [ir.Repeat(item, lo, block - 1)]
            if q >= 2:
                parts.append(ir.seq(ir.Ref(names[0]), units_upto(q - 2), ir.Repeat(item, 0, block - 1)))
            parts.append(ir.seq(units_exact(q), ir.Repeat(item, 0, r)))
            return ir.alt(*parts)
        tail = ir.Repeat(item, 0, None) if hi is None else upto(hi - lo)
        return ir.seq(exact(lo), tail)
