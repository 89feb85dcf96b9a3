"""Uncertain tokens that every caller reads on, taken as accepted (csrc/promote.c;
``_core.promote_enable``).

A token is uncertain where the item's rule completes inside it with bytes left: its callers read
the rest.  When every return state of the rule reads the rest on (or leaves its own rule where the
rest is read on below, recursively; a question met again while open taken as true, the start rule
never), the token is allowed whatever the stack holds, and the entry takes it as accepted instead
of leaving it to a check at every mask (c.gbnf after a name at a statement's start: `item`'s label
tokens ` :\\n`, `statement`'s ` ;\\n`).  The masks must not move: along documents of the shipped
grammars and along random walks of statement grammars with the switch on and off.  Each entry
with it on may only move tokens from its uncertain list to its accepted set.  Small grammars pin
the cases a wrong answer would show: a rule whose two return states read different bytes, the
start rule called from inside itself, a statement that recurses through itself."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cfgmask
from cfgmask import _core

from .helpers import core_switch, mask_bools, masks_along
from .test_entries import WALKS_ONLY, _longest_tokens, entries, shipped
from .test_tail_levels import (
    HELLO,
    STMT_DRAWS,
    _stmt_grammar,
    _stmt_vocab,
)

DOCS = {
    "c.gbnf": HELLO
    + b"enum color { RED, GREEN };\nstatic int f(int *s) {\n    for (int i = 0; i < 3; i++) s[i] = i;\n"
    b"    while (x) { c += 1; }\n    switch (c) {\n    case RED:\n        break;\n    default:\n"
    b"        return -1;\n    }\n    return s[0];\n}\n",
    "json.gbnf": b'{"a": [1, 2.5, {"b": null}], "c": "x y", "d": true}',
    "arithmetic.gbnf": b"(1 + 2) * 3 - 4 / (5 - 6)",
    "sql.gbnf": b"SELECT a, b FROM t WHERE a = 1 AND b > 2 ORDER BY a;",
}


def _masks(g: cfgmask.Grammar, vocab: cfgmask.Vocabulary, tokens: list[int], on: bool, uses: int = 4) -> list:
    """The masks along tokens, compiled afresh with the switch as given (a compiled grammar keeps
    its entries until it is dropped), promoting at an entry's `uses`-th use."""
    with core_switch(_core.promote_enable, on), core_switch(_core.promote_uses, uses, 4):
        return masks_along(cfgmask.compile(g, vocab), tokens, final=True)


def _assert_same_masks(a: list, b: list) -> None:
    for i, (x, y) in enumerate(zip(a, b, strict=True)):
        if not np.array_equal(x, y):
            diff = np.flatnonzero(np.unpackbits((x ^ y).view(np.uint8), bitorder="little"))
            raise AssertionError(f"mask {i} differs at ids {diff[:8].tolist()}")


def _only_moved(on: list, off: list, vocab_size: int) -> int:
    """Each state's entry with the switch on: off's, some uncertain tokens moved to accepted; how
    many moved."""
    moved = 0
    for s, ((acc_on, unc_on), (acc_off, unc_off)) in enumerate(zip(on, off, strict=True)):
        a_on = np.unpackbits(acc_on.view(np.uint8), bitorder="little")[:vocab_size].astype(bool)
        a_off = np.unpackbits(acc_off.view(np.uint8), bitorder="little")[:vocab_size].astype(bool)
        assert not (a_off & ~a_on).any(), f"state {s}: an accepted token lost"
        new = set(np.flatnonzero(a_on & ~a_off).tolist())
        u_on, u_off = set(unc_on.tolist()), set(unc_off.tolist())
        assert u_on <= u_off, f"state {s}: an uncertain token appeared"
        assert new == u_off - u_on, f"state {s}: accepted tokens that were not uncertain"
        moved += len(new)
    return moved


@pytest.mark.parametrize("name", list(DOCS))
def test_shipped_document_masks_same(name: str) -> None:
    vocab = cfgmask.Vocabulary.llama3()
    g = shipped(name)
    tokens = _longest_tokens(vocab, DOCS[name])
    before = _core.promoted()
    on = _masks(g, vocab, tokens, True)
    moved = _core.promoted() - before
    _assert_same_masks(on, _masks(g, vocab, tokens, False))
    if name == "c.gbnf":
        assert moved > 300, moved  # the statement starts' label and `;` tokens


def _fill_entries(compiled: cfgmask.CompiledGrammar) -> list[tuple[np.ndarray, np.ndarray]]:
    return [compiled._handle.fill_entry(s) for s in range(compiled.tables.n_states)]


def _piece_default() -> int:
    """promote_piece's default (read by setting it and putting it back)."""
    old = _core.promote_piece(0)
    _core.promote_piece(old)
    return old


PIECE = _piece_default()


def _same(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]) -> bool:
    return np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])


def test_c_entries_only_move_uncertain_tokens() -> None:
    """Every state's entry of c.gbnf as a mask reads it, promoted at its first use, against the
    plain entry; and the same with plain walks (what a token's answer is does not depend on the
    order the entries are built or promoted in)."""
    vocab = cfgmask.Vocabulary.llama3()
    g = shipped("c.gbnf")
    with core_switch(_core.promote_enable, False):
        off = entries(cfgmask.compile(g, vocab))
    with core_switch(_core.promote_uses, 1, 4), core_switch(_core.promote_piece, 0, PIECE):
        on = _fill_entries(cfgmask.compile(g, vocab))
        plain = _fill_entries(cfgmask.compile(g, vocab, _strategy=WALKS_ONLY))
    assert _only_moved(on, off, vocab.size) > 1000
    for s, (a, b) in enumerate(zip(on, plain, strict=True)):
        assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1]), (
            f"state {s} differs from plain walks"
        )


def test_promotion_at_fourth_use_leaves_plain_entries() -> None:
    """A state's entry is promoted at its fourth use by a mask, not before (a JSON Schema's block
    entries, read once or twice, are not asked), into a copy: the plain entry, which compose's
    parts, other matchers and `entry` read, stays as the switch-off build makes it, after a
    document's masks too."""
    vocab = cfgmask.Vocabulary.llama3()
    g = shipped("c.gbnf")
    tokens = _longest_tokens(vocab, DOCS["c.gbnf"])
    with core_switch(_core.promote_enable, False):
        off = entries(cfgmask.compile(g, vocab))
    with core_switch(_core.promote_enable, True), core_switch(_core.promote_piece, 0, PIECE):
        compiled = cfgmask.compile(g, vocab)
        early = [_fill_entries(compiled) for _ in range(3)]
        fourth = _fill_entries(compiled)
        masks_along(compiled, tokens, final=True)
        after = entries(compiled)
    for what, got in [
        *((f"promoted at its use {i + 1}", x) for i, x in enumerate(early)),
        ("changed", after),
    ]:
        for s, (a, b) in enumerate(zip(got, off, strict=True)):
            assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1]), f"state {s}: {what}"
    assert _only_moved(fourth, off, vocab.size) > 1000


def test_pieces_publish_only_the_whole_copy() -> None:
    """Asked in pieces (the smallest: a state's k-th use asks its next tokens until k units of
    work are spent, at least one token), a state's entry as a mask reads it is its plain entry
    until every uncertain token is asked, then the copy one piece makes: never a part of it (the
    copy, like the masks, must not depend on how the work was cut); and the c.gbnf document's
    masks stay the switch-off ones."""
    vocab = cfgmask.Vocabulary.llama3()
    g = shipped("c.gbnf")
    with core_switch(_core.promote_uses, 1, 4), core_switch(_core.promote_piece, 0, PIECE):
        compiled = cfgmask.compile(g, vocab)
        plain = entries(compiled)
        whole = _fill_entries(compiled)
    moved = [s for s in range(len(plain)) if not _same(whole[s], plain[s])]
    assert len(moved) > 20
    published: dict[int, int] = {}
    with core_switch(_core.promote_uses, 1, 4), core_switch(_core.promote_piece, 1, PIECE):
        compiled = cfgmask.compile(g, vocab)
        for use in range(1, 1000):
            for s in moved:
                if s in published:
                    continue
                got = compiled._handle.fill_entry(s)
                if _same(got, plain[s]):
                    continue
                assert _same(got, whole[s]), f"state {s}: a part of its copy read at use {use}"
                published[s] = use
            if len(published) == len(moved):
                break
        assert len(published) == len(moved), "copies never published"
        assert max(published.values()) > 3, published  # the pieces took several uses
        tokens = _longest_tokens(vocab, DOCS["c.gbnf"])
        on = masks_along(cfgmask.compile(g, vocab), tokens, final=True)
    with core_switch(_core.promote_enable, False):
        _assert_same_masks(on, masks_along(cfgmask.compile(g, vocab), tokens, final=True))


# A name rule that two callers return from into states reading different bytes; the start rule
# called from inside itself (completing it at the top leaves nothing to read the rest); a
# statement that recurses through itself (`w` s: the question of s's rest asked again while open).
SMALL = {
    "two_returns": (
        'root ::= "a" x ";" | "b" x ")" | "c" x ";" x\nx ::= [a-z]+ | "[" x "]"\n',
        b"bq)",
        b"aq;",
        b"cq;q",
        b"b[q])",
    ),
    "start_again": ('root ::= x | "(" root ")"\nx ::= [a-z]+\n', b"(q)", b"((qq))", b"q"),
    "recursion": (
        'root ::= "{" s* "}"\ns ::= "w" s | e ";" | "x" e ";"\ne ::= [a-z]+ | "[" e "]"\n',
        b"{q;}",
        b"{wq;xq;w[q];}",
        b"{wwxq;q;}",
    ),
}
SMALL_TOKENS = [
    *(bytes([c]) for c in b"abcqwx;(){}[]"),
    *(
        b"q;",
        b"q)",
        b"q;}",
        b"q))",
        b"q;q",
        b"q;w",
        b"q;x",
        b"q;(",
        b"qq;",
        b"q;;",
        b"q)q",
        b"q);",
        b"q}",
        b"wq;",
    ),
    *(b"q]", b"q];", b"q])", b"q]]", b"];", b"])", b"];w", b"q;w["),
]


@pytest.mark.parametrize("name", list(SMALL))
def test_small_grammars_masks_same(name: str) -> None:
    text, *docs = SMALL[name]
    vocab = cfgmask.Vocabulary.from_token_bytes(SMALL_TOKENS)
    g = cfgmask.Grammar.from_gbnf(text)
    for doc in docs:
        tokens = [SMALL_TOKENS.index(bytes([c])) for c in doc]
        for uses in (1, 4):
            _assert_same_masks(_masks(g, vocab, tokens, True, uses), _masks(g, vocab, tokens, False))


def _walk(g: cfgmask.Grammar, vocab: cfgmask.Vocabulary, seed: int, steps: int) -> tuple[list[int], list]:
    """A random walk of allowed tokens with the switch off: the tokens and the masks."""
    rng = random.Random(seed)
    mask = cfgmask.allocate_bitmask(1, vocab.size)
    tokens, masks, stops = [], [], set(vocab.stop_ids)
    with core_switch(_core.promote_enable, False):
        compiled = cfgmask.compile(g, vocab)
        m = cfgmask.Matcher(compiled)
        for _ in range(steps):
            m.fill_bitmask(mask, 0)
            masks.append(mask.copy())
            ids = [i for i, ok in enumerate(mask_bools(m, vocab.size)) if ok and i not in stops]
            if not ids:
                break
            t = rng.choice(ids)
            tokens.append(t)
            assert m.accept_token(t)
    return tokens, masks


@settings(max_examples=40, deadline=None)
@given(*STMT_DRAWS, st.integers(0, 2**16), st.sampled_from([0, 1, 8, PIECE]))
def test_statement_grammars_walks_same(
    stmts: list[str], atoms: list[str], name: str, ws: str, pieces: list[bytes], seed: int, work: int
) -> None:
    """c.gbnf's shape in small: statements in a block, an expression chain, labels; random walks
    of allowed tokens (switch off), their masks again with the switch on, its copies asked in
    pieces of `work` (0: at once)."""
    if all("(" in a for a in atoms):
        atoms = [*atoms, "[0-9]+"]  # a base case
    if all("stmt" in s for s in stmts):
        stmts = [*stmts, 'expr ws ";"']
    g, vocab = _stmt_grammar(stmts, atoms, name, ws), _stmt_vocab(pieces)
    tokens, off = _walk(g, vocab, seed, 24)
    mask = cfgmask.allocate_bitmask(1, vocab.size)
    with (
        core_switch(_core.promote_enable, True),
        core_switch(_core.promote_uses, 1, 4),
        core_switch(_core.promote_piece, work, PIECE),
    ):
        m = cfgmask.Matcher(cfgmask.compile(g, vocab))
        for i, want in enumerate(off):
            m.fill_bitmask(mask, 0)
            assert np.array_equal(mask, want), f"mask {i} differs"
            if i < len(tokens):
                assert m.accept_token(tokens[i])
