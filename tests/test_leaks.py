"""Leaks: creating and dropping matchers, compiled grammars and vocabularies leaves RSS flat.

Each loop is warmed up first (allocator arenas, caches, lazily built tables), then run
many times; resident memory may not grow by more than a small tolerance, far below what
a leak of even a few dozen bytes per object would add.
"""

from __future__ import annotations

import gc
import os
import random

import numpy as np
import pytest

import cfgmask

# A sanitizer's allocator quarantines freed memory, so RSS says nothing there.
pytestmark = pytest.mark.skipif("san.so" in os.environ.get("LD_PRELOAD", ""), reason="sanitizer allocator")

GRAMMAR = cfgmask.Grammar.from_gbnf(
    'root ::= "{" ws (pair ("," ws pair)*)? "}"\n'
    'pair ::= "\\"" [a-z]+ "\\":" ws (root | [0-9]+ | "[" ws (root ("," ws root)*)? "]")\n'
    'ws ::= " "?'
)
TEXT = b'{"ab": [{"c": 1}, {}], "d": 22}'


def _vocab(seed: int = 0) -> cfgmask.Vocabulary:
    rng = random.Random(seed)
    extra = [bytes(rng.choice(b'{}[]":, abcd0123') for _ in range(rng.randint(2, 5))) for _ in range(2000)]
    return cfgmask.Vocabulary.from_token_bytes(
        [bytes([i]) for i in range(256)] + extra + [None], stop_token_ids=[2256]
    )


def rss_mb() -> float:
    gc.collect()
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _use(m: cfgmask.Matcher, mask: np.ndarray) -> None:
    """Exercise what allocates inside a matcher: chart growth, memo, fork, rollback."""
    m.fill_bitmask(mask)
    assert m.accept_bytes(TEXT[:9])
    f = m.fork()
    assert f.accept_bytes(TEXT[9:])
    f.fill_bitmask(mask)
    m.rollback(1)


def test_matchers_do_not_leak() -> None:
    compiled = cfgmask.compile(GRAMMAR, _vocab())
    mask = cfgmask.allocate_bitmask(1, compiled.vocab.size)
    for _ in range(2000):  # warm-up: the mask cache, allocator arenas
        _use(cfgmask.Matcher(compiled), mask)
    before = rss_mb()
    for i in range(100_000):
        m = cfgmask.Matcher(compiled)
        if i % 10 == 0:
            _use(m, mask)
    after = rss_mb()
    print(f"\n100,000 matchers: RSS {before:.1f} -> {after:.1f} MB")
    assert after - before < 6, (before, after)


def test_compiled_grammars_and_vocabularies_do_not_leak() -> None:
    vocab = _vocab()

    def one(v: cfgmask.Vocabulary) -> None:
        compiled = cfgmask.compile(GRAMMAR, v)  # automaton tables come from the cache; C grammar is new
        m = cfgmask.Matcher(compiled)
        mask = cfgmask.allocate_bitmask(1, v.size)
        _use(m, mask)  # fills part of this grammar's mask cache

    for _ in range(50):
        one(vocab)
    before = rss_mb()
    for _ in range(1000):
        one(vocab)
    after = rss_mb()
    print(f"\n1,000 compiled grammars: RSS {before:.1f} -> {after:.1f} MB")
    assert after - before < 8, (before, after)

    for i in range(5):
        one(_vocab(i))
    before = rss_mb()
    for i in range(100):
        one(_vocab(i % 5))  # a new Vocabulary (and C token trie) each time
    after = rss_mb()
    print(f"100 vocabularies: RSS {before:.1f} -> {after:.1f} MB")
    assert after - before < 8, (before, after)
