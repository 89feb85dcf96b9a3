"""Free text that stops at trigger strings: the automaton behind ``any_text`` and ``triggered_tags``.

``free_text(triggers, excludes, loop)`` builds the language XGrammar's structural tags give free
text (its ``TagDispatch``): any text, character by character, in which

* an **exclude** never occurs (the text dies where one would end), and
* a **trigger** is acted on as soon as it is complete: the text stops there and must go on with
  the trigger's continuation (a tag's rest, content and end); after that, with ``loop``, free
  text again, otherwise nothing.

The free text may end anywhere else, also inside an unfinished trigger (``... <tool_ca``).

The set of strings "not containing any pattern" is regular: the Aho-Corasick automaton of the
patterns (one state per prefix of a pattern, in characters) with the states that complete an
exclude removed and those that complete a trigger turned into exits.  Each state becomes one
right-linear rule ``S_u ::= "" | class_1 S_v1 | class_2 S_v2 | ...``: the characters that appear
in no pattern form one class leading back to the start state, so a rule has at most one
alternative per distinct pattern character plus one.  The compiler sees a rule component whose
recursion is all in tail position and builds it as one byte DFA (calls to the continuations are
its only call edges), so the engine's per-state mask cache serves every token of a long stretch
of free text: a stretch costs one OR of a cached row per token, however long it is.

Characters, not bytes: the free text is valid UTF-8 (XGrammar's excluding automaton runs over raw
bytes and would also take invalid UTF-8; for valid text the two agree, since UTF-8 is
self-synchronising and the patterns are text).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from .. import ir

__all__ = ["free_text"]


def free_text(
    triggers: Mapping[str, ir.Expr],
    excludes: list[str],
    loop: bool,
    new_rule: Callable[[str, ir.Expr], ir.Ref],
    reserve: Callable[[str], str],
) -> ir.Ref:
    """A reference to the start rule of the free text.

    ``triggers`` maps each trigger (non-empty) to what must follow it; ``excludes`` (non-empty
    strings) may never occur; ``loop``: free text again after a continuation.  ``reserve(hint)``
    names a rule before its body exists; ``new_rule(name, body)`` defines it and returns a Ref.
    """
    patterns = sorted(set(triggers) | set(excludes))
    nodes = {p[:i] for p in patterns for i in range(len(p) + 1)}
    alphabet = sorted({c for p in patterns for c in p})

    def kind(s: str) -> str:
        """dead: an exclude ends here; exit: a trigger ends here; else free."""
        if any(s.endswith(e) for e in excludes):
            return "dead"
        if any(s.endswith(t) for t in triggers):
            return "exit"
        return "free"

    def step(s: str, c: str) -> str:
        """The longest suffix of ``s + c`` that is a prefix of some pattern."""
        t = s + c
        while t not in nodes:
            t = t[1:]
        return t

    names: dict[str, str] = {}

    def rule_of(s: str) -> str:
        if s not in names:
            names[s] = reserve("free-text")
        return names[s]

    # Order matters only for determinism of rule names: breadth first from the start state.
    todo = [""]
    done: set[str] = set()
    exits: dict[str, ir.Expr] = {}
    rule_of("")
    while todo:
        s = todo.pop(0)
        if s in done:
            continue
        done.add(s)
        by_target: dict[str, list[tuple[int, int]]] = {}
        for c in alphabet:
            v = step(s, c)
            if kind(v) == "dead":
                continue
            by_target.setdefault(v, []).append((ord(c), ord(c)))
        others = ir.char_class([(ord(c), ord(c)) for c in alphabet], negate=True)
        options: list[ir.Expr] = [ir.EPSILON]
        if others.ranges:
            options.append(ir.seq(others, ir.Ref(rule_of(""))))
        for v, ranges in by_target.items():
            cls = ir.char_class(ranges)
            if kind(v) == "exit":
                options.append(ir.seq(cls, _exit(v, triggers, loop, exits, rule_of(""), new_rule, reserve)))
            else:
                options.append(ir.seq(cls, ir.Ref(rule_of(v))))
                todo.append(v)
        new_rule(rule_of(s), ir.alt(*options))
    return ir.Ref(rule_of(""))


def _exit(
    v: str,
    triggers: Mapping[str, ir.Expr],
    loop: bool,
    exits: dict[str, ir.Expr],
    start: str,
    new_rule: Callable[[str, ir.Expr], ir.Ref],
    reserve: Callable[[str], str],
) -> ir.Expr:
    """What follows once the text ends in ``v``: every trigger ending there dispatches."""
    if v not in exits:
        body = ir.alt(*(triggers[t] for t in sorted(triggers) if v.endswith(t)))
        if loop:
            body = ir.seq(body, ir.Ref(start))
        exits[v] = new_rule(reserve("dispatch"), body)
    return exits[v]
