"""The waiter index (waiters.c) under table pressure: a set that calls a hundred rules
indexes a hundred (set, rule) slots, so a long document fills the slot table many times
over.  A full table drops the slots of sets rebuilt since and keeps (and moves) the
others, with their pool entries; masks must equal those of a compile that never indexes."""

from __future__ import annotations

import random

import numpy as np

import cfgmask
from cfgmask.compile.strategy import Strategy

N_RULES = 100
GBNF = (
    'root ::= item ("," item)*\n'
    "item ::= "
    + " | ".join(f"r{k}" for k in range(N_RULES))
    + "\n"
    + "".join(f'r{k} ::= "k{k}" | "k{k}(" root ")"\n' for k in range(N_RULES))
)


def _document(rng: random.Random, depth: int = 0) -> str:
    items = []
    for _ in range(rng.randint(3, 8) if depth else 60):
        k = rng.randrange(N_RULES)
        nested = depth < 2 and rng.random() < 0.15
        items.append(f"k{k}(" + _document(rng, depth + 1) + ")" if nested else f"k{k}")
    return ",".join(items)


def _vocab(rng: random.Random, doc: str) -> cfgmask.Vocabulary:
    toks = {bytes([b]) for b in range(32, 127)}
    for _ in range(600):  # pieces of the document: tokens that complete several rules
        i = rng.randrange(len(doc))
        toks.add(doc[i : i + rng.randint(2, 14)].encode())
    toks |= {f"k{k}".encode() for k in range(N_RULES)} | {f",k{k}".encode() for k in range(N_RULES)}
    return cfgmask.Vocabulary.from_token_bytes(sorted(toks) + [b""])


def test_waiter_index_under_table_pressure_same_masks() -> None:
    rng = random.Random(12)
    doc = _document(rng)
    vocab = _vocab(rng, doc)
    g = cfgmask.Grammar.from_gbnf(GBNF)
    indexed = cfgmask.compile(g, vocab, _strategy=Strategy(index_min_items=1))
    plain = cfgmask.compile(g, vocab, _strategy=Strategy(index_min_items=2**31))
    a, b = cfgmask.Matcher(indexed), cfgmask.Matcher(plain)
    data = doc.encode()
    pos, n_masks, steps = 0, 0, []
    while pos < len(data):
        ma, mb = a.allowed_tokens(), b.allowed_tokens()
        assert np.array_equal(ma, mb), f"mask differs after {data[:pos]!r}"
        n_masks += 1
        chunk = data[pos : pos + rng.randint(1, 4)]
        assert a.accept_bytes(chunk) and b.accept_bytes(chunk)
        pos += len(chunk)
        steps.append(len(chunk))
        if rng.random() < 0.1 and len(steps) > 3:  # rollback: sets rebuilt, their old slots dead
            k = rng.randint(1, 3)
            a.rollback(k)
            b.rollback(k)
            pos -= sum(steps[-k:])
            del steps[-k:]
    assert n_masks > 100
