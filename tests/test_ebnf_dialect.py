"""XGrammar's EBNF dialect (``Grammar.from_ebnf``): each construct against its documentation.

The spec is XGrammar's EBNF guide (docs/defining_structures/ebnf_grammar.md of mlc-ai/xgrammar);
the examples below are written here from its prose.  Each table runs through the reference
matcher (on the IR the front end writes) and the C engine; the macros' languages are also
checked against direct Python definitions on random strings, and against xgrammar itself when
it is installed.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cfgmask
from cfgmask import GrammarError, ir
from cfgmask.frontends import ebnf_macros
from cfgmask.frontends.ebnf_lazy import NotTerminalLike, shortest_matches

from .engine import EngineRecognizer
from .helpers import check
from .reference import ReferenceMatcher
from .strategies import SMALL, exprs


def ebnf(text: str) -> ir.Grammar:
    return cfgmask.Grammar.from_ebnf(text).ir


def both(text: str, accepts: list[str], rejects: list[str]) -> None:
    g = ebnf(text)
    check(g, accepts, rejects)
    check(g, accepts, rejects, using=EngineRecognizer)


# --------------------------------------------------------------------------- constructs

CASES = [
    # GBNF stays GBNF
    ('root ::= "a" [b-c]+ ("d" | e)?\ne ::= "e"', ["ab", "acbd", "abe"], ["a", "ad", "abde"]),
    # names with dots, [^] is any character, ( ) is the empty string
    ('root ::= x.y ( ) [^]\nx.y ::= "k"', ["k\n", "kz", "k😀"], ["k", "kab"]),
    # repetition forms, {n, -1} as the printer writes {n,}
    ('root ::= "a"{2, -1} "b"{0,1} "c"{2}', ["aacc", "aaaabcc"], ["acc", "aac", "aabbcc"]),
    ('root ::= "a"{0}', [""], ["a"]),
    ('root ::= ""* "x"', ["x"], ["", "xx"]),
    # escapes: \/ \' \? and the control characters, \x with any number of hex digits
    (r'root ::= "\/\'\?\a\b\f\v\0\e"', ["/'?\a\b\f\v\0\x1b"], ["/'?"]),
    (r'root ::= "\x41\x1F600\x000041"', ["A😀A"], ["A😀"]),
    (r"root ::= [\-\]\^\$\.\*\+\?\(\)\{\}\|\/\[]+", ["-]^$.*+?(){}|/["], ["a"]),
    (r"root ::= [a\-z]", ["a", "-", "z"], ["b"]),
    # rule attributes that do not change the language
    ('root[capture="answer", temperature=0.7] ::= item+\nitem[capture] ::= [0-9]', ["1", "123"], [""]),
    ('root[stop_capture="s", capture_hidden_stop_bytes=2] ::= "ab"', ["ab"], ["a"]),
    # a lookahead assertion does not change the language (XGrammar's documentation)
    ('root ::= name "=" [0-9]\nname ::= [a-z]+ (= "=")', ["ab=1"], ["ab1"]),
    ('root ::= name "=" [0-9]\nname ::= [a-z]+ (= "x" [a-z])', ["ab=1"], ["ab1"]),
    # Regex: verbatim, '.' matches every character; ASCII classes
    ('root ::= "ID-" Regex("[0-9]{5}")', ["ID-12345"], ["ID-1234", "ID-123456", "ID-١٢٣٤٥"]),
    ('root ::= Regex("a.b")', ["a\nb", "axb", "a😀b"], ["ab"]),
    (r'root ::= Regex("\\d+\\.\\d+")', ["3.14"], ["3", "٣.١"]),
    # ECMAScript spellings: \u{...}, \cX, (?<name>...), [^]
    (r'root ::= Regex("\\u{1F600}\\cA(?<n>b)")', ["😀\x01b"], ["😀\x01", "😀Ab"]),
    ('root ::= Regex("a[^]")', ["a\n", "ax"], ["a"]),
    # flags: standard '.', i is ASCII case-insensitive, s makes '.' match newlines
    ('root ::= Regex("hello, world.", flags="is")', ["HeLLo, WORLD\n", "hello, world!"], ["hello world!"]),
    ('root ::= Regex("a.b", flags="")', ["axb"], ["a\nb"]),
    ('root ::= Regex("k", flags="i")', ["k", "K"], ["\u212a"]),
    # json_string: control characters, '"' and '\' leave every character match
    (r'root ::= Regex("\\S+", json_string=true)', ["abc", "é"], ['a"b', "a\\b", ""]),
    ('root ::= Regex("[^x]*", json_string=true)', ["ab", ""], ["\n", '"']),
    # Substring: every contiguous run of whole chunks, the empty one included
    (
        'root ::= Substring("abc", "de", "fg")',
        ["", "abc", "de", "abcde", "defg", "abcdefg", "fg"],
        ["ab", "cde", "abcfg"],
    ),
    ("root ::= Substring()", [""], ["a"]),
    ('root ::= Substring("a", "", "a")', ["", "a", "aa"], ["aaa"]),
    # lazy: each occurrence commits to its shortest match, whatever follows
    ('root ::= "<" name ">" rest\nname[lazy] ::= [a-z]+\nrest ::= [a-z]+', ["<a>bc"], ["<ab>c", "<a>"]),
    (
        'root ::= x "c"?\nx[lazy] ::= "ab" | "abc" | "b" y "c"\ny ::= [a-z]*',
        ["ab", "abc", "bxc", "bcc"],
        ["bcxc"],
    ),
    ('root ::= x "z"\nx[lazy] ::= [a-z]*', ["z"], ["az"]),
]


@pytest.mark.parametrize(("text", "accepts", "rejects"), CASES)
def test_constructs(text: str, accepts: list[str], rejects: list[str]) -> None:
    both(text, accepts, rejects)


TAGS = """root ::= TagDispatch(("<tool_call>", call), ("<code>", code))
call ::= "{" [^}]* "}"
code ::= "```" [^`]* "```"
"""


def test_tag_dispatch_documented_examples() -> None:
    both(
        TAGS,
        [
            'I will call a tool. <tool_call>{"name": "get_weather"}</tool_call> Done.',
            "no tool call at all",
            "<code>```print(1)```<tool_call>{}",
            "",
            "ends inside a tag <tool_ca",  # an unfinished tag is free text
            "<<<code>``````",
        ],
        ["<tool_call>", "<tool_call>{", "x <code>print", "<tool_call>x}"],
    )


def test_tag_dispatch_without_loop_ends_after_the_rule() -> None:
    both(
        'root ::= TagDispatch(("<tool>", tool), loop_after_dispatch=false)\ntool ::= "get_weather"',
        ["", "hi <to", "<tool>get_weather", "text <tool>get_weather"],
        ["<tool>get_weather more", "<tool>x"],
    )


def test_tag_dispatch_excludes_stop_the_free_text() -> None:
    both(
        'root ::= body "</answer>"\nbody ::= TagDispatch(("<tool_call>", b), excludes=("</answer>",))\n'
        'b ::= "{" [^}]* "}"',
        ["hi</answer>", "<tool_call>{}x</answer>", "</answer>"],
        ["hi</answer>x</answer>", "hi", "<tool_call>{</answer>"],
    )


def test_tag_dispatch_excludes_bind_the_free_text_only() -> None:
    """An excluded string inside or across the tag that ends the free text is not in the free text."""
    both(
        'root ::= TagDispatch(("<t>", r), excludes=("t>", "x<"))\nr ::= "1"',
        ["<t>1", "x<t>1", "<t>1<t>1", "ab"],
        ["t>", "x<", "<t>1t>", "x<x"],
    )


def test_tag_dispatch_first_tag_wins() -> None:
    # "ab" completes before "abc": the text "abc" dispatches to a's rule at "ab"
    both(
        'root ::= TagDispatch(("ab", a), ("abc", c), loop_after_dispatch=false)\na ::= "1"\nc ::= "2"',
        ["ab1", "xab1", "a", "abx"[:2] + "1"],
        ["abc2", "ab", "ab2"],
    )


# --------------------------------------------------------------------------- the macros' languages


def _tag_dispatch_spec(text: str, tags: dict[str, list[str]], loop: bool, excludes: list[str]) -> bool:
    """Direct definition: free text until the first completed tag, then one of the tag's
    strings, then again (or the end)."""

    def free_ok(s: str) -> bool:
        return not any(x in s for x in excludes)

    def from_(i: int) -> bool:
        for end in range(i + 1, len(text) + 1):
            done = [t for t in tags if end - len(t) >= i and text[end - len(t) : end] == t]
            if done:
                return any(
                    free_ok(text[i : end - len(t)])
                    and any(
                        text.startswith(body, end)
                        and (from_(end + len(body)) if loop else end + len(body) == len(text))
                        for body in tags[t]
                    )
                    for t in done
                )
        return free_ok(text[i:])

    return from_(0)


@settings(max_examples=150, deadline=None)
@given(
    tags=st.dictionaries(
        st.text("ab<", min_size=1, max_size=3),
        st.lists(st.text("ab>", max_size=2), min_size=1, max_size=2),
        min_size=0,
        max_size=3,
    ),
    excludes=st.lists(st.text("ab>", min_size=1, max_size=2), max_size=2),
    loop=st.booleans(),
    texts=st.lists(st.text("ab<>", max_size=8), min_size=1, max_size=12),
)
def test_tag_dispatch_language_is_its_definition(tags, excludes, loop, texts) -> None:
    excludes = [x for x in excludes if not any(t.startswith(x) for t in tags)]
    rules = {
        f"t{i}": ir.alt(*(ir.literal(b) if b else ir.EPSILON for b in bodies))
        for i, bodies in enumerate(tags.values())
    }
    pairs = [(tag, ir.Ref(f"t{i}")) for i, tag in enumerate(tags)]
    expr, helpers = ebnf_macros.tag_dispatch(pairs, "td", loop=loop, excludes=excludes)
    ref = ReferenceMatcher(ir.Grammar({"root": expr, **rules, **helpers}, "root"))
    for text in texts:
        assert ref.accepts(text.encode()) == _tag_dispatch_spec(text, tags, loop, excludes), text


@settings(max_examples=100, deadline=None)
@given(
    chunks=st.lists(st.text("ab", max_size=2), max_size=4),
    texts=st.lists(st.text("ab", max_size=6), max_size=10),
)
def test_substring_language_is_its_definition(chunks, texts) -> None:
    expr, helpers = ebnf_macros.substring(chunks, "sub")
    ref = ReferenceMatcher(ir.Grammar({"root": expr, **helpers}, "root"))
    runs = {"".join(chunks[i:j]) for i in range(len(chunks) + 1) for j in range(i, len(chunks) + 1)}
    for text in [*texts, *runs]:
        assert ref.accepts(text.encode()) == (text in runs), text


@settings(max_examples=150, deadline=None)
@given(
    body=exprs(["r1"], SMALL, max_leaves=5, big_repeats=False),
    texts=st.lists(st.text("abé", max_size=4), max_size=12),
)
def test_lazy_language_is_its_definition(body, texts) -> None:
    """The shortest matches: in the body's language, and no proper prefix is."""
    rules = {"r1": ir.literal("b")}
    try:
        expr, helpers = shortest_matches(body, rules, "lazy")
    except NotTerminalLike:  # a byte class: no such thing in EBNF text
        return
    full = ReferenceMatcher(ir.Grammar({"root": body, **rules}, "root"))
    lazy = ReferenceMatcher(ir.Grammar({"root": expr, **rules, **helpers}, "root"))
    for text in texts:
        first = full.accepts(text.encode()) and not any(
            full.accepts(text[:k].encode()) for k in range(len(text))
        )
        assert lazy.accepts(text.encode()) == first, text


@pytest.mark.parametrize("pattern", [r"\S+", r"[^x]*", r"a.c|\\.", r'"?\w*', r"[\x00-\x7f]{0,3}"])
def test_json_string_regex_is_the_pattern_minus_escaped_characters(pattern: str) -> None:
    g = ebnf(f"root ::= Regex({_quote(pattern)}, json_string=true)")
    ref = ReferenceMatcher(g)
    for text in ["", "abc", 'a"', "a\\", "\\.", "\n", "\x1f", "é", "x", '"', "a\tc", "abc\x7f"]:
        expected = bool(re.fullmatch(pattern, text, re.S | re.A)) and not re.search(r'[\x00-\x1f"\\]', text)
        assert ref.accepts(text.encode()) == expected, text


def _quote(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


# --------------------------------------------------------------------------- tokens


def test_token_macros_mask_whole_tokens() -> None:
    vocab = cfgmask.Vocabulary.from_token_bytes(
        [b"a", b"b", b"<t>", b"x", b"<end>"], special_token_ids=[2, 4]
    )
    g = cfgmask.Grammar.from_ebnf("root ::= Token(2) ExcludeToken(0, 2, 4) Token(4, 4)")
    m = cfgmask.Matcher(cfgmask.compile(g, vocab))
    assert not m.accept_token(0)
    assert m.accept_token(2)
    assert not m.accept_token(0) and not m.accept_token(4)
    assert m.accept_token(3) and m.accept_token(4) and m.is_accepting()


def test_token_tag_dispatch() -> None:
    vocab = cfgmask.Vocabulary.from_token_bytes(
        [b"a", b"b", b"<t>", b"{}", b"</s>"], special_token_ids=[2, 4]
    )
    g = cfgmask.Grammar.from_ebnf('root ::= TokenTagDispatch((2, call), excludes=(4,))\ncall ::= "{}"')
    compiled = cfgmask.compile(g, vocab)
    m = cfgmask.Matcher(compiled)
    assert m.accept_token(0) and m.accept_token(1) and m.is_accepting()
    assert not m.accept_token(4)  # excluded
    assert m.accept_token(2) and not m.is_accepting()  # dispatched: the rule must follow
    assert not m.accept_token(0)
    assert m.accept_token(3) and m.is_accepting() and m.accept_token(0)  # free tokens again
    once = cfgmask.Grammar.from_ebnf(
        'root ::= TokenTagDispatch((2, call), loop_after_dispatch=false)\ncall ::= "{}"'
    )
    m = cfgmask.Matcher(cfgmask.compile(once, vocab))
    assert m.accept_token(2) and m.accept_token(3) and m.is_accepting() and not m.accept_token(0)


def test_gbnf_token_text_is_resolved_at_compile_time() -> None:
    vocab = cfgmask.Vocabulary.from_token_bytes(
        [b"a", b"<|im_end|>", b"<|im_end|>", b"b"], special_token_ids=[2], stop_token_ids=[]
    )
    for front in (cfgmask.Grammar.from_gbnf, cfgmask.Grammar.from_ebnf):
        m = cfgmask.Matcher(cfgmask.compile(front("root ::= [ab]+ <|im_end|> !<|im_end|>"), vocab))
        assert m.accept_token(0) and not m.accept_token(1)  # the special id wins over the text twin
        assert m.accept_token(2) and not m.accept_token(2) and m.accept_token(1) and m.is_accepting()
    with pytest.raises(GrammarError) as info:
        cfgmask.compile(cfgmask.Grammar.from_gbnf('root ::= "a"\n  | <|eot|>'), vocab)
    assert "'<|eot|>' is not a single token" in str(info.value)
    assert (info.value.line, info.value.column) == (2, 5)


# --------------------------------------------------------------------------- errors

MALFORMED = [
    ('root ::= "a"\nroot ::= "b"', "rule 'root' is defined twice", 2, 1),
    ("root ::= [z-a]", "bad character range", 1, 11),
    ('root ::= "a"++', "a second quantifier needs parentheses", 1, 14),
    ('root ::= "a\nb"', "raw newline", 1, 12),
    ("root ::= [a\n]", "raw newline", 1, 12),
    (r"root ::= [\d]", "not supported in a character class", 1, 11),
    ('root ::= "a"{2,-3}', "expected '}'", 1, 16),
    ('root ::= x\nx[lazy] ::= "a" x | "b"', "a lazy rule must be terminal-like: rule 'x' is recursive", 2, 3),
    ("root[lazy] ::= Token(1)", "a lazy rule must be terminal-like", 1, 6),
    ('root[max_tokens=5] ::= "a"', "'max_tokens' bounds each occurrence", 1, 6),
    ('root[max_chars=5] ::= "a"', "'max_chars'", 1, 6),
    ('root[colour=5] ::= "a"', "unknown rule attribute 'colour'", 1, 6),
    ('root[capture=""] ::= "a"', "bad value", 1, 6),
    ('root[capture, capture] ::= "a"', "given twice", 1, 15),
    ('root ::= "a" (= "b" | "c")', "no '|'", 1, 21),
    ('root ::= "a" (= ("b" | "c"))', "no '|' inside it either", 1, 14),
    ('root ::= "a" (= )', "empty lookahead", 1, 14),
    ('root ::= "a" (= "b") "c"', "unexpected character '\"'", 1, 22),
    ('root ::= "a" (= Regex("b"))', "cannot be used in a lookahead", 1, 17),
    ('root ::= Regex("a", "b")', "exactly one pattern", 1, 10),
    ('root ::= Regex("(a")', "Regex: ", 1, 16),
    ('root ::= Regex("a", flags="x")', "flag 'x' is not supported", 1, 27),
    ('root ::= Regex("a", json_string=1)', "json_string must be true or false", 1, 33),
    ('root ::= Regex("a", wat=1)', "no argument 'wat'", 1, 25),
    ("root ::= Substring(1)", "every argument is a string", 1, 20),
    ('root ::= Substring("a",)', "expected a macro argument", 1, 24),
    ('root ::= TagDispatch("a")', "each positional argument is a pair", 1, 22),
    ('root ::= TagDispatch(("", r))\nr ::= "x"', "a tag is a non-empty string", 1, 23),
    ('root ::= TagDispatch(("<t>", nope))', "undefined rule 'nope'", 1, 30),
    ('root ::= TagDispatch(("<t>", r), excludes=("<",))\nr ::= "x"', "prefix of the tag", 1, 43),
    ("root ::= Token()", "needs at least one token id", 1, 10),
    ("root ::= Token(-1)", "non-negative integer", 1, 16),
    ('root ::= TokenTagDispatch((1, r), excludes=(1,))\nr ::= "x"', "also excluded", 1, 44),
    ("root ::= Regex", "expected '(' after macro Regex", 1, 15),
]


@pytest.mark.parametrize(("text", "message", "line", "column"), MALFORMED)
def test_malformed(text: str, message: str, line: int, column: int) -> None:
    with pytest.raises(GrammarError) as info:
        cfgmask.Grammar.from_ebnf(text)
    err = info.value
    assert message in err.message
    assert (err.line, err.column) == (line, column), str(err)
    assert "^" in str(err)


def test_plain_gbnf_keeps_llama_cpp_rules() -> None:
    """What the dialect changes stays out of from_gbnf."""
    g = cfgmask.Grammar.from_gbnf('root ::= "a"\nroot ::= "b"')  # llama.cpp: last definition wins
    check(g.ir, ["b"], ["a"])
    for text in ('root ::= Regex("a")', r'root ::= "\e"', 'root ::= "a"{2, -1}', 'root[capture] ::= "a"'):
        with pytest.raises(GrammarError):
            cfgmask.Grammar.from_gbnf(text)


# --------------------------------------------------------------------------- against xgrammar

# (grammar, strings): every construct above, run through xgrammar's own matcher.
DIFFERENTIAL = [
    *((text, [*acc, *rej]) for text, acc, rej in CASES),
    (TAGS, ["<tool_call>{}", "a<code>``````b", "<tool_call>", "x<tool_ca", "<code>x"]),
    (
        'root ::= TagDispatch(("ab", a), ("abc", c), loop_after_dispatch=false)\na ::= "1"\nc ::= "2"',
        ["ab1", "abc2", "xab1", "ab"],
    ),
    ('root ::= TagDispatch(("<t>", r), excludes=("t>",))\nr ::= "1"', ["<t>1", "a<t>1", "t>"]),
    (
        'root ::= body "</a>"\nbody ::= TagDispatch(("<t>", b), excludes=("</a>",))\nb ::= "{}"',
        ["x</a>", "<t>{}</a>", "x</a>y</a>"],
    ),
]

# Where xgrammar 0.2.9 and its documentation part, cfgmask follows the documentation:
KNOWN_DISAGREEMENTS: dict[tuple[str, str], str] = {
    (DIFFERENTIAL[-3][0], "abc2"): (
        "tag 'ab' is a prefix of tag 'abc'.  The documentation dispatches when a complete tag "
        "appears, and free text may not contain a tag, so after 'ab' rule a must follow; "
        "xgrammar 0.2.9 also lets the text go on to complete 'abc'."
    ),
    **{
        (DIFFERENTIAL[-2][0], text): (
            "the excluded 't>' ends inside the tag '<t>': the documentation excludes it from the free "
            "text only; xgrammar 0.2.9 rejects it anywhere, so the tag can never dispatch."
        )
        for text in ("<t>1", "a<t>1")
    },
}


# Grammars xgrammar 0.2.9 refuses that cfgmask reads, and why cfgmask is right to:
XGRAMMAR_REFUSES = {
    'root ::= Regex("a[^]")': "ECMAScript's [^] is any character; xgrammar: 'Empty character class'",
}


def test_against_xgrammar() -> None:
    xgr = pytest.importorskip("xgrammar")
    from xgrammar.testing import _is_grammar_accept_string

    agree, refused, disagree = 0, 0, []
    for text, strings in DIFFERENTIAL:
        ours = EngineRecognizer(cfgmask.Grammar.from_ebnf(text))
        try:
            theirs = xgr.Grammar.from_ebnf(text)
            results = [bool(_is_grammar_accept_string(theirs, s)) for s in strings]
        except RuntimeError:
            assert text in XGRAMMAR_REFUSES, text
            refused += 1
            continue
        for s, b in zip(strings, results, strict=True):
            a = ours.accepts(s.encode())
            if a == b:
                agree += 1
            elif (text, s) not in KNOWN_DISAGREEMENTS:
                disagree.append((text, s, a, b))
    assert not disagree, "\n".join(f"{t!r} on {s!r}: cfgmask {a}, xgrammar {b}" for t, s, a, b in disagree)
    total = sum(len(strings) for text, strings in DIFFERENTIAL if text not in XGRAMMAR_REFUSES)
    assert agree == total - len(KNOWN_DISAGREEMENTS)  # every known disagreement still holds
    assert refused == len(XGRAMMAR_REFUSES)


# --------------------------------------------------------------------------- command line


def test_cli_check_reads_ebnf_files(tmp_path, capsys) -> None:
    from cfgmask import cli

    path = tmp_path / "calls.ebnf"
    path.write_text('root ::= TagDispatch(("<t>", r))\nr ::= Regex("[0-9]+") "</t>"\n')
    assert cli.main(["check", str(path), "--vocab", "bytes"]) == 0
    assert "XGrammar EBNF" in capsys.readouterr().out
    bad = tmp_path / "bad.ebnf"
    bad.write_text('root ::= "a"\nitem[max_tokens=5] ::= [a-z]+\n')
    assert cli.main(["check", str(bad), "--vocab", "bytes"]) == 1
    err = capsys.readouterr().err
    assert "'max_tokens'" in err and "line 2, column 6" in err and "^" in err


def test_cli_check_resolves_gbnf_token_texts(tmp_path, capsys) -> None:
    """llama.cpp's <|eot_id|>: compiled against the vocabulary the command uses."""
    from cfgmask import cli

    path = tmp_path / "eot.gbnf"
    path.write_text("root ::= [a-z]+ <|eot_id|>\n")
    assert cli.main(["check", str(path), "--vocab", "bytes"]) == 1  # the byte vocabulary has no such token
    assert (
        "'<|eot_id|>' is not a single token of the vocabulary (line 1, column 17)" in capsys.readouterr().err
    )
    pytest.importorskip("quicktok")
    assert cli.main(["check", str(path), "--vocab", "llama3"]) == 0  # Llama-3 has it
