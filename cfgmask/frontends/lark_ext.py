"""llguidance's extensions of Lark syntax, rewritten into plain Lark before ``lark`` reads it.

llguidance (docs/syntax.md of guidance-ai/llguidance) extends Lark with constructs the
``lark`` package does not parse.  :func:`preprocess` scans the grammar text (outside string
literals, ``/regex/`` literals and comments), takes each extension out and leaves plain Lark
in its place; what the extension means travels beside the text as IR (:class:`Embedded`) and
is put back by the Lark front end when it writes the terminals.

* ``%json { schema }`` in a rule: a *placeholder terminal* (``%declare``'d, so Lark checks the
  rules around it) that stands for the schema's grammar (``Grammar.from_json_schema``, strict,
  canonical, bounded whitespace; ``x-guidance`` ``whitespace_flexible: false`` gives compact
  JSON).  No ``%ignore`` text before it: llguidance switches to the schema's own lexemes.
  ``NAME: %json {...}`` (a whole terminal) is the same under the name ``NAME``.
* ``%regex { "substring_chunks" | "substring_words" | "substring_chars": ... }``: the
  substrings made of whole chunks, as llguidance documents (``""`` included).  In a rule or as
  a whole terminal, like ``%json``, but with ``%ignore`` text allowed before it (a lexeme).
* ``<|name|>`` / ``<name>``: the special token of that name (:class:`cfgmask.ir.TokenText`,
  resolved against the vocabulary at compile time); ``<[42]>``, ``<[1-5,9]>``, ``<[^1-5]>``,
  ``<[*]>``: token ids (:class:`cfgmask.ir.Token`).  Only in rules, as llguidance says.
* ``""`` (the empty string) in a rule, which Lark refuses.
* ``expr{n}``, ``expr{m,n}``, ``expr{,n}``, ``expr{m,}``: Lark's ``expr ~ m..n`` (``{m,}`` is
  ``expr~m expr*``).  Names may contain ``-`` (renamed for Lark).
* ``%llguidance { options }``: see :data:`OPTIONS`.
* Rule attributes ``name[...]``: see :data:`ATTRIBUTES`.  ``lazy`` and ``suffix`` turn the
  rule's body (terminals only) into one lazy terminal: the strings of the body's language
  that have no proper prefix in it (the match ends as soon as it can), computed on the
  body's character automaton.  ``suffix=S``: the body followed by S, lazily.

* Parametric rules ``name::_`` (:mod:`.lark_param`): every reachable instance written out.
* ``NAME: A & ~B & ...`` (a terminal definition on one line): the intersection of the
  operands' languages, ``~`` complementing one (over characters: unlike llguidance's ``~``,
  never invalid UTF-8), built on character automata.

Refused, each with a :class:`GrammarError` at its position: ``@name`` sub-grammar references,
``&`` and ``~`` elsewhere than above, ``%regex`` forms other than
substrings, and the attributes and options listed below as refused.
"""

from __future__ import annotations

import json
import re
from bisect import bisect_right
from dataclasses import dataclass, field
from typing import Any

from .. import ir
from ..errors import GrammarError

# %llguidance options (llguidance's LLGuidanceOptions, and ignore_once from its docs):
# name -> (value honoured, what happens).  A value not listed is refused.
OPTIONS: dict[str, str] = {
    "no_forcing": "accepted: it only changes how llguidance tokenizes forced text, not the language",
    "allow_initial_skip": "true is honoured (cfgmask follows Lark: %ignore text may lead); "
    "false is Lark's behaviour here too, see docs/lark.md",
    "ignore_once": "honoured: the %ignore pattern matches the whole skipped span, at most once",
    "allow_invalid_utf8": "false only; true is refused (cfgmask grammars match UTF-8 text)",
}
# Rule attributes: honoured ones, and refused ones with the reason.
ATTRIBUTES = {
    "lazy": "honoured",
    "suffix": "honoured",
    "capture": "accepted: names a capture; it does not change the language (cfgmask has no captures)",
    "stop_capture": "accepted with suffix, as capture",
    "stop": "refused: llguidance hides the stop text by backtracking tokens; use suffix= or lazy",
    "max_tokens": "refused: a limit on LLM tokens inside a terminal depends on tokenization, "
    "not on the text, so no grammar over bytes can express it",
    "temperature": "refused: a sampling setting, not a constraint; cfgmask cannot apply it",
}

PREFIX = "CFGMASK_EXT_"  # placeholder terminals; made unique against the grammar's own names


@dataclass
class Embedded:
    """What a placeholder terminal stands for: ``expr`` over its own ``rules``; whether
    ``%ignore`` text may come before it; the characters it may start with (``None``: it may be
    empty or start with a token: see :func:`first_chars`)."""

    expr: ir.Expr
    rules: dict[str, ir.Expr] = field(default_factory=dict)
    ignore_before: bool = True


@dataclass
class Lazy:
    """A terminal whose Lark pattern is matched lazily (rule attribute ``lazy``/``suffix``)."""

    rule: str


@dataclass
class Preprocessed:
    text: str  # plain Lark
    embedded: dict[str, Embedded]
    lazy: dict[str, Lazy]
    ignore_once: bool
    _map: list[tuple[int, int]]  # (offset in text, offset in the source) at each piece's start
    source: str = ""
    # terminals written with & and ~: the helper terminals of their operands, negated or not
    combined: dict[str, list[tuple[str, bool]]] = field(default_factory=dict)
    # <|name|> token texts -> the source offset of their first use (errors point there)
    token_texts: dict[bytes, int] = field(default_factory=dict)

    @property
    def helpers(self) -> set[str]:
        """Terminals Lark must keep although no rule uses them."""
        return {h for parts in self.combined.values() for h, _ in parts}

    def source_offset(self, offset: int) -> int:
        """The source offset of ``offset`` in :attr:`text`."""
        i = bisect_right(self._map, (offset, 1 << 62)) - 1
        out, src = self._map[max(i, 0)]
        return src + (offset - out)

    def ignore_before(self, terminal: str) -> bool:
        """Whether ``%ignore`` text may come before ``terminal``."""
        emb = self.embedded.get(terminal)
        return emb is None or emb.ignore_before

    def locate(self, line: int, column: int) -> int:
        """The source offset of 1-based ``line``:``column`` of :attr:`text`."""
        lines = self.text.split("\n")
        offset = sum(len(x) + 1 for x in lines[: line - 1]) + column - 1
        return self.source_offset(offset)


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:-[A-Za-z0-9_]+)*")
_REPEAT = re.compile(r"\{\s*(\d*)\s*(,\s*(\d*)\s*)?\}")
_DEF = re.compile(r"[?!]?(?P<name>[A-Za-z_][A-Za-z0-9_-]*)(?P<attrs>\[[^\]\n]*\])?\s*(?:\.\s*-?\d+\s*)?:")
# Characters that none of _Scanner.run's cases but the last takes (a run of them is one piece:
# the map keeps its offsets, which are consecutive within a piece).
_PLAIN = re.compile(r'[^\n"/#%<{(\[)\]@&~:A-Za-z_]+')
_EMBED = re.compile(r"%(json|regex)\b")
_USES_EXTENSION = re.compile(
    r'%json|%regex|%llguidance|""|<|\{\s*\d*\s*,?\s*\d*\s*\}|[a-zA-Z0-9]-[a-zA-Z]|\[|@|&|~\s*[^\s\d]|::'
)


def preprocess(source: str) -> Preprocessed | None:
    """Plain Lark for ``source`` and the extensions taken out of it; None when ``source``
    uses none (plain Lark grammars go to ``lark`` untouched)."""
    if not _USES_EXTENSION.search(source):
        return None
    scanner = _Scanner(source)
    if "::" in source:
        from .lark_param import expand

        expanded = expand(source)
        scanner = _Scanner(expanded)
        scanner.changed = expanded != source
    return scanner.run()


class _Scanner:
    def __init__(self, source: str) -> None:
        self.src = source
        self.out: list[str] = []
        self.n_out = 0
        self.map: list[tuple[int, int]] = [(0, 0)]
        self.embedded: dict[str, Embedded] = {}
        self.lazy: dict[str, Lazy] = {}
        self.combined: dict[str, list[tuple[str, bool]]] = {}
        self.token_texts: dict[bytes, int] = {}
        self.extra: list[str] = []  # definitions appended at the end
        self.declare: list[str] = []
        self.options: dict[str, Any] = {}
        self.changed = False
        self.prefix = PREFIX
        while self.prefix in source:
            self.prefix = "X" + self.prefix
        self.atom_start = -1  # out offset where the last atom began (for {m,})
        self.groups: list[int] = []
        self.in_terminal = False  # inside a terminal definition

    # ------------------------------------------------------------------ output

    def emit(self, text: str, src_at: int) -> None:
        self.map.append((self.n_out, src_at))
        self.out.append(text)
        self.n_out += len(text)

    def error(self, message: str, at: int) -> GrammarError:
        return GrammarError.at(message, self.src, at)

    def fresh(self) -> str:
        return f"{self.prefix}{len(self.embedded) + len(self.lazy) + len(self.declare) + len(self.extra)}"

    # ------------------------------------------------------------------ scan

    def run(self) -> Preprocessed | None:
        src, i, n = self.src, 0, len(self.src)
        line_start = True
        while i < n:
            c = src[i]
            if line_start:
                j = i
                while j < n and src[j] in " \t":
                    j += 1
                m = _DEF.match(src, j)
                if m:
                    self.emit(src[i:j], i)
                    i = self.definition(m)
                    line_start = False
                    continue
                line_start = False
                if j < n and src[j] != "|" and src[j] not in "\r\n":
                    self.in_terminal = False
            if c == "\n":
                self.emit(c, i)
                i += 1
                line_start = True
            elif c == '"' and src.startswith('""', i) and not self.in_terminal and src[i + 2 : i + 3] != '"':
                i = self.placeholder(Embedded(ir.EPSILON, ignore_before=False), i, i + 2)  # llguidance's ""
            elif c == '"':
                i = self.copy_atom(i, _string_end(src, i))
            elif c == "/" and src.startswith("//", i) or c == "#":
                end = src.find("\n", i)
                end = n if end < 0 else end
                self.emit(src[i:end], i)
                i = end
            elif c == "/":
                i = self.copy_atom(i, _regex_end(src, i))
            elif c == "%":
                i = self.directive(i)
            elif c == "<":
                i = self.token(i)
            elif c == "{":
                i = self.repeat(i)
            elif c in "([":
                self.groups.append(self.n_out)
                self.emit(c, i)
                i += 1
            elif c in ")]":
                self.emit(c, i)
                self.atom_start = self.groups.pop() if self.groups else -1
                i += 1
            elif c == "@":
                raise self.error("llguidance sub-grammar references (@name) are not supported", i)
            elif c == "&":
                raise self.error("llguidance's '&' (and) operator is not supported", i)
            elif c == "~" and not re.match(r"~\s*\d", src[i:]):
                raise self.error("llguidance's '~' (not) operator is not supported", i)
            elif c == ":" and src.startswith("::", i):
                raise self.error("llguidance parametric rules (name::param) are not supported", i)
            elif (m := _NAME.match(src, i)) is not None:  # ASCII names only (c.isalpha() is Unicode)
                self.atom_start = self.n_out
                self.emit(self.name(m.group(), i), i)
                i = m.end()
            else:  # with the characters after it that would come here one by one too
                m = _PLAIN.match(src, i)
                end = m.end() if m else i + 1
                self.emit(src[i:end], i)
                i = end
        if not self.changed:
            return None
        tail = "".join(f"\n{d}" for d in self.extra)
        if self.declare:
            tail += "\n%declare " + " ".join(self.declare)
        self.emit(tail + "\n", len(self.src))
        return Preprocessed(
            "".join(self.out),
            self.embedded,
            self.lazy,
            bool(self.options.get("ignore_once")),
            self.map,
            self.src,
            self.combined,
            self.token_texts,
        )

    def copy_atom(self, start: int, end: int) -> int:
        self.atom_start = self.n_out
        self.emit(self.src[start:end], start)
        return end

    def name(self, word: str, at: int) -> str:
        if "-" not in word:
            return word
        self.changed = True
        return word.replace("-", "_DASH_" if word.isupper() else "_dash_")

    # ------------------------------------------------------------------ definitions and attributes

    def definition(self, m: re.Match[str]) -> int:
        """A rule or terminal definition ``name[attrs]: ...`` at the start of a line."""
        name = m.group("name")
        self.in_terminal = name.lstrip("_")[:1].isupper()
        attrs = m.group("attrs")
        body = _skip_space(self.src, m.end())
        if self.in_terminal and _EMBED.match(self.src, body):
            end = self.embed(body, declare_as=self.name(name, m.start()))
            return end
        if self.in_terminal and not attrs:
            end = self.src.find("\n", body)
            end = len(self.src) if end < 0 else end
            parts = _split_top(self.src[body:end], "&")
            if len(parts) > 1 or re.match(r"~\s*[^\s\d]", parts[0].strip()):
                return self.boolean(self.name(name, m.start()), body, end, parts)
        self.emit(self.src[m.start() : m.start("name")], m.start())  # Lark's ? and ! modifiers
        if not attrs:
            self.emit(self.name(name, m.start()), m.start("name"))
            self.emit(self.src[m.end("name") : m.end()], m.end("name"))
            return m.end()
        self.changed = True
        parsed = self.attributes(attrs, m.start("attrs"))
        head = self.name(name, m.start()) + self.src[m.end("attrs") : m.end()]
        if not ({"lazy", "suffix"} & parsed.keys()):
            self.emit(head, m.start("name"))
            return m.end()
        if self.in_terminal:
            raise self.error("lazy and suffix apply to rules whose body is terminals", m.start("attrs"))
        term = self.fresh()
        self.lazy[term] = Lazy(name)
        body_term = term
        if "suffix" in parsed:
            body_term = term + "_BODY"
            self.extra.append(f"{term}: {body_term} {parsed['suffix']}")
        self.emit(f"{head} {term}\n{body_term}:", m.start("name"))
        self.in_terminal = True
        return m.end()

    def boolean(self, name: str, body: int, end: int, parts: list[str]) -> int:
        """``NAME: A & ~B ...`` on one line: each operand a helper terminal, NAME their
        intersection (``~``: the complement of an operand, over characters)."""
        if self.src[end + 1 :].lstrip(" \t").startswith("|"):
            raise self.error("a terminal with & or ~ must fit on one line", body)
        self.changed = True
        ops: list[tuple[str, bool]] = []
        for part in parts:
            text = part.strip()
            negated = text.startswith("~")
            text = text[1:].strip() if negated else text
            if len(_split_top(text, "|")) > 1:
                raise self.error("'|' inside an operand of '&': write the operand in parentheses", body)
            if re.match(r"~\s*[^\s\d]", text) or len(_split_top(text, "&")) > 1:
                raise self.error("'~' applies to the start of an operand of '&' only", body)
            helper = self.fresh()
            self.extra.append(f"{helper}: {text}")
            ops.append((helper, negated))
        self.combined[name] = ops
        self.declare.append(name)
        return end

    def attributes(self, text: str, at: int) -> dict[str, str]:
        """``[a, b=1, c="x"]`` as a dict; refused attributes raise."""
        out: dict[str, str] = {}
        body = text[1:-1]
        for part in re.finditer(
            r"\s*([A-Za-z_]+)\s*(?:=\s*(\"(?:[^\"\\]|\\.)*\"|/(?:[^/\\]|\\.)*/|[^,]+?))?\s*(?:,|$)", body
        ):
            key, value = part.group(1), (part.group(2) or "").strip()
            where = at + 1 + part.start(1)
            verdict = ATTRIBUTES.get(key)
            if verdict is None:
                raise self.error(f"unknown rule attribute {key!r}", where)
            if verdict.startswith("refused"):
                raise self.error(f"rule attribute {key!r} is {verdict}", where)
            out[key] = value
        if "suffix" in out and not out["suffix"]:
            raise self.error("suffix needs a terminal (a string, a /regex/ or a terminal name)", at)
        return out

    # ------------------------------------------------------------------ %directives

    def directive(self, i: int) -> int:
        m = re.match(r"%(json|regex|llguidance)\b", self.src[i:])
        if not m:
            self.emit("%", i)
            return i + 1
        if m.group(1) == "llguidance":
            value, end = self.json_value(i + m.end(), "%llguidance")
            self.set_options(value, i)
            self.changed = True
            return end
        return self.embed(i)

    def embed(self, i: int, declare_as: str | None = None) -> int:
        """``%json {...}`` / ``%regex {...}`` at ``i``: a placeholder terminal."""
        kind = "json" if self.src.startswith("%json", i) else "regex"
        value, end = self.json_value(i + len(kind) + 1, f"%{kind}")
        if kind == "json":
            emb = _json_embedded(value, self.src, i)
        else:
            emb = _substring(value, self.src, i)
        name = declare_as or self.fresh()
        self.embedded[name] = emb
        self.declare.append(name)
        self.changed = True
        if declare_as is None:
            self.atom_start = self.n_out
            self.emit(name, i)
        return end

    def json_value(self, i: int, what: str) -> tuple[Any, int]:
        i = _skip_space(self.src, i)
        if i >= len(self.src) or self.src[i] != "{":
            raise self.error(f"expected a JSON object after {what}", i)
        try:
            value, end = json.JSONDecoder().raw_decode(self.src, i)
        except json.JSONDecodeError as e:
            raise self.error(f"{what}: invalid JSON: {e.msg}", e.pos) from None
        return value, end

    def set_options(self, value: dict[str, Any], at: int) -> None:
        for key, v in value.items():
            if key not in OPTIONS:
                raise self.error(f"unknown %llguidance option {key!r}; known: {', '.join(OPTIONS)}", at)
            if not isinstance(v, bool):
                raise self.error(f"%llguidance option {key!r} must be true or false", at)
            if key == "allow_invalid_utf8" and v:
                raise self.error("%llguidance allow_invalid_utf8 is not supported: " + OPTIONS[key], at)
            self.options[key] = self.options.get(key, False) or v  # options merge, as llguidance does

    # ------------------------------------------------------------------ tokens and repetition

    def token(self, i: int) -> int:
        end = self.src.find(">", i)
        if end < 0 or "\n" in self.src[i:end]:
            raise self.error("'<' starts a special token but no '>' closes it", i)
        inner = self.src[i + 1 : end]
        if self.in_terminal:
            raise self.error("special tokens can be used in rules only, not inside terminals", i)
        if inner.startswith("[") and inner.endswith("]"):
            expr: ir.Expr = _token_ids(inner[1:-1], self.src, i + 2)
        elif inner:
            text = f"<{inner}>".encode()
            self.token_texts.setdefault(text, i)
            expr = ir.TokenText(text)
        else:
            raise self.error("empty special token name '<>'", i)
        return self.placeholder(Embedded(expr), i, end + 1)

    def placeholder(self, emb: Embedded, start: int, end: int) -> int:
        """Source ``[start, end)`` becomes a fresh placeholder terminal standing for ``emb``."""
        name = self.fresh()
        self.embedded[name] = emb
        self.declare.append(name)
        self.changed = True
        self.atom_start = self.n_out
        self.emit(name, start)
        return end

    def repeat(self, i: int) -> int:
        m = _REPEAT.match(self.src, i)
        if not m or self.atom_start < 0:
            self.emit("{", i)  # a template: Lark says what it thinks of it
            return i + 1
        self.changed = True
        lo = int(m.group(1) or 0)
        if m.group(2) is None:
            hi: int | None = lo
        else:
            hi = int(m.group(3)) if m.group(3) else None
        if hi is not None and hi < lo:
            raise self.error(f"repetition {{{lo},{hi}}}: the upper bound is below the lower", i)
        if hi is not None:
            self.emit(f" ~ {lo}..{hi} ", i)
            return m.end()
        atom = "".join(self.out)[self.atom_start :]
        self.emit(f" ~ {lo} {atom}*" if lo else "*", i)
        return m.end()


def _split_top(text: str, sep: str) -> list[str]:
    """``text`` split at ``sep`` outside strings, regexes and brackets."""
    out, depth, start, i = [], 0, 0, 0
    while i < len(text):
        c = text[i]
        if c == '"':
            i = _string_end(text, i)
            continue
        if c == "/" and not text.startswith("//", i):
            i = _regex_end(text, i)
            continue
        if c in "([":
            depth += 1
        elif c in ")]":
            depth -= 1
        elif c == sep and depth == 0:
            out.append(text[start:i])
            start = i + 1
        i += 1
    return [*out, text[start:]]


def _skip_space(text: str, i: int) -> int:
    while i < len(text) and text[i] in " \t\r\n":
        i += 1
    return i


def _string_end(text: str, i: int) -> int:
    j = i + 1
    while j < len(text) and text[j] != '"':
        j += 2 if text[j] == "\\" else 1
    j += 1
    return j + 1 if text[j : j + 1] == "i" else j


def _regex_end(text: str, i: int) -> int:
    j = i + 1
    while j < len(text) and text[j] not in "/\n":
        j += 2 if text[j] == "\\" else 1
    j += 1
    while j < len(text) and text[j] in "imslux":
        j += 1
    return j


# ---------------------------------------------------------------------- the extensions as IR


def _token_ids(spec: str, source: str, at: int) -> ir.Token:
    """``<[...]>``: ``*``, or ids and inclusive ranges, optionally negated with ``^``."""
    text = spec.strip()
    if text == "*":
        return ir.Token((), True)
    negated = text.startswith("^")
    ids: list[int] = []
    for part in (text[1:] if negated else text).split(","):
        m = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", part)
        if not m:
            raise GrammarError.at(f"bad token id or range {part.strip()!r} in <[{spec}]>", source, at)
        lo = int(m.group(1))
        hi = int(m.group(2)) if m.group(2) else lo
        if hi < lo or hi > 0xFFFFFFFE:
            raise GrammarError.at(f"bad token range {lo}-{hi} in <[{spec}]>", source, at)
        if hi - lo > 1 << 20:
            raise GrammarError.at(f"token range {lo}-{hi} is too large", source, at)
        ids.extend(range(lo, hi + 1))
    return ir.Token(tuple(sorted(set(ids))), negated)


def _substring(value: dict[str, Any], source: str, at: int) -> Embedded:
    """llguidance's substring ``%regex``: ``"".join(chunks[n:m])`` for ``n <= m``."""
    keys = set(value)
    if len(keys) != 1 or not keys <= {"substring_chunks", "substring_words", "substring_chars"}:
        raise GrammarError.at(
            "%regex supports one of substring_chunks, substring_words, substring_chars; got "
            + (", ".join(sorted(keys)) or "nothing"),
            source,
            at,
        )
    (key,) = keys
    arg = value[key]
    if key == "substring_chunks":
        if not isinstance(arg, list) or not all(isinstance(c, str) for c in arg):
            raise GrammarError.at("substring_chunks must be a list of strings", source, at)
        chunks = list(arg)
    elif not isinstance(arg, str):
        raise GrammarError.at(f"{key} must be a string", source, at)
    elif key == "substring_chars":
        chunks = list(arg)
    else:  # words: runs of word characters, each other character alone
        chunks = re.findall(r"\w+|\W", arg)
    # S_i ::= "" | chunk_i S_{i+1} (right-linear: a regular language); any S_i may start.
    chunks = [c for c in chunks if c]
    rules: dict[str, ir.Expr] = {}
    for k in range(len(chunks) - 1, -1, -1):
        after = ir.Ref(f"s{k + 1}") if k + 1 < len(chunks) else ir.EPSILON
        rules[f"s{k}"] = ir.alt(ir.EPSILON, ir.seq(ir.literal(chunks[k]), after))
    return Embedded(ir.alt(ir.EPSILON, *(ir.Ref(f"s{k}") for k in range(len(chunks)))), rules)


def _json_embedded(schema: Any, source: str, at: int) -> Embedded:
    from ..grammar import Grammar

    if not isinstance(schema, dict):
        raise GrammarError.at("%json needs a JSON Schema object", source, at)
    whitespace = "default"
    guidance = schema.get("x-guidance")
    if guidance is not None:
        if not isinstance(guidance, dict):
            raise GrammarError.at("x-guidance must be an object", source, at)
        for key, value in guidance.items():
            if key == "whitespace_flexible" and isinstance(value, bool):
                whitespace = "default" if value else "compact"
            else:
                raise GrammarError.at(f"%json: x-guidance option {key!r} is not supported", source, at)
        schema = {k: v for k, v in schema.items() if k != "x-guidance"}
    try:
        g = Grammar.from_json_schema(schema, whitespace=whitespace)
    except GrammarError as e:
        raise GrammarError.at(f"%json: {e.message}", source, at) from None
    return Embedded(ir.Ref(g.ir.start), dict(g.ir.rules), ignore_before=False)
