"""Stack verdicts: uncertain tokens' verdicts kept by the enclosing stack their check read.

After an operand of an expression grammar the tokens that close it, a call and a parenthesis
(` ())`, `),`, `))`) are uncertain at every operand; their check runs the real chart over the
sets up to the enclosing parenthesis, whose items recur at other positions.  The grammar keeps
each verdict per (token, the sets reachable from the current one down to the lowest set the
check's completions read, origins relabelled by rank) and a later mask, in any matcher of the
grammar, takes it where its own sets to that depth are the same item for item
(``Strategy.stack_verdicts``; csrc/stackmemo.c).  Here the masks must stay those of the
pure-Python reference along random walks of expression grammars with nested parentheses and
calls, with a second matcher, a rollback and a fork on the way (the store outlives them all),
and the same as with the memo off on c.gbnf with Llama-3, where kept verdicts must decide checks.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import cfgmask
from cfgmask import _core
from cfgmask.compile.strategy import Strategy

from .reference import ReferenceMatcher
from .strategies import Vocab, token_walks, vocabularies
from .test_engine_differential import ReferenceWalk, _vocab
from .test_entries import EXPR, EXPR_PIECES, expression_grammars, shipped

# every mask's candidates checked one by one (no whole-mask memo, no closing verdicts)
CHECKS = {"mask_memo_min_items": 2**63, "mask_memo_min_candidates": 2**63, "closing_verdicts": 0}
# what closes an operand, a call, a parenthesis, at once or with what follows
CLOSERS = (
    b")", b"))", b")))", b"())", b" ())", b" )", b") ", b"),", b"), ", b")+", b") +", b"a)", b"a))",
    b"1)", b"1))", b"ab)", b"(a)", b"(1))", b"a()", b"a())", b"(()", b"((", b"(a", b"a(a",
)  # fmt: skip


def _compile(g: cfgmask.Grammar, vocab: cfgmask.Vocabulary, on: bool) -> cfgmask.CompiledGrammar:
    return cfgmask.compile(g, vocab, _strategy=Strategy(stack_verdicts=1 if on else 0, **CHECKS))


@given(expression_grammars(), vocabularies(EXPR_PIECES + CLOSERS), st.data())
def test_expression_masks_equal_reference_across_matchers_rollback_and_fork(
    text: str, v: Vocab, data: st.DataObject
) -> None:
    g = cfgmask.Grammar.from_gbnf(text)
    ref_m = ReferenceMatcher(g.ir)
    vocab = _vocab(v)
    compiled = _compile(g, vocab, on=True)
    walk = data.draw(token_walks(ref_m, v, max_steps=14))
    ids = walk.token_ids
    at = data.draw(st.integers(0, len(ids)))
    back = data.draw(st.integers(0, at))

    rw = ReferenceWalk(ref_m, v, vocab, ids)
    m = cfgmask.Matcher(compiled)
    rw.follow(m, 0, at)  # verdicts stored along the way
    f = m.fork()
    m.rollback(back)  # the sets at and below the stack are rebuilt: keys name no position
    rw.follow(m, at - back)
    rw.follow(f, at)
    rw.follow(cfgmask.Matcher(compiled), 0)  # another matcher of the grammar takes the stored verdicts


# Nested calls and parentheses: `f(a, (b))` at several depths, operands of one and two bytes.
NESTED = EXPR.format(
    ops="[+*]",
    atoms='[a-c]+ | [0-9]+ | "(" ws expr ws ")" | [a-c]+ ws "(" ws expr ( ws "," ws expr )* ws ")"',
    ws="[ ]?",
)
NESTED_DOCS = (b"a(b, (c+1)) + (a*(b+c))", b"(((a)))+b(a(b(c)), 1)", b"ab((a+b)*(c+1), bc(a, b))+1")
NESTED_TOKENS = [bytes([c]) for c in b" abc1()+*,"] + list(CLOSERS) + [b", ", b" +", b" (", b"b(", b"(("]


def _same_masks(
    on: cfgmask.CompiledGrammar, off: cfgmask.CompiledGrammar, docs: list[list[int]], size: int
) -> None:
    a, b = cfgmask.allocate_bitmask(1, size), cfgmask.allocate_bitmask(1, size)
    for ids in docs:
        m, p = cfgmask.Matcher(on), cfgmask.Matcher(off)
        for i in range(len(ids) + 1):
            m.fill_bitmask(a)
            p.fill_bitmask(b)
            assert np.array_equal(a, b), f"token {i} of {ids}"
            if i < len(ids):
                assert m.accept_token(ids[i]) and p.accept_token(ids[i])


def _greedy(vocab_tokens: list[bytes], text: bytes) -> list[int]:
    """Longest-match token ids of text (the vocabulary has every byte of it)."""
    out, i = [], 0
    while i < len(text):
        best = max(
            (t for t, b in enumerate(vocab_tokens) if text.startswith(b, i)),
            key=lambda t: len(vocab_tokens[t]),
        )
        out.append(best)
        i += len(vocab_tokens[best])
    return out


def test_nested_calls_take_stored_verdicts() -> None:
    """The same masks with the memo and without along nested calls, and verdicts taken: the
    closers after each operand inside the same parentheses are checked once."""
    g = cfgmask.Grammar.from_gbnf(NESTED)
    vocab = cfgmask.Vocabulary.from_token_bytes(NESTED_TOKENS)
    docs = [_greedy(NESTED_TOKENS, d) for d in NESTED_DOCS]
    before = _core.stack_verdict_hits()
    _same_masks(_compile(g, vocab, on=True), _compile(g, vocab, on=False), docs, vocab.size)
    assert _core.stack_verdict_hits() - before > 20


C_PROGRAM = """int f(int a, int b) { return (a + b) * (a - b); }
int main(void) {
    int x = f(f(1, 2), (3 + 4) * 5);
    if ((x > 0) && (f(x, x) < 100)) { x = x + f((x), (1)); }
    while (x-- > 0) { printf("%d\\n", f(x, (x + 1) * (x - 1))); }
    return f(x, f(x, f(x, 0)));
}
"""


def test_c_gbnf_llama3_same_masks_and_hits() -> None:
    """c.gbnf with Llama-3 along a program of nested calls and parentheses: the same masks with
    the memo and without, and the memo decides thousands of checks."""
    quicktok = pytest.importorskip("quicktok")
    ids = quicktok.get_encoding("llama3").encode_ordinary(C_PROGRAM)
    vocab = cfgmask.Vocabulary.llama3()
    g = shipped("c.gbnf")
    before, closes = _core.stack_verdict_hits(), _core.stack_verdict_gate_closes()
    on = cfgmask.compile(g, vocab, _strategy=Strategy())  # as by default: after the first checks
    off = cfgmask.compile(g, vocab, _strategy=Strategy(stack_verdicts=0))
    _same_masks(on, off, [ids, ids[: len(ids) // 2]], vocab.size)
    assert _core.stack_verdict_hits() - before > 1000
    assert _core.stack_verdict_gate_closes() == closes  # verdicts recur: the gate stays open


# The hit-rate gate: a store whose verdicts are seldom asked again closes for a while (the masks as
# with the store off) and measures again once it opens.


@pytest.fixture
def gate_mode() -> Iterator[Callable[[int], None]]:
    yield _core.stack_verdict_gate_force
    _core.stack_verdict_gate_force(0)


def _nested() -> tuple[cfgmask.Grammar, cfgmask.Vocabulary, list[list[int]]]:
    vocab = cfgmask.Vocabulary.from_token_bytes(NESTED_TOKENS)
    return cfgmask.Grammar.from_gbnf(NESTED), vocab, [_greedy(NESTED_TOKENS, d) for d in NESTED_DOCS]


def test_gate_forced_closed_takes_and_stores_nothing(gate_mode: Callable[[int], None]) -> None:
    """Closed, the store is neither asked nor written: no hit, and the masks are those without it."""
    g, vocab, docs = _nested()
    gate_mode(1)
    before = _core.stack_verdict_hits()
    on = _compile(g, vocab, on=True)
    _same_masks(on, _compile(g, vocab, on=False), docs + docs, vocab.size)
    assert _core.stack_verdict_hits() == before
    gate_mode(0)  # opened: the same grammar's store starts and is asked
    _same_masks(on, _compile(g, vocab, on=False), docs + docs, vocab.size)
    assert _core.stack_verdict_hits() - before > 20


def test_gate_closes_on_few_hits_and_opens_again(gate_mode: Callable[[int], None]) -> None:
    """A gate that asks more hits than the nested documents give (one a verdict) closes on them,
    the masks unchanged, and opens again after its few masks: the verdicts kept are taken again."""
    g, vocab, docs = _nested()
    gate_mode(2)
    closes = _core.stack_verdict_gate_closes()
    on, off = _compile(g, vocab, on=True), _compile(g, vocab, on=False)
    _same_masks(on, off, docs, vocab.size)
    assert _core.stack_verdict_gate_closes() > closes
    hits = _core.stack_verdict_hits()
    _same_masks(on, off, docs + docs, vocab.size)
    assert _core.stack_verdict_hits() > hits  # the way back
