"""GrammarCache: memory LRU, the on-disk format, and what happens to bad files."""

from __future__ import annotations

import json
import multiprocessing
import os

import numpy as np
import pytest

import cfgmask
from cfgmask import grammar_cache
from cfgmask.grammar_cache import FORMAT_VERSION, GrammarCache, decode_tables, encode_tables

SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 8}, "n": {"type": "integer"}},
    "required": ["name", "n"],
}


@pytest.fixture(scope="module")
def vocab() -> cfgmask.Vocabulary:
    words = [b"{", b"}", b'"', b"name", b"n", b":", b",", b"1", b"2", b"a", b"b", b" ", b'{"', b'":']
    return cfgmask.Vocabulary.from_token_bytes([b"", *words], stop_token_ids=[0])


def _texts(compiled: cfgmask.CompiledGrammar, prefixes: list[bytes]) -> list[list[int]]:
    """The allowed tokens after each prefix (the observable behaviour of a compiled grammar)."""
    out = []
    for p in prefixes:
        m = cfgmask.Matcher(compiled)
        assert m.accept_bytes(p)
        out.append(m.allowed_tokens().tolist())
    return out


PREFIXES = [b"", b"{", b'{"name":"ab', b'{"name":"a","n":1']


def test_memory_hits_and_lru_bound(vocab: cfgmask.Vocabulary) -> None:
    cache = GrammarCache(max_entries=2)
    a = cache.get("json_schema", SCHEMA, vocab)
    assert cache.get("json_schema", json.dumps(SCHEMA, separators=(",", ":")), vocab) is a  # text == object
    assert (cache.stats.hits, cache.stats.misses) == (1, 1)
    b = cache.get("regex", "a+b", vocab)
    assert cache.get("json_schema", SCHEMA, vocab, {"whitespace": "compact"}) is not a  # options count
    assert len(cache) == 2
    assert cache.get("regex", "a+b", vocab) is b  # the most recent two stayed
    assert cache.get("json_schema", SCHEMA, vocab) is not a  # the oldest was dropped
    assert cache.stats.misses == 4


def test_key_depends_on_every_part(vocab: cfgmask.Vocabulary) -> None:
    other = cfgmask.Vocabulary.from_token_bytes([b"", b"a", b"b"], stop_token_ids=[0])
    cache = GrammarCache()
    keys = {
        cache.key("regex", "a+", vocab),
        cache.key("regex", "a+b", vocab),
        cache.key("gbnf", "a+", vocab),
        cache.key("regex", "a+", other),
        cache.key("json_schema", SCHEMA, vocab),
        cache.key("json_schema", SCHEMA, vocab, {"canonical": False}),
    }
    assert len(keys) == 6


def test_disk_round_trip_same_masks(vocab: cfgmask.Vocabulary, tmp_path: os.PathLike[str]) -> None:
    first = GrammarCache(directory=tmp_path)
    compiled = first.get("json_schema", SCHEMA, vocab)
    assert first.stats.disk_writes == 1
    files = list((tmp_path / f"v{FORMAT_VERSION}").iterdir())  # type: ignore[operator]
    assert [f.suffix for f in files] == [".cfgm"]
    cfgmask.clear_caches()  # a new process: nothing in memory
    second = GrammarCache(directory=tmp_path)
    again = second.get("json_schema", SCHEMA, vocab)
    assert (second.stats.disk_hits, second.stats.misses) == (1, 0)
    assert again is not compiled
    assert _texts(again, PREFIXES) == _texts(compiled, PREFIXES)


def test_tables_encode_decode_exact(vocab: cfgmask.Vocabulary) -> None:
    tables = cfgmask.compile(cfgmask.Grammar.from_gbnf('root ::= "a" [0-9]+ | "b"'), vocab).tables
    back = decode_tables(encode_tables(tables, "k"), "k")
    assert back.rule_names == tables.rule_names and back.start_rule == tables.start_rule
    for name in grammar_cache._ARRAYS:
        a, b = getattr(tables, name), getattr(back, name)
        assert a.dtype == b.dtype and np.array_equal(a, b), name


@pytest.mark.parametrize(
    "damage",
    [
        lambda d: d[:-1],  # truncated
        lambda d: d[:40] + bytes([d[40] ^ 1]) + d[41:],  # a flipped bit in the header
        lambda d: d[:-40] + bytes([d[-40] ^ 0x80]) + d[-39:],  # a flipped bit in the arrays
        lambda d: b"garbage",
        lambda d: b"",
    ],
)
def test_corrupt_file_is_ignored_and_rewritten(
    vocab: cfgmask.Vocabulary, tmp_path: os.PathLike[str], damage: object
) -> None:
    cache = GrammarCache(directory=tmp_path)
    good = cache.get("regex", "(ab|ba)+", vocab)
    path = cache.path(cache.key("regex", "(ab|ba)+", vocab))
    assert path is not None
    original = path.read_bytes()
    path.write_bytes(damage(original))  # type: ignore[operator]
    fresh = GrammarCache(directory=tmp_path)
    compiled = fresh.get("regex", "(ab|ba)+", vocab)
    assert fresh.stats.disk_rejects == 1
    assert (fresh.stats.disk_hits, fresh.stats.misses, fresh.stats.disk_writes) == (0, 1, 1)
    assert path.read_bytes() == original  # rewritten whole
    assert _texts(compiled, [b"", b"a", b"ab"]) == _texts(good, [b"", b"a", b"ab"])


def test_file_of_another_key_or_format_is_not_read(
    vocab: cfgmask.Vocabulary, tmp_path: os.PathLike[str]
) -> None:
    cache = GrammarCache(directory=tmp_path)
    cache.get("regex", "a", vocab)
    cache.get("regex", "b", vocab)
    pa = cache.path(cache.key("regex", "a", vocab))
    pb = cache.path(cache.key("regex", "b", vocab))
    assert pa is not None and pb is not None
    pb.write_bytes(pa.read_bytes())  # a valid file under the wrong name
    fresh = GrammarCache(directory=tmp_path)
    m = cfgmask.Matcher(fresh.get("regex", "b", vocab))
    assert fresh.stats.disk_rejects == 1
    assert m.allowed_tokens().tolist() == [vocab.token_id("b")]
    with pytest.raises(ValueError, match="format"):
        data = bytearray(pa.read_bytes())
        data[len(grammar_cache._MAGIC)] = FORMAT_VERSION + 1
        body = bytes(data[:-32])
        decode_tables(body + grammar_cache.hashlib.sha256(body).digest(), cache.key("regex", "a", vocab))


def test_bad_requests_raise_and_cache_nothing(vocab: cfgmask.Vocabulary, tmp_path: os.PathLike[str]) -> None:
    cache = GrammarCache(directory=tmp_path)
    with pytest.raises(cfgmask.GrammarError, match="line 1, column"):
        cache.get("gbnf", "root ::= (", vocab)
    with pytest.raises(cfgmask.GrammarError, match="unknown grammar kind 'yaml'"):
        cache.get("yaml", "a: 1", vocab)
    with pytest.raises(cfgmask.GrammarError, match="option 'indent' does not apply to json_schema"):
        cache.get("json_schema", SCHEMA, vocab, {"indent": 2})
    with pytest.raises(cfgmask.GrammarError, match="option 'canonical' must be bool"):
        cache.get("json_schema", SCHEMA, vocab, {"canonical": "yes"})
    assert len(cache) == 0 and not any((tmp_path / f"v{FORMAT_VERSION}").glob("*.cfgm"))  # type: ignore[operator]


def test_ebnf_structural_tag_and_regex_flavor_kinds(vocab: cfgmask.Vocabulary) -> None:
    """The kinds vLLM requests name reach their front ends with their options."""
    cache = GrammarCache()
    ebnf = cfgmask.Matcher(cache.get("ebnf", 'main ::= "a" Regex("[0-9]+")', vocab, {"start": "main"}))
    assert ebnf.accept_bytes(b"a12") and ebnf.is_accepting()
    spec = {"type": "structural_tag", "format": {"type": "const_string", "value": "ab"}}
    tag = cfgmask.Matcher(cache.get("structural_tag", spec, vocab))
    assert tag.accept_bytes(b"ab") and tag.is_accepting()
    ecma = cfgmask.Matcher(cache.get("regex", r"\d+", vocab, {"flavor": "ecmascript"}))
    assert ecma.accept_bytes(b"42") and not ecma.fork().accept_bytes("١".encode())
    with pytest.raises(cfgmask.GrammarError, match="option 'flavor' does not apply to gbnf"):
        cache.get("gbnf", 'root ::= "a"', vocab, {"flavor": "python"})


def _worker(args: tuple[str, int]) -> list[int]:
    directory, i = args
    vocab = cfgmask.Vocabulary.from_token_bytes([b"", b"a", b"b", b"ab"], stop_token_ids=[0])
    cache = GrammarCache(directory=directory)
    compiled = cache.get("regex", "(ab)+", vocab)
    return cfgmask.Matcher(compiled).allowed_tokens().tolist()


def test_concurrent_processes_share_the_directory(tmp_path: os.PathLike[str]) -> None:
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(2) as pool:
        results = pool.map(_worker, [(str(tmp_path), i) for i in range(6)])
    assert all(r == [1, 3] for r in results)
    names = [p.name for p in (tmp_path / f"v{FORMAT_VERSION}").iterdir()]  # type: ignore[operator]
    assert len(names) == 1 and names[0].endswith(".cfgm")  # no temporary files left
