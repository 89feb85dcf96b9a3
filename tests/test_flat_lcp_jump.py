"""A flat walk's exit flags known from two stops' common prefix (csrc/flat.c ``flat_known_upto``).

At each stop (a dead subtree after an exit, a chart, a cell not made yet) ``flat_walk_from``
needs the flags of an exit along the path, known up to the depth the entries read since the
last stop share with the path they were made on.  It took that as the least prefix length of
every entry between the two stops, one by one, the entries of every dead subtree skipped
included (57,875 under Llama-3's ` `: sql.lark's blank-then-keyword walks); the trie is
sorted, so that least prefix is the two stops' entries' common prefix, their bytes compared.
``_core.flat_lcp_jump_enable`` switches it: 1 (the default) where more than a few entries lie
between, 2 at every stop, 0 never (the scan: the reference).  Checked: every state's entry of
the shipped grammars with Llama-3 in each mode (and by whole walks for two of them);
bench_gbnf's documents of sql.lark and sql cold; hypothesis grammars of keywords, names and
blanks over random vocabularies, entries in each mode and whole walks, and masks along
random walks against the reference matcher.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cfgmask
from cfgmask import _core
from cfgmask.compile.strategy import Strategy

from .helpers import core_switch, masks_along, same_document_masks, same_entries, stop_vocab, walk_agrees
from .reference import ReferenceMatcher
from .strategies import Vocab, token_walks, vocabularies
from .test_compose_self import switch_entries
from .test_engine_differential import _vocab
from .test_entries import WALKS_ONLY, _longest_tokens, entries, shipped

SHIPPED = ["sql.lark", "sql.gbnf", "c.gbnf", "json.gbnf", "arithmetic.gbnf"]


def _modes_same(g: cfgmask.Grammar, vocab: cfgmask.Vocabulary) -> list:
    """Every state's entry the same in modes 1 and 2 as in 0 (the scan); mode 0's entries."""
    off = switch_entries(g, vocab, _core.flat_lcp_jump_enable, 0, Strategy())
    for mode in (1, 2):
        on = switch_entries(g, vocab, _core.flat_lcp_jump_enable, mode, Strategy())
        same_entries(on, off, f"mode {mode}")
    return off


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_same_entries(name: str) -> None:
    """Every state's entry with Llama-3 the same in each mode; by whole walks for two."""
    vocab = cfgmask.Vocabulary.llama3()
    g = shipped(name)
    off = _modes_same(g, vocab)
    if name in ("sql.lark", "json.gbnf"):
        same_entries(off, switch_entries(g, vocab, _core.flat_lcp_jump_enable, 1, WALKS_ONLY), "whole walks")


@pytest.mark.parametrize("name", ["sql.lark", "sql"])
def test_documents_cold_pass_same_masks(name: str) -> None:
    """bench_gbnf's cold pass: the grammar compiled once, its documents in order from cold
    caches; every mask the same in each mode."""
    from benchmarks.documents import DOCUMENTS

    vocab = cfgmask.Vocabulary.llama3()
    g = shipped(name if name.endswith(".lark") else f"{name}.gbnf")
    docs = [_longest_tokens(vocab, d.encode()) for d in DOCUMENTS[name.removesuffix(".lark")]()]
    out = {}
    for mode in (0, 1, 2):
        with core_switch(_core.flat_lcp_jump_enable, mode, 1):
            compiled = cfgmask.compile(g, vocab)
            out[mode] = [masks_along(compiled, doc) for doc in docs]
    same_document_masks(out[1], out[0], docs)
    same_document_masks(out[2], out[0], docs)


# Keywords that are prefixes of each other and of names, blanks before them, a list of items
# that may end after a name (the walks from depth 1 exit there) -- the stops a walk meets.
GRAMMAR = """root ::= item ( ws "," ws item )* ws
item ::= {kw} ws1 name ( ws1 "as" ws1 name )? | name | "(" ws item ws ")"
name ::= [a-z_] [a-z0-9_]*
ws ::= {ws}
ws1 ::= [ ]+
"""
KW = ('"sel"', '( "sel" | "select" )', '( "se" | "sel" "ect"? | "from" )', "[sS] [eE] [lL]")
WS = ("[ ]*", "[ \\t]?", '" "?')
PIECES = (
    b" ", b"  ", b" s", b" se", b" sel", b" select", b" selector", b"sel", b"select", b"selects",
    b"se", b"s", b"a", b"as", b" as", b" as ", b"ab", b"a,", b"a, ", b",", b", ", b" ,", b"(",
    b"( ", b")", b"),", b"f", b"fr", b"from", b" from", b"x_1", b"_", b"sel a", b"select a,",
)  # fmt: skip


def _all_modes_same(g: cfgmask.Grammar, vocab: cfgmask.Vocabulary) -> None:
    off = _modes_same(g, vocab)
    with core_switch(_core.flat_lcp_jump_enable, 2, 1):
        same_entries(off, entries(cfgmask.compile(g, vocab, _strategy=WALKS_ONLY)), "whole walks")


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(KW), st.sampled_from(WS), vocabularies(PIECES))
def test_random_keyword_grammars_same_entries(kw: str, ws: str, v: Vocab) -> None:
    g = cfgmask.Grammar.from_gbnf(GRAMMAR.format(kw=kw, ws=ws))
    _all_modes_same(g, _vocab(v))


@settings(max_examples=25, deadline=None)
@given(st.sampled_from(KW), st.sampled_from(WS), vocabularies(PIECES), st.data())
def test_random_keyword_grammars_masks(kw: str, ws: str, v: Vocab, data: st.DataObject) -> None:
    """The masks along random walks, jumping at every stop: the reference matcher's, and those
    of whole walks."""
    g = cfgmask.Grammar.from_gbnf(GRAMMAR.format(kw=kw, ws=ws))
    ref_m = ReferenceMatcher(g.ir)
    vocab = _vocab(v)
    walk = data.draw(token_walks(ref_m, v, max_steps=12))
    with core_switch(_core.flat_lcp_jump_enable, 2, 1):
        flat = cfgmask.Matcher(cfgmask.compile(g, vocab))
        whole = cfgmask.Matcher(cfgmask.compile(g, vocab, _strategy=WALKS_ONLY))
        walk_agrees(ref_m, v.tokens, v.stop_ids, v.special_ids, walk.token_ids, flat=flat, whole=whole)


def test_llama3_keyword_grammar_same_entries() -> None:
    """The random grammars' shape with Llama-3: dead subtrees of thousands of entries between
    stops (every name under ` s`), in each mode and by whole walks."""
    g = cfgmask.Grammar.from_gbnf(GRAMMAR.format(kw=KW[2], ws=WS[0]))
    _all_modes_same(g, cfgmask.Vocabulary.llama3())


# A name that exits `item` and reads on (` ` follows an item, and ` as` goes on in it) after
# entries that share only its first byte: `aaa(` stops (dead after its exits, whose next bytes
# follow no item) with its flags made to depth 3, none set; `aab` .. `aaf` die before any exit,
# skipped (more than CM_FLAT_LCP_SCAN entries, so mode 1 jumps too); `ab ,` stops at depth 3
# after `ab` exited before ` `, the flag at depth 3 set on its own path only.  Flags trusted
# past the two stops' common prefix (`a`) reject `ab ,`, which `sel ab ,` completes.
EXIT_PIECES = (
    b"sel ", b"aaa(", b"aab", b"aac", b"aad", b"aae", b"aaf", b"ab ,", b"ab", b"a", b" ", b",",
    b"as", b"(", b")",
)  # fmt: skip


def test_exit_flags_past_common_prefix() -> None:
    """An exit's flag on a stop's path past its common prefix with the stop before, the token
    kept uncertain (and accepted) in each mode: masks against the reference, entries against
    the scan's."""
    g = cfgmask.Grammar.from_gbnf(GRAMMAR.format(kw='"sel"', ws="[ ]*"))
    vocab, tokens = stop_vocab(EXIT_PIECES)
    stops = [len(EXIT_PIECES)]
    ref_m = ReferenceMatcher(g.ir)
    sel, ab_comma = EXIT_PIECES.index(b"sel "), EXIT_PIECES.index(b"ab ,")
    assert ref_m.mask(b"sel ", tokens, stops, [])[ab_comma]  # what the test is about
    walk = [sel, ab_comma, EXIT_PIECES.index(b"(")]
    for mode in (0, 1, 2):
        with core_switch(_core.flat_lcp_jump_enable, mode, 1):
            m = cfgmask.Matcher(cfgmask.compile(g, vocab))
            walk_agrees(ref_m, tokens, stops, [], walk, **{f"mode {mode}": m})
    _modes_same(g, vocab)
