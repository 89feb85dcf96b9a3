"""The languages of XGrammar's EBNF macros, written in plain IR.

Each function returns the expression that stands where the macro is written, plus the helper
rules it needs (named after ``base``, a name no user rule can take).  Nothing here parses: the
front end (:mod:`cfgmask.frontends.ebnf`) checks the arguments; tests draw these directly.

* :func:`substring` — ``Substring(c0, ..., cn-1)``: ``""`` and every ``ci ci+1 ... cj-1``
  (``i < j``), chunks atomic.
* :func:`tag_dispatch` — ``TagDispatch((tag, rule), ..., loop_after_dispatch, excludes)``.
* :func:`token_tag_dispatch` — the same over whole LLM tokens.
* :func:`json_string_only` — ``Regex(..., json_string=true)``: every character match loses the
  characters a JSON string must escape.

TagDispatch, exactly
--------------------
XGrammar's documentation: free text that contains no tag may end anywhere; when a complete tag
appears, its rule must follow and complete; then free text again (``loop_after_dispatch``,
the default) or the end.  ``excludes`` may not appear in the free text.  Written as a language
over characters, one round is ``w t R`` where ``t`` is a tag, ``R`` its rule, ``w`` contains no
excluded string, and ``w t`` contains no tag except the one it ends with (the first tag to
complete dispatches; a text that completes two tags at once, one a suffix of the other, may
dispatch to either).  An excluded string may overlap the tag that ends the free text: only
``w`` must avoid it.  The free text after a dispatch starts afresh (a tag is not completed
across the dispatched rule's end).

The rules are the states of a deterministic automaton: two Aho-Corasick automata, over the
tags (``a``) and over the excluded strings (``e``), run in step, and ``k``, what an excluded
string that ended ``k - 1`` characters ago still asks: that the tag that ends the free text be
at least ``k`` characters long, so that it began before the excluded string ended (0: nothing
pending).  A character that completes a tag dispatches (to each completed tag long enough);
any other continues the free text while some tag prefix at least ``k`` long is alive; the free
text may end where nothing is pending.  All recursion is in tail position, so the compiler
builds the rules into one automaton that calls the tags' rules.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

from .. import deadline, ir, ir_ops

MAX_DISPATCH_STATES = 100_000  # free-text states of one TagDispatch (pairs of automaton states)
_JSON_FORBIDDEN = ((0, 0x1F), (0x22, 0x22), (0x5C, 0x5C))  # control characters, '"', '\'
_JSON_ALLOWED = ir.complement_ranges(_JSON_FORBIDDEN)


# --------------------------------------------------------------------------- Substring


def substring(chunks: Sequence[str], base: str) -> tuple[ir.Expr, dict[str, ir.Expr]]:
    """``Substring(*chunks)``: helper rule ``S_i ::= c_i S_{i+1}?`` for each chunk."""
    if not chunks:
        return ir.EPSILON, {}
    parts = [ir.literal(c) if c else ir.EPSILON for c in chunks]
    names = [f"{base}.{i}" for i in range(len(chunks))]
    rules: dict[str, ir.Expr] = {}
    for i, part in enumerate(parts):
        if i + 1 < len(parts):
            rules[names[i]] = ir.alt(part, ir.seq(part, ir.Ref(names[i + 1])))
        else:
            rules[names[i]] = part
    return ir.alt(ir.EPSILON, *(ir.Ref(n) for n in names)), rules


# --------------------------------------------------------------------------- TagDispatch


class _AhoCorasick:
    """The Aho-Corasick automaton of non-empty ``patterns`` (code-point sequences):
    ``step(s, c)`` for the characters of the patterns (any other character leads to state 0),
    ``done[s]``: the patterns that end when state ``s`` is entered."""

    def __init__(self, patterns: Sequence[Sequence[int]]) -> None:
        self.children: list[dict[int, int]] = [{}]
        self.done: list[set[int]] = [set()]
        for k, p in enumerate(patterns):
            s = 0
            for c in p:
                if c not in self.children[s]:
                    self.children.append({})
                    self.done.append(set())
                    self.children[s][c] = len(self.children) - 1
                s = self.children[s][c]
            self.done[s].add(k)
        self.alphabet = sorted({c for p in patterns for c in p})
        self.fail = [0] * len(self.children)
        self.delta: list[dict[int, int]] = [{} for _ in self.children]
        order = deque([0])
        while order:
            s = order.popleft()
            for c in self.alphabet:
                child = self.children[s].get(c)
                if child is None:
                    self.delta[s][c] = self.delta[self.fail[s]][c] if s else 0
                    continue
                self.delta[s][c] = child
                self.fail[child] = self.delta[self.fail[s]][c] if s else 0
                self.done[child] |= self.done[self.fail[child]]
                order.append(child)

    def step(self, s: int, c: int) -> int:
        return self.delta[s].get(c, 0)


def tag_dispatch(
    pairs: Sequence[tuple[str, ir.Expr]],
    base: str,
    *,
    loop: bool = True,
    excludes: Sequence[str] = (),
) -> tuple[ir.Expr, dict[str, ir.Expr]]:
    """``TagDispatch``: ``pairs`` are (non-empty tag, the expression that follows it, usually
    a rule reference); ``excludes`` non-empty strings the free text may not contain.  Raises
    ValueError past ``MAX_DISPATCH_STATES``."""
    tags = [[ord(c) for c in t] for t, _ in pairs]
    tag_ac = _AhoCorasick(tags)
    ex_ac = _AhoCorasick([[ord(c) for c in x] for x in excludes])
    depth = _depths(tag_ac)
    alphabet = sorted(set(tag_ac.alphabet) | set(ex_ac.alphabet))
    others = ir.char_class([(c, c) for c in alphabet], negate=True)
    start: _State = (0, 0, 0)
    names: dict[_State, str] = {start: f"{base}.0"}
    rules: dict[str, ir.Expr] = {}
    todo = [start]
    after = ir.Ref(names[start]) if loop else ir.EPSILON
    while todo:
        deadline.check("TagDispatch")
        a, e, k = state = todo.pop()
        free: dict[_State, list[tuple[int, int]]] = {}
        options: list[ir.Expr] = [ir.EPSILON] if k == 0 else []
        if k == 0 and others.ranges:
            options.append(ir.seq(others, ir.Ref(names[start])))
        for c in alphabet:
            a2, e2 = tag_ac.step(a, c), ex_ac.step(e, c)
            need = max(k + 1 if k else 0, 1 if ex_ac.done[e2] else 0)
            if tag_ac.done[a2]:  # a tag ends here: dispatch, if it began before any excluded end
                bodies = [pairs[t][1] for t in sorted(tag_ac.done[a2]) if len(tags[t]) >= need]
                if bodies:
                    options.append(ir.seq(ir.char_class([(c, c)]), ir.alt(*bodies), after))
            elif depth[a2] >= need:  # free text; a pending excluded end needs a tag begun before it
                free.setdefault((a2, e2, need), []).append((c, c))
        for target, chars in free.items():
            if target not in names:
                if len(names) >= MAX_DISPATCH_STATES:
                    raise ValueError(f"its free text needs more than {MAX_DISPATCH_STATES} states")
                names[target] = f"{base}.{len(names)}"
                todo.append(target)
            options.append(ir.seq(ir.char_class(chars), ir.Ref(names[target])))
        rules[names[state]] = ir.alt(*options) if options else ir.NOTHING
    return ir.Ref(names[start]), rules


_State = tuple[int, int, int]  # tag automaton, exclusion automaton, pending (see tag_dispatch)


def _depths(ac: _AhoCorasick) -> list[int]:
    """The length of the pattern prefix each state stands for."""
    out = [0] * len(ac.children)
    for s, kids in enumerate(ac.children):
        for child in kids.values():
            out[child] = out[s] + 1
    return out


def token_tag_dispatch(
    pairs: Sequence[tuple[int, ir.Expr]],
    base: str,
    *,
    loop: bool = True,
    excludes: Sequence[int] = (),
) -> tuple[ir.Expr, dict[str, ir.Expr]]:
    """``TokenTagDispatch``: any token but the triggers and ``excludes`` until a trigger token,
    then that trigger's expression.  Needs at least one trigger or excluded id (a token terminal
    names its ids)."""
    blocked = tuple(sorted({t for t, _ in pairs} | set(excludes)))
    if not blocked:
        raise ValueError("TokenTagDispatch needs at least one trigger or excluded token id")
    name = f"{base}.0"
    after = ir.Ref(name) if loop else ir.EPSILON
    options: list[ir.Expr] = [ir.EPSILON, ir.seq(ir.Token(blocked, negated=True), ir.Ref(name))]
    options += [ir.seq(ir.Token((t,)), body, after) for t, body in pairs]
    return ir.Ref(name), {name: ir.alt(*options)}


# --------------------------------------------------------------------------- Regex(json_string)


def json_string_only(e: ir.Expr) -> ir.Expr:
    """``e`` with every character match narrowed to what a JSON string holds unescaped."""
    return ir_ops.map_leaves(e, _json_string_leaf)


def _json_string_leaf(e: ir.Expr) -> ir.Expr:
    if isinstance(e, ir.CharClass):
        ranges = ir_ops.intersect(ir.normalize_ranges(e.ranges), _JSON_ALLOWED)
        return ir.CharClass(ranges) if ranges else ir.NOTHING
    if isinstance(e, ir.ByteClass):
        ranges = ir_ops.intersect(ir.normalize_ranges(e.ranges, top=0xFF), _JSON_ALLOWED)
        return ir.ByteClass(ranges) if ranges else ir.NOTHING
    if isinstance(e, ir.Literal):
        bad = any(lo <= b <= hi for b in e.data for lo, hi in _JSON_FORBIDDEN)
        return ir.NOTHING if bad else e
    if isinstance(e, ir.LiteralSet):
        words = tuple(w for w in e.words if not any(lo <= b <= hi for b in w for lo, hi in _JSON_FORBIDDEN))
        return ir.LiteralSet(words, e.json) if words else ir.NOTHING
    return e
