"""Thread safety: one CompiledGrammar shared by many threads, each with its own matcher.

The mask cache starts cold, so the threads fill it concurrently (double-checked
publication in csrc/cache.c) while others read it.  Every mask must equal the one a
single thread computes.  ``tests/sanitize.sh tsan tests/test_threads.py`` runs this
under ThreadSanitizer.
"""

from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path

import numpy as np
import pytest

import cfgmask
from cfgmask.compile.strategy import Strategy

quicktok = pytest.importorskip("quicktok")

ROOT = Path(__file__).resolve().parent.parent
N_THREADS = 16
DOCS = [
    {"name": "Alice", "age": 31, "email": "alice@example.com", "tags": ["admin", "dev"]},
    {"id": 7, "price": -12.5e-3, "ok": True, "none": None, "nested": {"a": [1, 2, {"b": []}], "c": {}}},
    {"text": 'quote " backslash \\ newline \n tab \t unicode é € 😀', "empty": ""},
    [1, -0.0, 3.25, 1e10, "x", [], {}, [[[]]], False],
]


@pytest.fixture(scope="module")
def setup() -> tuple[cfgmask.Grammar, cfgmask.Vocabulary, list[list[int]]]:
    vocab = cfgmask.Vocabulary.llama3()
    grammar = cfgmask.Grammar.from_gbnf((ROOT / "grammars" / "json.gbnf").read_text())
    enc = quicktok.get_encoding("llama3")
    texts = [json.dumps(d, indent=i % 2 * 2 or None, ensure_ascii=i % 3 == 0) for i, d in enumerate(DOCS * 2)]
    return grammar, vocab, [list(enc.encode(t)) for t in texts]


def replay(compiled: cfgmask.CompiledGrammar, ids: list[int], fork_at: int = -1) -> list[bytes]:
    """Digests of the mask before each token and at the end (forking once on the way)."""
    m = cfgmask.Matcher(compiled)
    mask = cfgmask.allocate_bitmask(1, compiled.vocab.size)
    out = []
    for i, t in enumerate(ids):
        if i == fork_at:
            m = m.fork()
        m.fill_bitmask(mask)
        out.append(hashlib.sha1(mask.tobytes()).digest())
        assert m.accept_token(t), f"token {i} rejected"
    m.fill_bitmask(mask)
    out.append(hashlib.sha1(mask.tobytes()).digest())
    assert m.is_accepting()
    return out


@pytest.mark.parametrize(
    "limits",
    [
        Strategy(),
        # every mask through the shared whole-mask memo (its mutex), loop walks shared or not
        Strategy(mask_memo_min_items=1),
        Strategy(mask_memo_min_items=1, share_loop_walks=False),
    ],
    ids=["default", "memo", "memo-unshared-loops"],
)
def test_shared_grammar_concurrent_matchers_equal_serial(setup, limits) -> None:
    grammar, vocab, docs = setup
    serial = [replay(cfgmask.compile(grammar, vocab), ids) for ids in docs]

    # a new compiled grammar: its mask cache (and memo, and shared loop walks) are cold
    compiled = cfgmask.compile(grammar, vocab, _strategy=limits)
    assert compiled.stats["cache_entries"] == 0
    start = threading.Barrier(N_THREADS)
    results: dict[int, list[bytes]] = {}
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            start.wait()
            results[i] = replay(compiled, docs[i % len(docs)], fork_at=i % 7)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(N_THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for i in range(N_THREADS):
        assert results[i] == serial[i % len(docs)], f"thread {i} disagrees with the serial replay"
    assert compiled.stats["cache_entries"] > 0


def test_batch_fill_on_a_thread_pool_equals_serial(setup) -> None:
    grammar, vocab, docs = setup
    compiled = cfgmask.compile(grammar, vocab)
    matchers = [cfgmask.Matcher(compiled) for _ in range(N_THREADS)]
    steps = [docs[i % len(docs)] for i in range(N_THREADS)]
    batch = cfgmask.allocate_bitmask(N_THREADS, vocab.size)
    one = cfgmask.allocate_bitmask(1, vocab.size)
    for k in range(max(len(s) for s in steps)):
        live = [i for i in range(N_THREADS) if k < len(steps[i])]
        cfgmask.fill_bitmasks([matchers[i] for i in live], batch, threads=8, rows=live)
        for i in live:
            matchers[i].fill_bitmask(one)
            assert np.array_equal(batch[i], one[0]), f"row {i} step {k}"
            assert matchers[i].accept_token(steps[i][k])


SQL = [
    "SELECT id, name FROM users WHERE active = 1 ORDER BY name;",
    "SELECT c.name, COUNT(DISTINCT o.id) AS n FROM customers c JOIN orders o ON o.cid = c.id "
    "GROUP BY c.name;",
    "UPDATE accounts SET balance = balance - 100 WHERE id = 7;",
]


def test_composed_entries_built_concurrently_equal_serial() -> None:
    """Cold caches filled by many threads at once where entries are composed from callees'
    (sql.lark: recursion through the grammar's lock), taken from donors and block wraps (a
    Snowplow schema: maxLength strings in an object open to other keys), and walked through the
    shared flat-chart DFA: every thread's masks equal a serial replay's."""
    vocab = cfgmask.Vocabulary.llama3()
    enc = quicktok.get_encoding("llama3")
    bench = ROOT / "tests" / "corpora" / "jsonschemabench" / "Snowplow.jsonl"
    case = next(json.loads(x) for x in bench.read_text().splitlines() if '"Snowplow/sp_13_Normalized"' in x)
    cases = [
        (cfgmask.Grammar.from_lark((ROOT / "grammars" / "sql.lark").read_text()), SQL),
        (
            cfgmask.Grammar.from_json_schema(case["schema"], whitespace="compact"),
            [json.dumps(t["data"], separators=(",", ":")) for t in case["tests"] if t["valid"]],
        ),
    ]
    for grammar, texts in cases:
        docs = [list(enc.encode(t)) for t in texts]
        serial = [replay(cfgmask.compile(grammar, vocab), ids) for ids in docs]
        compiled = cfgmask.compile(grammar, vocab)
        start = threading.Barrier(8)
        results: dict[int, list[bytes]] = {}
        errors: list[BaseException] = []

        def work(i: int, compiled=compiled, docs=docs, start=start, results=results, errors=errors) -> None:
            try:
                start.wait()
                results[i] = replay(compiled, docs[i % len(docs)])
            except BaseException as e:  # noqa: BLE001 - reported below
                errors.append(e)

        threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors
        for i in range(8):
            assert results[i] == serial[i % len(docs)], f"thread {i} disagrees with the serial replay"
        stats = compiled.stats
        assert stats["composed_entries"] + stats["donor_entries"] > 0 and stats["flat_configs"] > 0, stats
