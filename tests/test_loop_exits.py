"""Loops that differ only in where they die share one walk (csrc/loops.c, find_loop).

After an operand, every level of an expression chain waits in its own copy of the blank run
(`ws` inlined), each leaving it on its own operators and dying on the others' bytes.  A loop's
shared walk records the subtrees that die as exits too, so those copies share one walk, and each
state's entry drops the exits its own row kills.  Here every state's entry, and every mask along
documents, is compared bit for bit with whole walks, on small vocabularies under hypothesis and
on Llama-3; `_core.loop_walks_past_dead()` counts the entries that took a walk made for a loop
leaving or dying elsewhere, so each test shows the shared walk was taken.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

import cfgmask
from cfgmask import _core

from .helpers import masks_along
from .strategies import Vocab, vocabularies
from .test_engine_differential import _vocab
from .test_entries import ROOT, WALKS_ONLY, _longest_tokens, assert_same_entries, entries

# Levels whose blank runs leave on different operators: after an operand the blanks of `sum`
# leave on + and -, those of `prod` on * and /, those of `pow` on ^, each dying on the others.
LEVELS = """root ::= ws sum ws
sum ::= prod ( ws [-+] ws prod )*
prod ::= pow ( ws [*/] ws pow )*
pow ::= atom ( ws "^" ws pow )?
atom ::= [0-9]+ | [a-c]+ | "(" ws sum ws ")"
ws ::= {ws}
"""
LEVELS_WS = ("[ \\t]*", '" "*', "[ ]*", "[ \\t\\n]*")
LEVELS_PIECES = (
    b" ", b"  ", b"\t", b" \t", b"\n", b" +", b" -", b" *", b" /", b" ^", b"  +", b" + ", b"+ ",
    b"1", b"12", b"a", b"ab", b" 1", b" a", b"(", b" (", b")", b" )", b"1)", b" 1)", b"a+", b" a*",
    b"+", b"-", b"*", b"/", b"^", b" ^2", b"\t*", b"  /", b" +(", b"1 ", b"a ", b") ",
)  # fmt: skip


def _levels(ws: str = "[ \\t]*") -> cfgmask.Grammar:
    return cfgmask.Grammar.from_gbnf(LEVELS.format(ws=ws))


def test_expression_levels_share_one_blank_walk_same_entries() -> None:
    """Every state's entry equal to whole walks, with the levels' blank runs on one walk."""
    vocab = cfgmask.Vocabulary.from_token_bytes(
        list(dict.fromkeys([bytes([c]) for c in b" \t1ab()+-*/^"])) + [p for p in LEVELS_PIECES if len(p) > 1]
    )
    before = _core.loop_walks_past_dead()
    assert_same_entries(_levels(), vocab)
    assert _core.loop_walks_past_dead() > before


@given(st.sampled_from(LEVELS_WS), vocabularies(LEVELS_PIECES))
def test_expression_levels_same_entries(ws: str, v: Vocab) -> None:
    assert_same_entries(_levels(ws), _vocab(v))


def _same_masks_along(g: cfgmask.Grammar, vocab: cfgmask.Vocabulary, text: bytes) -> None:
    """Masks along text, cold, equal to whole walks' (entries built in document order, so a
    level's blank run meets the walk another level made), then every other state's entry."""
    tokens = _longest_tokens(vocab, text)
    cfgmask.clear_caches()
    before = _core.loop_walks_past_dead()
    fast = cfgmask.compile(g, vocab)
    slow = cfgmask.compile(g, vocab, _strategy=WALKS_ONLY)
    for step, (a, b) in enumerate(
        zip(masks_along(fast, tokens, final=True), masks_along(slow, tokens, final=True), strict=True)
    ):
        assert np.array_equal(a, b), f"mask {step} differs after {vocab.decode(tokens[:step])!r}"
    assert _core.loop_walks_past_dead() > before
    for s, (a, b) in enumerate(zip(entries(fast), entries(slow), strict=True)):
        assert np.array_equal(a[0], b[0]), f"state {s}: accepted tokens differ"
        assert np.array_equal(a[1], b[1]), f"state {s}: uncertain tokens differ"


def test_expression_levels_llama3_same_masks() -> None:
    _same_masks_along(_levels(), cfgmask.Vocabulary.llama3(), b"(a + 12) * b ^ 2 - c / (1 + a)")


def test_c_statement_after_a_call_llama3_same_masks() -> None:
    """c.gbnf after `printf`: thirteen levels of the expression chain wait in their blank runs."""
    g = cfgmask.Grammar.from_gbnf((ROOT / "grammars" / "c.gbnf").read_text())
    _same_masks_along(
        g, cfgmask.Vocabulary.llama3(), b'int main(void) {\n    printf("%d\\n", a * b + 1);\n}\n'
    )


def test_sql_select_list_llama3_same_masks() -> None:
    g = cfgmask.Grammar.from_gbnf((ROOT / "grammars" / "sql.gbnf").read_text())
    _same_masks_along(g, cfgmask.Vocabulary.llama3(), b"SELECT id, name FROM users WHERE a = 1 AND b < 2;")
