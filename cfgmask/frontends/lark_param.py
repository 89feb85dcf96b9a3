"""llguidance's parametric rules (its docs/parametric.md), expanded into plain rules.

A rule ``name::_`` takes a 64-bit parameter ``p``; a reference ``name::E`` passes the value of
``E`` (a number, ``_`` for ``p`` itself, or ``set_bit(k)``, ``clear_bit(k)``, ``bit_and(v)``,
``bit_or(v)``, ``incr([x:y])``, ``decr([x:y])``); an alternative ending in ``%if C`` exists
only for the ``p`` where ``C`` holds (``bit_set``, ``bit_clear``, ``is_ones``, ``is_zeros``,
``eq``/``ne``/``lt``/``le``/``gt``/``ge`` and ``bit_count_*`` on a bit range ``[x:y]`` or
``_``; ``and``, ``or``, ``not``, ``true``).  ``p[x:y]`` is ``(p >> x) & (2**(y-x) - 1)``.

llguidance materializes the instances lazily while parsing; here every instance reachable
from the plain rules is written out as a rule ``name__p<hex>`` before Lark reads the grammar.
That is exact, and finite because the parameters are; :data:`MAX_INSTANCES` bounds it (a
permutation of n items has 2**n instances in any grammar: past the bound a ``LimitError``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from ..errors import GrammarError, LimitError

MAX_INSTANCES = 20_000
MASK = (1 << 64) - 1
_DEF = re.compile(r"^([ \t]*)([a-z_][a-z0-9_]*)::_[ \t]*:", re.MULTILINE)
_REF = re.compile(r"\b([a-z_][a-z0-9_]*)::")


def expand(source: str) -> str:
    """``source`` with its parametric rules expanded (unchanged when it has none).  Each
    definition's lines become blank lines (so other positions stay where they were) and the
    instances are appended at the end."""
    defs = list(_DEF.finditer(source))
    if not defs:
        return source
    bodies: dict[str, list[tuple[str, str | None]]] = {}
    out = source
    spans: list[tuple[int, int]] = []
    for m in defs:
        end = _definition_end(source, m.end())
        name = m.group(2)
        if name in bodies:
            raise GrammarError.at(f"parametric rule {name}::_ is defined twice", source, m.start(2))
        bodies[name] = [_split_condition(a, source, m.start(2)) for a in _alternatives(source[m.end() : end])]
        spans.append((m.start(), end))
    for start, end in reversed(spans):
        out = out[:start] + re.sub(r"[^\n]", " ", out[start:end]) + out[end:]
    instances: dict[tuple[str, int], str] = {}
    todo: list[tuple[str, int]] = []

    def instance(name: str, value: int, at: int) -> str:
        if name not in bodies:
            raise GrammarError.at(f"{name}::... refers to no parametric rule {name}::_", source, at)
        key = (name, value & MASK)
        if key not in instances:
            if len(instances) >= MAX_INSTANCES:
                raise LimitError(
                    f"parametric rules reach more than {MAX_INSTANCES} instances",
                    limit="parametric_instances",
                    value=MAX_INSTANCES,
                )
            instances[key] = f"{name}__p{key[1]:x}"
            todo.append(key)
        return instances[key]

    out = _rewrite_refs(
        out, lambda n, e, at: instance(n, _value(e, 0, source, at, allow_p=False), at), source
    )
    written: list[str] = []
    while todo:
        name, p = todo.pop()
        alts = []

        def ref(n: str, e: str, at: int, p: int = p) -> str:
            return instance(n, _value(e, p, source, at), at)

        for text, cond in bodies[name]:
            if cond is None or _condition(cond, p, source):
                alts.append(_rewrite_refs(text, ref, source))
        rule = instances[(name, p)]
        body = "\n    | ".join(a.strip() or '""' for a in alts) if alts else _NOTHING
        written.append(f"{rule}: {body}")
    tail = "\n".join(written)
    if any(line.endswith(_NOTHING) for line in written):
        tail += f"\n{_NOTHING}: {_NOTHING}"  # derives no string: the compiler trims it
    return out + "\n" + tail + "\n"


_NOTHING = "_cfgmask_no_string"


def _definition_end(text: str, i: int) -> int:
    """The end of a definition starting at ``i``: before the first line that is not a
    ``|`` continuation."""
    while True:
        nl = text.find("\n", i)
        if nl < 0:
            return len(text)
        nxt = text[nl + 1 :].lstrip(" \t")
        if not nxt.startswith("|"):
            return nl
        i = nl + 1


def _alternatives(body: str) -> list[str]:
    out, depth, start, i = [], 0, 0, 0
    while i < len(body):
        c = body[i]
        if c == '"':
            j = i + 1
            while j < len(body) and body[j] != '"':
                j += 2 if body[j] == "\\" else 1
            i = j + 1
            continue
        if c == "/" and not body.startswith("//", i):
            j = i + 1
            while j < len(body) and body[j] not in "/\n":
                j += 2 if body[j] == "\\" else 1
            i = j + 1
            continue
        if c in "([":
            depth += 1
        elif c in ")]":
            depth -= 1
        elif c == "|" and depth == 0:
            out.append(body[start:i])
            start = i + 1
        i += 1
    return [*out, body[start:]]


def _split_condition(alt: str, source: str, at: int) -> tuple[str, str | None]:
    m = re.search(r"%if\b(.*)$", alt, re.DOTALL)
    if not m:
        return alt, None
    return alt[: m.start()], m.group(1).strip()


def _rewrite_refs(text: str, make: Callable[[str, str, int], str], source: str) -> str:
    """Each ``name::E`` in ``text`` replaced by ``make(name, E, offset)``."""
    out, i = [], 0
    for m in _REF.finditer(text):
        if m.start() < i:
            continue
        j = m.end()
        k = j
        if text.startswith("_", k) and not re.match(r"_\w", text[k:]):
            k += 1
        else:
            while k < len(text) and (text[k].isalnum() or text[k] == "_"):
                k += 1
            if text.startswith("(", k):
                depth = 0
                while k < len(text):
                    depth += {"(": 1, ")": -1}.get(text[k], 0)
                    k += 1
                    if depth == 0:
                        break
        out.append(text[i : m.start()])
        out.append(make(m.group(1), text[j:k], source.find(text[m.start() : k])))
        i = k
    out.append(text[i:])
    return "".join(out)


# ---------------------------------------------------------------------- expressions


def _parse(expr: str, source: str, at: int) -> Any:
    """``f(a, b)`` / ``[x:y]`` / ``_`` / numbers as nested tuples and ints."""
    tokens = re.findall(r"0x[0-9a-fA-F]+|\d+|[A-Za-z_]\w*|[()\[\]:,]", expr)
    if "".join(tokens) != re.sub(r"\s+", "", expr):
        raise GrammarError.at(f"cannot read parametric expression {expr!r}", source, max(at, 0))
    pos = 0

    def atom() -> Any:
        nonlocal pos
        if pos >= len(tokens):
            raise GrammarError.at(f"parametric expression {expr!r} ends early", source, max(at, 0))
        t = tokens[pos]
        pos += 1
        if t == "[":
            lo = int(tokens[pos], 0)
            if tokens[pos + 1] != ":" or tokens[pos + 3] != "]":
                raise GrammarError.at(f"bad bit range in {expr!r}", source, max(at, 0))
            hi = int(tokens[pos + 2], 0)
            pos += 4
            return ("range", lo, hi)
        if t[0].isdigit():
            return int(t, 0)
        if t == "_":
            return "_"
        args: list[Any] = []
        if pos < len(tokens) and tokens[pos] == "(":
            pos += 1
            while tokens[pos] != ")":
                args.append(atom())
                if tokens[pos] == ",":
                    pos += 1
            pos += 1
        return (t, *args)

    tree = atom()
    if pos != len(tokens):
        raise GrammarError.at(f"cannot read parametric expression {expr!r}", source, max(at, 0))
    return tree


def _bits(arg: Any, p: int) -> tuple[int, int]:
    """A bit range argument: ``[x:y]`` or ``_`` (all 64 bits): its value in ``p`` and its width."""
    lo, hi = (0, 64) if arg == "_" else (arg[1], arg[2])
    width = hi - lo
    return (p >> lo) & ((1 << width) - 1), width


def _value(expr: str, p: int, source: str, at: int, allow_p: bool = True) -> int:
    tree = _parse(expr, source, at)
    if isinstance(tree, int):
        return tree
    if tree == "_":
        if not allow_p:
            raise GrammarError.at("'_' (the parameter) outside a parametric rule", source, max(at, 0))
        return p
    name, *args = tree
    k: Any = args[0] if args else None
    if name == "set_bit":
        return p | (1 << k)
    if name == "clear_bit":
        return p & ~(1 << k)
    if name == "bit_and":
        return p & k
    if name == "bit_or":
        return p | k
    if name in ("incr", "decr"):
        value, width = _bits(k, p)
        lo = 0 if k == "_" else k[1]
        if name == "incr":
            return p if value == (1 << width) - 1 else p + (1 << lo)
        return p if value == 0 else p - (1 << lo)
    raise GrammarError.at(f"unknown parametric function {name!r}", source, max(at, 0))


_COMPARE = {
    "eq": lambda a, b: a == b,
    "ne": lambda a, b: a != b,
    "lt": lambda a, b: a < b,
    "le": lambda a, b: a <= b,
    "gt": lambda a, b: a > b,
    "ge": lambda a, b: a >= b,
}


def _condition(cond: str, p: int, source: str) -> bool:
    return _holds(_parse(cond, source, source.find(cond)), p, source, cond)


def _holds(tree: Any, p: int, source: str, text: str) -> bool:
    if tree in ("true", ("true",)):
        return True
    name, *args = tree
    if name == "and":
        return all(_holds(a, p, source, text) for a in args)
    if name == "or":
        return any(_holds(a, p, source, text) for a in args)
    if name == "not":
        return not _holds(args[0], p, source, text)
    if name == "bit_set":
        return bool(p >> args[0] & 1)
    if name == "bit_clear":
        return not p >> args[0] & 1
    if name in ("is_ones", "is_zeros"):
        value, width = _bits(args[0], p)
        return value == ((1 << width) - 1 if name == "is_ones" else 0)
    if name in _COMPARE:
        return bool(_COMPARE[name](_bits(args[0], p)[0], args[1]))
    if name.startswith("bit_count_") and name[10:] in _COMPARE:
        return bool(_COMPARE[name[10:]](bin(_bits(args[0], p)[0]).count("1"), args[1]))
    raise GrammarError.at(
        f"unknown parametric condition {name!r} in {text!r}", source, max(source.find(text), 0)
    )
