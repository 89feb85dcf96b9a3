"""Run walks take a first byte's name tokens from the vocabulary's list (csrc/loops.c, run_scan_names).

A run that holds every name byte ([0-9A-Za-z_], an identifier's) reads each name entry of a first
byte's subtree -- that byte, then [A-Za-z_][A-Za-z0-9_]*, at most 16 bytes long -- to its end
inside, so the run walk of that subtree takes them from the vocabulary's name list (one OR of a bit
set where the first byte has many: vocab.c, cm_vocab_names) and reads only the other entries, for
the tokens that end inside and the subtrees that leave; the whole trie from such a run (a name
state's own walk) goes a first byte at a time, a byte outside the run one exit at depth 0.
arithmetic.gbnf's first mask walks every letter's subtree so (`call`'s start: an identifier,
blanks, then a parenthesis), its mask after `(a` the identifier's whole trie.  Here every
state's entry is compared bit for bit with whole walks and with run walks off
(`test_run_walks.assert_run_entries`: states asked forward, backward and shuffled, the vocabulary
keeping its run walks between them) on the shipped grammars with Llama-3 and on identifier
grammars over random vocabularies of names, names with a byte after them, names past 16 bytes,
digits and blanks; `_core.run_name_scans()` counts the walks that took the list, so the tests show
the path was taken.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

import cfgmask
from cfgmask import _core
from cfgmask.compile.strategy import Strategy

from .helpers import masks_along
from .strategies import Vocab, vocabularies
from .test_engine_differential import _vocab
from .test_entries import WALKS_ONLY, _longest_tokens, shipped
from .test_run_walks import EVERY_RUN, assert_run_entries

# Identifiers: the run [a-zA-Z0-9_] after a first byte, as a variable (the rule may end after
# it), a call (blanks and a parenthesis after it: the run's state does not accept) and a field
# access, beside numbers, parentheses and blanks.
IDENT = "[a-zA-Z_] [a-zA-Z0-9_]*"
NAMES = """root ::= ws item ( ws "," ws item )* ws
item ::= {items}
ws ::= {ws}
"""
NAME_ITEMS = (
    IDENT,
    f'{IDENT} ws "(" ws ")"',
    f'{IDENT} "." {IDENT}',
    '"(" ws item ws ")"',
    "[0-9]+",
    f'"-" {IDENT}',
)
NAME_WS = ("[ ]*", "[ \\t]*", "[ ]{0,2}")
NAME_PIECES = (
    b"a", b"ab", b"aB9", b"_x", b"Zz_1", b" a", b" ab", b" _", b"a(", b"ab(", b" a(", b"a b",
    b"a,", b"a )", b"a.", b"a.b", b"9a", b"a9", b"12", b"(", b")", b"()", b",", b", ", b" ",
    b"  ", b"\t", b"-a", b"-", b"abcdefghijklmnopq", b"a" * 20 + b"(", b" abcdefghijklmnop",
    b"x" * 15 + b"y", b"\xc3\xa9", b"a\xc3\xa9",
)  # fmt: skip


@st.composite
def name_grammars(draw: st.DrawFn) -> str:
    items = draw(st.lists(st.sampled_from(NAME_ITEMS), min_size=1, max_size=4, unique=True))
    if all("item" in i for i in items):
        items.append(IDENT)  # a base case
    return NAMES.format(items=" | ".join(items), ws=draw(st.sampled_from(NAME_WS)))


def test_arithmetic_first_mask_takes_names_llama3() -> None:
    """arithmetic.gbnf's first mask walks `call`'s start, each letter's subtree by a run walk
    taking its names from the list; every state's entry equals the whole walks' and the masks
    along a document equal those without the shortcuts."""
    vocab = cfgmask.Vocabulary.llama3()
    before = _core.run_name_scans()
    assert_run_entries(shipped("arithmetic.gbnf"), vocab, Strategy(), seed=3)
    assert _core.run_name_scans() - before >= 26  # every letter's subtree, at least once a build
    text = b"max(alpha_1, f(beta) ^ -gamma2) + sqrt(x_y) * (delta / 2.5e3)"
    fast = cfgmask.compile(shipped("arithmetic.gbnf"), vocab)
    slow = cfgmask.compile(shipped("arithmetic.gbnf"), vocab, _strategy=WALKS_ONLY)
    tokens = _longest_tokens(vocab, text)
    for i, (a, b) in enumerate(
        zip(masks_along(fast, tokens, final=True), masks_along(slow, tokens, final=True), strict=True)
    ):
        assert (a == b).all(), f"mask {i} differs"


@pytest.mark.parametrize("name", ["c.gbnf", "sql.gbnf"])
def test_shipped_identifiers_take_names_llama3(name: str) -> None:
    before = _core.run_name_scans()
    assert_run_entries(shipped(name), cfgmask.Vocabulary.llama3(), Strategy(), seed=len(name))
    assert _core.run_name_scans() > before


def test_names_small_vocabulary_taken() -> None:
    """A hand vocabulary where a call's start walks the subtrees of `a` and `b`: their names from
    the list (a bit set: a first byte with more names than the vocabulary has words), the rest
    read.  Blanks, digits and parentheses hold a third of the trie, so no donor takes the start."""
    pieces = (
        b"a", b"ab", b"abc", b"a_9", b"a(", b"ab(", b"ab (", b"a.b", b"a b", b"a" * 20, b"b", b"bc",
        b"(", b")", b" ", b"  ", b" (", b"1", b"12", b"123", b"9a", b"0", b"00", b"()", b"((",
    )  # fmt: skip
    vocab = _vocab(Vocab([*pieces, None], stop_ids=(len(pieces),)))
    before = _core.run_name_scans()
    text = NAMES.format(items=f'{IDENT} ws "(" ws ")"', ws="[ ]*")
    assert_run_entries(cfgmask.Grammar.from_gbnf(text), vocab, EVERY_RUN, seed=5)
    assert _core.run_name_scans() > before


@given(name_grammars(), vocabularies(NAME_PIECES), st.integers(0, 2**16))
def test_name_grammars_same_entries(text: str, v: Vocab, seed: int) -> None:
    assert_run_entries(cfgmask.Grammar.from_gbnf(text), _vocab(v), EVERY_RUN, seed)
