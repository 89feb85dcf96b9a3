"""Left-recursive stars composed from their byte edges (csrc/compose.c ``cm_compose_self_ref``).

The Lark front end compiles a star ``a (op b)*`` as a left-recursive rule ``R: R op b | op b``:
R's start state X reads the first ``op`` and calls R itself, returning to the state that reads
the next one.  X's private chart is (X, OUTER) and (X, R's frame), so ``cm_compose_can`` refused
it (a part that is the state itself) and each such position (sql.lark's stars of ``product``,
``sum``, ``and_expr``, ``or_expr``, ``select_list``, the query's and the start's: seven after
``SELECT id``) walked the whole trie.  Until R completes, the frame's item reads exactly what
(X, OUTER) reads, so the self-call is no part: X's entry is its byte edges' walks (tail parts
where they apply), and the tokens those leave uncertain -- the ones that complete R inside the
token, where the frame's item goes on after the call -- are decided by X's real chart.

``_core.compose_self_enable`` switches it (on by default); ``compose_self_built()`` counts the
entries so composed.  Checked: every state's entry with it on, off and by whole walks, on
hypothesis Lark grammars of star shapes (an operator, a keyword or a comma between items, with
and without ``%ignore`` blanks, one or two levels) over random vocabularies, and the masks along
random walks against the reference matcher; every state of sql.lark with Llama-3; bench_gbnf's
documents of sql.lark, sql and c cold, in order, with it on and off.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cfgmask
from cfgmask import _core
from cfgmask.compile.strategy import Strategy

from .helpers import core_switch, masks_along, same_document_masks, same_entries, walk_agrees
from .reference import ReferenceMatcher
from .strategies import Vocab, token_walks, vocabularies
from .test_engine_differential import _vocab
from .test_entries import WALKS_ONLY, _longest_tokens, entries, shipped

GRAMMAR = """start: expr (";" expr)*
expr: prod ({op} prod)*
prod: term ({op2} term)*
term: NAME | NUMBER | "(" expr ")" | "-" term
NAME: /[a-z]+/
NUMBER: /[0-9]+/
{ignore}"""
OPS = ('"+"', '("+" | "-")', '"and"i', '","', '("=" | "or"i)', '"."')
OPS2 = ('"*"', '("*" | "/")', '"x"')
# the regex blanks compile the stars left-recursive (their longest match owes a marker); none, or
# a literal blank, leave them loops: the rung declines there
IGNORES = (
    "%ignore /[ \\t]+/", "%ignore /\\s+/", "%ignore /\\s+/\n%ignore /--[^\\n]*/",
    "", '%ignore " "\n%ignore /#[^\\n]*/',
)  # fmt: skip
PIECES = (
    b" ", b"  ", b"\t", b"\n", b"a", b"ab", b" a", b"x", b"1", b"12", b" 1", b"(", b")", b" (",
    b") ", b"+", b" +", b"+ ", b"+a", b"+1", b"-", b" -", b"--", b"-- a\n", b"*", b"*a", b" *",
    b"/", b"and", b" and", b" AND", b"or", b" or ", b"=", b" =", b",", b", ", b",a", b";", b"; ",
    b".", b" .", b"a.", b" a ", b"a+b", b"1*2", b"a,", b"x+", b"(a)",
    # a whole iteration and the next operator: the rule completes inside the token and the
    # star's frame reads on (what the byte walks leave uncertain)
    b"+a+", b"+1-", b"+ a +", b"+a +", b"*a*", b"*2/", b" * 2 *", b",a,", b", a,", b",a ,",
    b" and a and", b"and 1 and", b"or a or", b"=a=", b".a.", b"xax", b"+a*b+", b";a;",
)  # fmt: skip


def _grammar(op: str, op2: str, ignore: str) -> cfgmask.Grammar:
    return cfgmask.Grammar.from_lark(GRAMMAR.format(op=op, op2=op2, ignore=ignore))


def switch_entries(
    g: cfgmask.Grammar,
    vocab: cfgmask.Vocabulary,
    enable: Callable[[bool], object],
    on: bool,
    strategy: Strategy,
) -> list:
    """Every state's entry of ``g`` compiled with the core switch ``enable`` set to ``on``."""
    with core_switch(enable, on):
        return entries(cfgmask.compile(g, vocab, _strategy=strategy))


def switch_same_entries(
    g: cfgmask.Grammar,
    vocab: cfgmask.Vocabulary,
    enable: Callable[[bool], object],
    counter: Callable[[], int],
) -> int:
    """Every state's entry the same with the switch on and off, and equal to whole walks; what
    ``counter`` counted with it on (nothing while off)."""
    before = counter()
    on = switch_entries(g, vocab, enable, True, Strategy())
    counted = counter() - before
    before = counter()
    same_entries(on, switch_entries(g, vocab, enable, False, Strategy()), "switch off")
    assert counter() == before, "counted while off"
    same_entries(on, switch_entries(g, vocab, enable, True, WALKS_ONLY), "whole walks")
    return counted


def _entries(g: cfgmask.Grammar, vocab: cfgmask.Vocabulary, on: bool, strategy: Strategy) -> list:
    return switch_entries(g, vocab, _core.compose_self_enable, on, strategy)


def assert_same_entries(g: cfgmask.Grammar, vocab: cfgmask.Vocabulary) -> int:
    """Every state's entry the same with the switch on and off, and equal to whole walks; the
    entries composed so with it on."""
    return switch_same_entries(g, vocab, _core.compose_self_enable, _core.compose_self_built)


def test_fixed_grammars_compose_their_stars() -> None:
    """The hypothesis family reaches the rung (else the random tests would compare the switch's
    absence with itself): each star's start is composed."""
    v = Vocab(tokens=[None, *(bytes([b]) for b in range(32, 127)), *PIECES], stop_ids=(0,))
    for op in OPS:
        for ignore in IGNORES[:3]:
            built = assert_same_entries(_grammar(op, OPS2[0], ignore), _vocab(v))
            assert built > 0, (op, ignore)


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(OPS), st.sampled_from(OPS2), st.sampled_from(IGNORES), vocabularies(PIECES))
def test_random_star_grammars_same_entries(op: str, op2: str, ignore: str, v: Vocab) -> None:
    assert_same_entries(_grammar(op, op2, ignore), _vocab(v))


@settings(max_examples=25, deadline=None)
@given(st.sampled_from(OPS), st.sampled_from(OPS2), st.sampled_from(IGNORES), vocabularies(PIECES), st.data())
def test_random_star_grammars_masks_equal_reference(
    op: str, op2: str, ignore: str, v: Vocab, data: st.DataObject
) -> None:
    """The masks along random walks with the switch on: the reference matcher's, and those of
    whole walks."""
    g = _grammar(op, op2, ignore)
    ref_m = ReferenceMatcher(g.ir)
    vocab = _vocab(v)
    walk = data.draw(token_walks(ref_m, v, max_steps=12))
    with core_switch(_core.compose_self_enable, True):
        composed = cfgmask.Matcher(cfgmask.compile(g, vocab, _strategy=Strategy()))
        whole = cfgmask.Matcher(cfgmask.compile(g, vocab, _strategy=WALKS_ONLY))
        walk_agrees(ref_m, v.tokens, v.stop_ids, v.special_ids, walk.token_ids, on=composed, whole=whole)


def test_sql_lark_same_entries() -> None:
    """Every state of sql.lark with Llama-3, on and off (whole walks: tests/test_entries.py)."""
    vocab = cfgmask.Vocabulary.llama3()
    before = _core.compose_self_built()
    on = _entries(shipped("sql.lark"), vocab, True, Strategy())
    assert _core.compose_self_built() > before
    same_entries(on, _entries(shipped("sql.lark"), vocab, False, Strategy()), "switch off")


@pytest.mark.parametrize("name", ["sql.lark", "sql", "c"])
def test_documents_cold_pass_same_masks(name: str) -> None:
    """bench_gbnf's cold pass: the grammar compiled once, its documents in order from cold caches;
    every mask the same with the switch on and off, and only sql.lark composed stars so."""
    from benchmarks.documents import DOCUMENTS

    vocab = cfgmask.Vocabulary.llama3()
    g = shipped(name if name.endswith(".lark") else f"{name}.gbnf")
    docs = [_longest_tokens(vocab, d.encode()) for d in DOCUMENTS[name.removesuffix(".lark")]()]
    out = {}
    for on in (True, False):
        before = _core.compose_self_built()
        with core_switch(_core.compose_self_enable, on):
            compiled = cfgmask.compile(g, vocab)
            out[on] = [masks_along(compiled, doc) for doc in docs]
        built = _core.compose_self_built() - before
        assert (built > 0) == (on and name == "sql.lark"), (on, built)
    same_document_masks(out[True], out[False], docs)
    assert all(np.asarray(m).any() for ms in out[True] for m in ms)
