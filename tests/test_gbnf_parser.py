"""The GBNF front end: llama.cpp's parser vectors, its shipped grammars, error positions
and the exact IR of small grammars."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import cfgmask
from cfgmask import ir
from cfgmask.errors import GrammarError, LimitError
from cfgmask.frontends.gbnf import parse_gbnf
from cfgmask.grammar import Grammar

from .helpers import check

LLAMA = Path(__file__).parent / "corpora" / "llama.cpp"


def _load(name: str) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = json.loads((LLAMA / "vectors" / name).read_text(encoding="utf-8"))
    return records


PARSER_VECTORS = _load("grammar_parser.json")
# Six nested {0,99}: llama.cpp refuses it while parsing (its rule-expansion limit).  Our
# parser keeps repetitions symbolic, so the limit belongs to the compiler (LimitError).
RESOURCE_LIMIT = "parser_test_1"


def _vector_id(record: dict[str, Any]) -> str:
    return str(record["name"])


def _vectors(*expects: str) -> list[dict[str, Any]]:
    return [r for r in PARSER_VECTORS if r["expect"] in expects and r["name"] != RESOURCE_LIMIT]


# -- llama.cpp's parser vectors ---------------------------------------------------------


@pytest.mark.parametrize("record", _vectors("parse_ok", "build_ok"), ids=_vector_id)
def test_vector_parses(record: dict[str, Any]) -> None:
    g = parse_gbnf(record["grammar"], start=record.get("root_symbol", "root"))
    # llama.cpp's symbol table holds the written rules plus generated ones (root_1, ...).
    symbols = record.get("expected_symbol_ids", {})
    written = {name for name in symbols if not name.rpartition("_")[2].isdigit()}
    assert written <= set(g.rules)


@pytest.mark.parametrize("record", _vectors("parse_fail"), ids=_vector_id)
def test_vector_parse_fails(record: dict[str, Any]) -> None:
    with pytest.raises(GrammarError):
        parse_gbnf(record["grammar"], start=record.get("root_symbol", "root"))


@pytest.mark.parametrize("record", _vectors("build_fail"), ids=_vector_id)
def test_vector_build_fail(record: dict[str, Any]) -> None:
    start = record.get("root_symbol", "root")
    if record["name"].startswith("left recursion"):
        # llama.cpp's stack-based matcher rejects left recursion when it builds the
        # grammar; our Earley core accepts it, so these grammars must parse here.
        g = parse_gbnf(record["grammar"], start=start)
        assert start in g.rules
    else:
        with pytest.raises(GrammarError, match=f"start rule {start!r} is not defined"):
            parse_gbnf(record["grammar"], start=start)


@pytest.mark.parametrize("record", _vectors("parse_ok_no_root"), ids=_vector_id)
def test_vector_parses_without_root(record: dict[str, Any]) -> None:
    with pytest.raises(GrammarError, match="start rule 'root' is not defined"):
        parse_gbnf(record["grammar"])
    assert parse_gbnf(record["grammar"], start="rot").start == "rot"


def test_vector_set_is_complete() -> None:
    assert len(PARSER_VECTORS) == 27
    assert sum(r["name"] == RESOURCE_LIMIT for r in PARSER_VECTORS) == 1


def test_resource_limit_vector_parses() -> None:
    """The parser's part of the six-deep {0,99} vector: it keeps the nesting as written."""
    (record,) = [r for r in PARSER_VECTORS if r["name"] == RESOURCE_LIMIT]
    g = parse_gbnf(record["grammar"])
    depth, e = 0, g.rules["root"]
    while isinstance(e, ir.Repeat):
        depth, e = depth + 1, e.item
    assert depth == 7  # six {0,99} around [^x]*


def test_resource_limit_vector_fails_at_parse_or_compile() -> None:
    """llama.cpp rejects the six-deep {0,99} vector; we must reject it at parse or compile."""
    (record,) = [r for r in PARSER_VECTORS if r["name"] == RESOURCE_LIMIT]
    vocab = cfgmask.Vocabulary.from_token_bytes([bytes([b]) for b in range(256)])
    with pytest.raises((GrammarError, LimitError)):
        cfgmask.compile(Grammar.from_gbnf(record["grammar"]), vocab)


# -- whole grammars that must parse -----------------------------------------------------


@pytest.mark.parametrize("path", sorted((LLAMA / "grammars").glob("*.gbnf")), ids=lambda p: p.name)
def test_llama_cpp_grammar_parses(path: Path) -> None:
    g = parse_gbnf(path.read_text(encoding="utf-8"))
    assert "root" in g.rules


def test_llama_cpp_grammar_count() -> None:
    assert len(list((LLAMA / "grammars").glob("*.gbnf"))) == 8


def test_integration_vector_grammars_parse() -> None:
    records = [r for r in _load("grammar_integration.json") if r["kind"] == "gbnf"]
    assert len(records) == 14
    for r in records:
        parse_gbnf(r["grammar"])


INTEGRATION_TEXT = [
    r for r in _load("grammar_integration.json") if r["kind"] == "gbnf" and not r.get("requires_token_ids")
]


@pytest.mark.parametrize("record", INTEGRATION_TEXT, ids=_vector_id)
def test_integration_vector_language(record: dict[str, Any]) -> None:
    """Parsed grammars mean what llama.cpp means: its pass/fail strings, by the reference."""
    check(parse_gbnf(record["grammar"]), accepts=record["pass"], rejects=record["fail"])


def test_json_schema_converter_output_parses() -> None:
    records = [r for r in _load("json_schema_to_grammar.json") if r["expected_status"] == "SUCCESS"]
    assert len(records) == 73
    for r in records:
        parse_gbnf(r["expected_gbnf"])


# -- malformed grammars: message and exact position ------------------------------------

MALFORMED: list[tuple[str, str, int, int]] = [
    # (grammar, message substring, line, column)
    ('root ::= "abc', "unterminated string literal", 1, 10),
    ("root ::= [abc", "unterminated character class", 1, 10),
    ("root ::= [a-", "unterminated character class", 1, 10),
    ('root ::= ("a" "b"', "unclosed '('", 1, 10),
    ('root ::= a\na ::= "x" |\n  ( "y"\n', "unclosed '('", 3, 3),
    ('root ::= "a")', "unmatched ')'", 1, 13),
    ('root ::= "a"\n  # comment\n  ) "b"', "unmatched ')'", 3, 3),
    ('root ::= ( "a" ] )', "unexpected character ']'", 1, 16),
    ('root ::= "a" @', "unexpected character '@'", 1, 14),
    ('root ::= "\\q"', "unknown escape '\\q'", 1, 11),
    ('root ::= "\\/"', "unknown escape '\\/'", 1, 11),
    ('root ::= "\\', "unfinished escape at end of input", 1, 11),
    ('root ::= "\\x4"', "'\\x' needs exactly 2 hex digits", 1, 11),
    ("root ::= [\\u12G4]", "'\\u' needs exactly 4 hex digits", 1, 11),
    ('root ::= "\\uD800"', "U+D800 is not a Unicode scalar value", 1, 11),
    ('root ::= "\\U00110000"', "U+110000 is not a Unicode scalar value", 1, 11),
    ("root ::= []", "empty character class", 1, 10),
    ('root ::= "a"{,}', "expected an integer after '{'", 1, 14),
    ('root ::= "a"{,10}', "expected an integer after '{'", 1, 14),
    ('root ::= "a"{3,2}', "bad repetition bounds {3,2}", 1, 13),
    ('root ::= "a"{2', "expected ',' or '}'", 1, 15),
    ('root ::= "a"{2,3 "b"', "expected '}'", 1, 18),
    ('root ::= *"a"', "nothing to repeat before '*'", 1, 10),
    ('root ::= "" +', "nothing to repeat before '+'", 1, 13),
    ("root ::= foo", "undefined rule 'foo'", 1, 10),
    ('root ::= "a"\nunused ::= "b" missing', "undefined rule 'missing'", 2, 16),
    ("root ::= <[abc]>", "expected a token id after '<['", 1, 12),
    ("root ::= <[12]", "expected ']>'", 1, 14),
    ("root ::= <eos", "unterminated token '<...>'", 1, 10),
    ("root ::= !<eos\n>", "unterminated token '<...>'", 1, 10),
    ('root ::= !"a"', "expected '<' after '!'", 1, 11),
    ('::= "a"', "expected a rule name", 1, 1),
    ('root "a"', "expected '::=' after rule name 'root'", 1, 6),
    ('root ::= "a" b ::= "c"', "must start on a new line", 1, 14),
]


@pytest.mark.parametrize(("text", "message", "line", "column"), MALFORMED)
def test_malformed(text: str, message: str, line: int, column: int) -> None:
    with pytest.raises(GrammarError) as info:
        parse_gbnf(text)
    err = info.value
    assert message in err.message
    assert (err.line, err.column) == (line, column)
    assert "^" in str(err)


@pytest.mark.parametrize("text", ["", "   \n\t\n", "# only a comment\n# and another"])
def test_empty_grammar(text: str) -> None:
    with pytest.raises(GrammarError, match="empty grammar"):
        parse_gbnf(text)


def test_missing_start_rule_is_named() -> None:
    with pytest.raises(GrammarError, match="start rule 'main' is not defined"):
        parse_gbnf('root ::= "a"', start="main")


def test_nesting_limit() -> None:
    with pytest.raises(GrammarError, match="nested deeper"):
        parse_gbnf("root ::= " + "(" * 500 + '"a"' + ")" * 500)
    parse_gbnf("root ::= " + "(" * 50 + '"a"' + ")" * 50)


# -- exact IR ---------------------------------------------------------------------------

A, B, C, X = (ir.Literal(c.encode()) for c in "abcx")
ANY = ir.char_class([(0, ir.MAX_CODE_POINT)])


def rules(text: str, start: str = "root") -> dict[str, ir.Expr]:
    return parse_gbnf(text, start=start).rules


def test_ir_repetition_bounds() -> None:
    assert rules('root ::= [a-c]{2,4} "x"?') == {
        "root": ir.Seq((ir.Repeat(ir.CharClass(((0x61, 0x63),)), 2, 4), ir.Repeat(X, 0, 1)))
    }
    assert rules('root ::= "a"{ 4}')["root"] == ir.Repeat(A, 4, 4)
    assert rules('root ::= "a"{2,}')["root"] == ir.Repeat(A, 2, None)
    assert rules('root ::= "a"{ 0 , 5000 }')["root"] == ir.Repeat(A, 0, 5000)
    assert rules('root ::= "a"*')["root"] == ir.Repeat(A, 0, None)
    assert rules('root ::= "a"+')["root"] == ir.Repeat(A, 1, None)
    assert rules('root ::= "ab"*')["root"] == ir.Repeat(ir.Literal(b"ab"), 0, None)
    assert rules('root ::= "a"*?')["root"] == ir.Repeat(ir.Repeat(A, 0, None), 0, 1)
    assert rules('root ::= "a" *')["root"] == ir.Repeat(A, 0, None)


def test_ir_alternatives_and_classes() -> None:
    assert rules('root ::= "a" | [bdx-z] | [^1-3]')["root"] == ir.Alt(
        (
            A,
            ir.CharClass(((0x62, 0x62), (0x64, 0x64), (0x78, 0x7A))),
            ir.char_class([(0x31, 0x33)], negate=True),
        )
    )
    assert rules("root ::= .")["root"] == ANY
    assert rules("root ::= [a-]")["root"] == ir.CharClass(((0x2D, 0x2D), (0x61, 0x61)))
    assert rules("root ::= [-a]")["root"] == ir.CharClass(((0x2D, 0x2D), (0x61, 0x61)))
    assert rules("root ::= [z-a]")["root"] == ir.CharClass(())  # llama.cpp: matches nothing
    assert rules('root ::= ["[]')["root"] == ir.CharClass(((0x22, 0x22), (0x5B, 0x5B)))
    assert rules("root ::= [\\x00-\\U0010FFFF]")["root"] == ANY


def test_ir_escapes() -> None:
    text = 'root ::= "\\x41\\u00e9\\U0001F600\\t\\r\\n\\\\\\"\\[\\]\\-" [\\]\\[\\-\\"]'
    assert rules(text)["root"] == ir.Seq(
        (
            ir.literal('A\u00e9\U0001f600\t\r\n\\"[]-'),
            ir.CharClass(((0x22, 0x22), (0x2D, 0x2D), (0x5B, 0x5B), (0x5D, 0x5D))),
        )
    )
    # \xHH is a code point, not a byte: U+00FF is UTF-8 encoded.
    assert rules('root ::= "\\xff"')["root"] == ir.Literal(b"\xc3\xbf")
    assert rules('root ::= "é€"')["root"] == ir.Literal("é€".encode())


def test_ir_empty_forms() -> None:
    assert rules('root ::= ""')["root"] == ir.EPSILON
    assert rules("root ::= ")["root"] == ir.EPSILON
    assert rules("root ::= ()")["root"] == ir.EPSILON
    assert rules("root ::= ()*")["root"] == ir.Repeat(ir.EPSILON, 0, None)
    assert rules('root ::= "x" | ')["root"] == ir.Alt((X, ir.EPSILON))
    assert rules('root ::= | "x"')["root"] == ir.Alt((ir.EPSILON, X))
    assert rules('root ::= "a" "" "b"')["root"] == ir.Seq((A, B))


def test_ir_tokens() -> None:
    assert rules("root ::= <[1000]> !<[1001]> <[1001]>")["root"] == ir.Seq(
        (ir.Token((1000,), False), ir.Token((1001,), True), ir.Token((1001,), False))
    )
    assert rules("root ::= (!<[11]>)*")["root"] == ir.Repeat(ir.Token((11,), True), 0, None)


def test_ir_layout_groups_and_comments() -> None:
    text = (
        "# leading comment\n"
        "root ::= (  # a group over lines\n"
        '    "a" |\n'
        '    "b"\n'
        "  )+ tail\n"
        "\n"
        'tail ::= "c" |\n'
        'x-y_2 ::= "x"#no space before comment\n'
    )
    assert rules(text) == {
        "root": ir.Seq((ir.Repeat(ir.Alt((A, B)), 1, None), ir.Ref("tail"))),
        "tail": ir.Alt((C, ir.EPSILON)),
        "x-y_2": X,
    }


def test_ir_rule_bodies_continue_on_later_lines() -> None:
    text = 'root ::= "a"\n    "b"\n  | "c"\nother ::= "x"'
    assert rules(text) == {"root": ir.Alt((ir.Seq((A, B)), C)), "other": X}


def test_crlf_line_endings() -> None:
    assert rules('root ::= "a" b\r\nb ::= "b"\r\n') == {"root": ir.Seq((A, ir.Ref("b"))), "b": B}


def test_duplicate_rule_keeps_last_definition() -> None:
    g = parse_gbnf('root ::= a\na ::= "a"\na ::= "b"')
    assert g.rules["a"] == B  # llama.cpp overwrites the earlier definition
    assert g.meta["redefined_rules"] == ["a"]
    assert g.meta["rule_offsets"] == {"root": 0, "a": 21}


def test_left_recursion_is_kept() -> None:
    assert rules('root ::= "a" | root "a"')["root"] == ir.Alt((A, ir.Seq((ir.Ref("root"), A))))


def test_custom_start_and_grammar_handle() -> None:
    g = Grammar.from_gbnf('foobar ::= "foobar"', start="foobar")
    assert g.start == "foobar"
    assert g.rules == {"foobar": ir.Literal(b"foobar")}
