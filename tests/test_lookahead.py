"""Lookahead markers: follow restrictions of Lark terminals checked by the parser at run time.

A keyword's ``(?!\\w)`` or a greedy terminal's longest match used to be compiled into the grammar
(the product with the restriction automaton, ``lark_follow._Product``); now a terminal variant
is followed by a marker rule, and an Earley item owes the marker's *debt* on its next bytes
(csrc/earley.c).  The product stays as the fallback, and is the reference here: both must give
the same language, and on sql.lark with Llama-3 the same masks, step for step.  The engine must
also agree with Lark itself, and with the pure-Python reference's masks.
"""

from __future__ import annotations

from pathlib import Path

import lark
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import cfgmask
from cfgmask import ir
from cfgmask.compile.strategy import Strategy
from cfgmask.frontends import lark_follow

from .reference import ReferenceMatcher
from .strategies import token_walks, vocabularies
from .test_engine_differential import _replay_against_reference, _setup

ROOT = Path(__file__).resolve().parent.parent
SQL = (ROOT / "grammars" / "sql.lark").read_text()


def product_ir(text: str) -> ir.Grammar:
    """The grammar as the product with the restriction automaton (no markers)."""
    saved = lark_follow._with_markers
    lark_follow._with_markers = lambda variants, ignore, opaque: None  # type: ignore[assignment]
    try:
        return cfgmask.Grammar.from_lark(text).ir
    finally:
        lark_follow._with_markers = saved  # type: ignore[assignment]


def markers(g: ir.Grammar) -> list[ir.Lookahead]:
    """The lookaheads in the grammar's rules."""
    out: list[ir.Lookahead] = []
    stack = list(g.rules.values())
    while stack:
        e = stack.pop()
        if isinstance(e, ir.Lookahead):
            out.append(e)
        elif isinstance(e, (ir.Seq, ir.Alt)):
            stack.extend(e.items)
        elif isinstance(e, ir.Repeat):
            stack.append(e.item)
    return out


def lark_accepts(text: str, s: str) -> bool:
    try:
        lark.Lark(text, parser="earley", lexer="dynamic").parse(s)
    except lark.exceptions.LarkError:
        return False
    return True


def engine_accepts(compiled: cfgmask.CompiledGrammar, data: bytes) -> bool:
    m = cfgmask.Matcher(compiled)
    return m.accept_bytes(data) and m.is_accepting()


KEYWORDS = (
    'start: stmt+\nstmt: "if" NAME | NAME "=" NAME | KW NAME\nKW: /do(?!\\w)/\nNAME: /[a-z]+/\n%ignore " "'
)


def test_sql_lark_uses_markers_and_is_smaller() -> None:
    marked, product = cfgmask.Grammar.from_lark(SQL).ir, product_ir(SQL)
    assert markers(marked) and not markers(product)
    assert len(marked.rules) * 5 < len(product.rules)


def test_no_ignore_no_markers() -> None:
    """Without an %ignore terminal a marker could leave an item with no way on (a dead end the
    product trims): such grammars keep the product."""
    text = "start: (A | B)+\nA: /a+(?!b)/\nB: /b/"
    assert not markers(cfgmask.Grammar.from_lark(text).ir)


@given(st.lists(st.text(st.sampled_from("ifdo=ab "), max_size=10), min_size=1, max_size=10))
def test_keywords_engine_equals_lark(strings: list[str]) -> None:
    g = cfgmask.Grammar.from_lark(KEYWORDS)
    assert markers(g.ir)
    compiled = cfgmask.compile(g, cfgmask.Vocabulary.from_token_bytes([bytes([b]) for b in range(256)]))
    for s in strings:
        assert engine_accepts(compiled, s.encode()) == lark_accepts(KEYWORDS, s), s


@given(
    vocabularies(
        (b"i", b"f", b"d", b"o", b"=", b"a", b"b", b" ", b"if", b"do", b"do ", b" a", b"a=", b"ab ")
    ),
    st.data(),
)
def test_keywords_masks_equal_reference(v, data) -> None:
    """Masks under a grammar with markers, against the reference (which reads markers from the
    text itself), along random token walks."""
    g = cfgmask.Grammar.from_lark(KEYWORDS).ir
    ref, _, compiled = _setup(g, v)
    assert compiled is not None
    _replay_against_reference(compiled, ref, v, data.draw(token_walks(ref, v, max_steps=10)))


UNICODE_CASES = [
    "SELECT\u2000a FROM t",  # U+2000 is a space: SELECT may be followed by it
    "SELECT\u212a FROM t",  # KELVIN SIGN is \w (and a NAME, under /i): not after SELECT
    "SELECT a\u3000FROM t",
    "SELECT \u212a FROM t",  # a NAME
    "SELECT a FROM t\u0085",
    "SELECT a FROM t --x\u2028",
    "SELECT a FROM t WHERE a = 1\u00a0",
]


@pytest.mark.parametrize("s", UNICODE_CASES)
def test_sql_lark_unicode_lookahead_equals_lark(s: str) -> None:
    """Where a forbidden character and an allowed one share their first byte (U+212A and the
    spaces U+2000.. all start with 0xE2), the debt is paid or broken by a later byte."""
    vocab = cfgmask.Vocabulary.from_token_bytes([bytes([b]) for b in range(256)])
    compiled = cfgmask.compile(cfgmask.Grammar.from_lark(SQL), vocab)
    assert engine_accepts(compiled, s.encode()) == lark_accepts(SQL, s)
    assert ReferenceMatcher(cfgmask.Grammar.from_lark(SQL).ir).accepts(s.encode()) == lark_accepts(SQL, s)


def test_sql_lark_markers_mask_like_the_product() -> None:
    """Llama-3, every step of SQL queries (and a Kelvin sign after SELECT): the masks of the
    marker grammar equal those of the product grammar."""
    quicktok = pytest.importorskip("quicktok")
    enc = quicktok.get_encoding("llama3")
    vocab = cfgmask.Vocabulary.llama3()
    marked = cfgmask.compile(cfgmask.Grammar.from_lark(SQL), vocab)
    memo = cfgmask.compile(  # the whole-mask memo on every step: its key must see the bytes debts read
        cfgmask.Grammar.from_lark(SQL), vocab, _strategy=Strategy(mask_memo_min_items=1)
    )
    product = cfgmask.compile(cfgmask.Grammar(product_ir(SQL)), vocab)
    a, b, c = (cfgmask.allocate_bitmask(1, vocab.size) for _ in range(3))
    queries = [
        "SELECT id, name FROM users WHERE active = 1;",
        "select count(*) as n from t group by c having count(*) > 5 order by n desc",
        "INSERT INTO t (a, b) VALUES ('x''y', 1.5e3);",
        "SELECT a FROM t -- note\nWHERE b IS NOT NULL",
    ]
    for q in queries:
        m, p, r = cfgmask.Matcher(marked), cfgmask.Matcher(product), cfgmask.Matcher(memo)
        for t in [*enc.encode_ordinary(q), None]:
            m.fill_bitmask(a)
            p.fill_bitmask(b)
            r.fill_bitmask(c)
            assert np.array_equal(a, b), (q, t)
            assert np.array_equal(a, c), (q, t)
            if t is None:
                break
            assert m.accept_token(t) and p.accept_token(t) and r.accept_token(t)
        assert m.is_accepting()
    for prefix in (b"SELECT", b"SELECT\xe2", b"SELECT a", b"SELECT 1"):
        m, p = cfgmask.Matcher(marked), cfgmask.Matcher(product)
        assert m.accept_bytes(prefix) and p.accept_bytes(prefix)
        m.fill_bitmask(a)
        p.fill_bitmask(b)
        assert np.array_equal(a, b), prefix


SQL_ALPHABET = [
    "SELECT",
    "FROM",
    "a",
    "t",
    " ",
    ",",
    "1",
    "'x'",
    "(",
    ")",
    "=",
    "--",
    "\n",
    "\u2000",
    "\u212a",
    "\u0131",
]


@pytest.fixture(scope="module")
def sql_both() -> tuple[cfgmask.CompiledGrammar, cfgmask.CompiledGrammar]:
    vocab = cfgmask.Vocabulary.from_token_bytes([bytes([b]) for b in range(256)])
    marked = cfgmask.compile(cfgmask.Grammar.from_lark(SQL), vocab)
    return marked, cfgmask.compile(cfgmask.Grammar(product_ir(SQL)), vocab)


@given(st.lists(st.sampled_from(SQL_ALPHABET), max_size=12))
def test_sql_lark_markers_accept_like_the_product(sql_both, pieces: list[str]) -> None:
    """Random SQL-ish text (Unicode spaces, a KELVIN SIGN and a dotless i, which /[a-z]/i
    matches): the marker grammar accepts, and has as viable prefixes, what the product does,
    byte by byte."""
    marked, product = sql_both
    data = "".join(pieces).encode()
    m, p = cfgmask.Matcher(marked), cfgmask.Matcher(product)
    for i in range(len(data)):
        assert m.can_accept_bytes(data[i : i + 1]) == p.can_accept_bytes(data[i : i + 1]), data[: i + 1]
        if not m.accept_bytes(data[i : i + 1]):
            break
        assert p.accept_bytes(data[i : i + 1])
    else:
        assert m.is_accepting() == p.is_accepting() == lark_accepts(SQL, data.decode()), data


def test_lark_example_grammars_engine_equals_lark() -> None:
    """The corpus's inline Lark examples that compile with markers: the engine's verdicts on
    their vectors equal Lark's."""
    from .test_lark_frontend import EXAMPLES_NOT_CONVERTED, _example_start, _examples, as_list

    vocab = cfgmask.Vocabulary.from_token_bytes([bytes([b]) for b in range(256)])
    checked = 0
    for rec in _examples():
        if rec["name"] in EXAMPLES_NOT_CONVERTED:
            continue
        text, start = rec["grammar"], _example_start(rec)
        g = cfgmask.Grammar.from_lark(text, start=start)
        if not markers(g.ir):
            continue
        compiled = cfgmask.compile(g, vocab)
        for s in as_list(rec.get("pass")) + as_list(rec.get("fail")):
            parser = lark.Lark(text, parser="earley", lexer="dynamic", start=start)
            try:
                parser.parse(s)
                expected = True
            except lark.exceptions.LarkError:
                expected = False
            assert engine_accepts(compiled, s.encode()) == expected, (rec["name"], s)
            checked += 1
    assert checked >= 5
