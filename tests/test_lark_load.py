"""cfgmask.frontends.lark_load: its meta-parse of ``.lark`` text is Lark's, tree for tree."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest.importorskip("lark")

from lark import Token, Tree  # noqa: E402
from lark.load_grammar import _parse_grammar, load_grammar  # noqa: E402

from cfgmask.frontends import lark_load  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
FILES = sorted(
    p for d in ("grammars", "tests", "examples") for p in (ROOT / d).rglob("*.lark") if p.is_file()
)

# Inline snippets: every construct of the syntax, and text Lark's meta-parser rejects.
SNIPPETS = [
    'start: a\n?a.2: "x"i -> b | /y/is [c] (d | e)* "f".."g"~3 h~1..2 \n!c: C+\nC.-1: "c"\n',
    'start: _t{x, "y"}\n_t{a, b}: a b\nx: X\nX: /x/\n%declare Y z\n%ignore " "\n',
    '%import common.WS\n%import common (INT, NUMBER)\n%import .foo -> bar\n%override a: b\n%extend T: "t"\n',
    'start:\n    | "a" \\\n  "b"  // comment\n# another\n',
    "",
    "\n",
    "start: a**\n",
    "start: (\n",
    'start "a"\n',
    'start: "a" ->\n',
    "a: b ~ \n",
    "?!a: b\n!?a: b\n",
    'start: a{"b".."c", d{e}}\n',
    "%import a.b.C\n%ignore A B\n",
]


def _same(a: object, b: object) -> bool:
    """Trees equal, tokens equal with their types and positions."""
    if isinstance(a, Tree) and isinstance(b, Tree):
        return (
            a.data == b.data
            and len(a.children) == len(b.children)
            and all(_same(x, y) for x, y in zip(a.children, b.children, strict=True))
        )
    if isinstance(a, Token) or isinstance(b, Token):
        fields = ("type", "value", "start_pos", "line", "column", "end_line", "end_column", "end_pos")
        return type(a) is type(b) and all(getattr(a, f) == getattr(b, f) for f in fields)
    return type(a) is type(b) and a == b and repr(a) == repr(b)


def _lark_tree(text: str) -> object:
    try:
        return _parse_grammar(text, "<t>")
    except Exception:  # noqa: BLE001 - Lark's parser rejects the text
        return None


@pytest.mark.parametrize(
    "text",
    [p.read_text() for p in FILES] + SNIPPETS,
    ids=[str(p.relative_to(ROOT)) for p in FILES] + [f"snippet{i}" for i in range(len(SNIPPETS))],
)
def test_tree_is_larks(text: str) -> None:
    ours = lark_load.parse_tree(text)
    theirs = _lark_tree(text)
    if theirs is None:
        assert ours is None
    else:
        assert ours is not None and _same(ours, theirs)


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(ROOT)) for p in FILES])
def test_compiled_grammar_is_larks(path: Path) -> None:
    text = path.read_text()
    try:
        theirs = load_grammar(text, str(path), [], False)[0]
    except Exception as e:  # noqa: BLE001
        with pytest.raises(type(e)):
            lark_load.load(text, str(path), [])
        return
    ours = lark_load.load(text, str(path), [])
    assert repr(ours.term_defs) == repr(theirs.term_defs)
    assert repr(ours.rule_defs) == repr(theirs.rule_defs)
    assert ours.ignore == theirs.ignore


@pytest.mark.parametrize("text", SNIPPETS, ids=[f"snippet{i}" for i in range(len(SNIPPETS))])
def test_load_raises_larks_error(text: str) -> None:
    try:
        theirs = load_grammar(text, "<t>", [], False)[0]
    except Exception as e:  # noqa: BLE001 - the same exception, the same message
        with pytest.raises(type(e)) as ours:
            lark_load.load(text, "<t>", [])
        assert str(ours.value) == str(e)
        return
    ours = lark_load.load(text, "<t>", [])
    assert repr(ours.term_defs) == repr(theirs.term_defs) and repr(ours.rule_defs) == repr(theirs.rule_defs)


def test_imports_use_this_parser(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    real = lark_load._Parser.start

    def start(self: lark_load._Parser) -> object:
        calls.append("x")
        return real(self)

    monkeypatch.setattr(lark_load._Parser, "start", start)
    text = "start: INT WORD\n%import common (INT, WORD)\n%import common.WS\n%ignore WS\n"
    ours = lark_load.load(text, "<t>", [])
    theirs = load_grammar(text, "<t>", [], False)[0]
    assert repr(ours.term_defs) == repr(theirs.term_defs)
    assert len(calls) == 2  # the grammar, and common.lark (Lark groups the imports by file)


def test_mutated_grammars_parse_as_lark_parses_them() -> None:
    """Random edits of the grammars above: the same tree where Lark's parser accepts the text,
    and no tree where it does not (ad hoc, 9,000 seeds of this found no difference)."""
    import random

    for text in _mutated(random.Random(12), 600):
        theirs = _lark_tree(text)
        ours = lark_load.parse_tree(text)
        assert (ours is None) if theirs is None else (ours is not None and _same(ours, theirs)), text


def _mutated(rng: object, count: int, window: int = 10) -> list[str]:
    """``count`` random edits of a window of ``window`` lines of the grammars and snippets above."""
    texts = [p.read_text() for p in FILES] + SNIPPETS
    pieces = [*':|()[]{}?*+~.,->%/"\n \\#i', "..", "->", "%import ", "%ignore ", "%declare "]
    pieces += [
        "%override ",
        "%extend ",
        "_x",
        "X",
        "a",
        "1",
        "-1",
        " \\\n",
        "\n  |",
        "//c\n",
        '"s"',
        "/r/i",
        "?a",
        "!b",
    ]
    out = []
    for _ in range(count):
        lines = rng.choice(texts).split("\n")  # type: ignore[attr-defined]
        k = rng.randrange(max(1, len(lines) - window))  # type: ignore[attr-defined]
        text = "\n".join(lines[k : k + window])
        for _ in range(rng.randint(1, 3)):  # type: ignore[attr-defined]
            i = rng.randrange(len(text) + 1)  # type: ignore[attr-defined]
            j = min(len(text), i + rng.randint(0, 3))  # type: ignore[attr-defined]
            text = text[:i] + (rng.choice(pieces) if rng.random() < 0.7 else "") + text[j:]  # type: ignore[attr-defined]
        out.append(text)
    return out


def _compiled(out: object) -> str:
    terminals, rules, ignore = out  # type: ignore[misc]
    rows = [(r.origin, r.expansion, r.alias, r.order, vars(r.options) if r.options else None) for r in rules]
    return repr(([(t.name, t.pattern, t.priority) for t in terminals], rows, ignore))


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(ROOT)) for p in FILES])
def test_compile_once_is_compile(path: Path) -> None:
    text = path.read_text()
    try:
        theirs = load_grammar(text, str(path), [], False)[0].compile(["start"], set())
    except Exception as e:  # noqa: BLE001
        with pytest.raises(type(e)):
            lark_load.compile_once(lark_load.load(text, str(path), []), ["start"], set())
        return
    ours = lark_load.compile_once(lark_load.load(text, str(path), []), ["start"], set())
    assert _compiled(ours) == _compiled(theirs)


def _compile_outcome(compile: object, text: str, start: str) -> str:
    """The compiled grammar of ``text``, or the exception ``compile`` raises (type and message)."""
    try:
        grammar = load_grammar(text, "<t>", [], False)[0]
    except Exception:  # noqa: BLE001 - not loadable: nothing to compile
        return "unloadable"
    try:
        return _compiled(compile(grammar, [start], set()))  # type: ignore[operator]
    except Exception as e:  # noqa: BLE001
        return f"{type(e).__name__}: {e}"


def test_compile_once_is_compile_on_edits_and_snippets() -> None:
    """compile_once (Lark's compile without its tree copies, its transformers' method lookups
    done once an instance) against Lark's compile: the same terminals, rules and errors on the
    snippets (templates, aliases, ``~``, priorities) and on random edits of every grammar."""
    import random

    texts = SNIPPETS + [p.read_text() for p in FILES] + _mutated(random.Random(34), 300, window=10**6)
    compiled = 0
    for text in texts:
        names = re.findall(r"^[?!]?([a-z_][a-z0-9_]*)", text, re.MULTILINE)  # a rule name or two
        for start in dict.fromkeys(["start", "a", *names[:1], *names[-1:]]):
            theirs = _compile_outcome(lambda g, s, k: g.compile(s, k), text, start)
            ours = _compile_outcome(lark_load.compile_once, text, start)
            assert ours == theirs, text
            compiled += theirs.startswith("([")
    assert compiled > 150


def test_compile_once_reads_literals_as_lark() -> None:
    """String literals of random printable characters (quotes, non-ASCII, escapes): the same
    patterns from compile_once (which unescapes a literal without backslashes itself) as from
    Lark's compile."""
    import random

    rng = random.Random(7)
    alphabet = [chr(c) for c in range(32, 0x3000) if chr(c).isprintable() and chr(c) not in '"\\']
    alphabet += ["'", "''", "'''", "\\n", "\\t", "\\\\", '\\"', "\\u00e9", "\\x41", "\\'", "é", "\U0001f600"]
    literals = ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 6))) for _ in range(400)]
    text = "start: " + " | ".join(f'"{s}"' for s in literals) + "\n"
    text += "".join(f'T{i}: "{s}"i\n' for i, s in enumerate(literals[:50]))
    text += "t: " + " ".join(f"T{i}" for i in range(50)) + "\n"
    for start in ("start", "t"):
        theirs = _compile_outcome(lambda g, s, k: g.compile(s, k), text, start)
        assert theirs.startswith("([")
        assert _compile_outcome(lark_load.compile_once, text, start) == theirs
