"""The engine on a real 128k vocabulary (Llama-3, from the quicktok-v1 wheel).

Along real documents under grammars/json.gbnf: every true next token is
allowed, stop tokens appear exactly at the end, and at sampled steps the mask
agrees with the reference on a random sample of tokens plus every allowed one.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest

import cfgmask

from .reference import ReferenceMatcher

quicktok = pytest.importorskip("quicktok")

ROOT = Path(__file__).resolve().parent.parent

DOCS = [
    {"name": "Alice", "age": 31, "email": "alice@example.com", "tags": ["admin", "dev"]},
    {"id": 7, "price": -12.5e-3, "ok": True, "none": None, "nested": {"a": [1, 2, {"b": []}], "c": {}}},
    {"text": 'quote " backslash \\ newline \n tab \t unicode é € 😀', "empty": ""},
    [1, -0.0, 3.25, 1e10, "x", [], {}, [[[]]], False],
    {"items": [{"sku": f"A-{i}", "qty": i, "price": i * 1.5} for i in range(6)]},
]


@pytest.fixture(scope="module")
def llama3() -> cfgmask.Vocabulary:
    return cfgmask.Vocabulary.llama3()


@pytest.fixture(scope="module")
def json_gbnf() -> cfgmask.Grammar:
    return cfgmask.Grammar.from_gbnf((ROOT / "grammars" / "json.gbnf").read_text())


def _bit(mask: np.ndarray, t: int) -> bool:
    return bool((int(mask[0, t >> 5]) >> (t & 31)) & 1)


def _texts() -> list[str]:
    out = []
    for d in DOCS:
        out += [json.dumps(d), json.dumps(d, separators=(",", ":")), json.dumps(d, indent=2)]
        out.append(json.dumps(d, ensure_ascii=False))
    return out


@pytest.mark.parametrize("text", _texts())
def test_true_next_token_always_allowed(llama3, json_gbnf, text) -> None:
    compiled = cfgmask.compile(json_gbnf, llama3)
    enc = quicktok.get_encoding("llama3")
    m = cfgmask.Matcher(compiled)
    mask = cfgmask.allocate_bitmask(1, llama3.size)
    for i, t in enumerate(enc.encode(text)):
        m.fill_bitmask(mask)
        assert _bit(mask, t), f"token {i} {enc.decode_single_token_bytes(t)!r} blocked"
        assert not any(_bit(mask, s) for s in llama3.stop_ids) or m.is_accepting()
        assert m.accept_token(t)
    m.fill_bitmask(mask)
    assert m.is_accepting()
    assert all(_bit(mask, s) for s in llama3.stop_ids)
    assert m.accept_token(llama3.stop_ids[0]) and m.is_terminated()


def test_sampled_steps_equal_reference(llama3, json_gbnf) -> None:
    compiled = cfgmask.compile(json_gbnf, llama3)
    ref = ReferenceMatcher(json_gbnf.ir)
    enc = quicktok.get_encoding("llama3")
    rnd = random.Random(1234)
    text = json.dumps(DOCS[1])
    ids = enc.encode(text)
    m = cfgmask.Matcher(compiled)
    mask = cfgmask.allocate_bitmask(1, llama3.size)
    prefix = b""
    for i, t in enumerate(ids):
        if i % 4 == 0:
            m.fill_bitmask(mask)
            allowed = m.allowed_tokens()
            sample = set(rnd.sample(range(llama3.size), 150)) | set(
                rnd.sample(list(allowed), min(150, len(allowed)))
            )
            for tok in sorted(sample):
                data = llama3.tokens[tok]
                expected = tok not in llama3.special_ids and ref.is_prefix(prefix + data)
                if tok in llama3.stop_ids:
                    expected = ref.accepts(prefix)
                assert _bit(mask, tok) == expected, (prefix, data)
        assert m.accept_token(t)
        prefix += llama3.tokens[t]


def test_random_generation_under_json(llama3, json_gbnf) -> None:
    compiled = cfgmask.compile(json_gbnf, llama3)
    rng = np.random.default_rng(7)
    for _ in range(3):
        m = cfgmask.Matcher(compiled)
        mask = cfgmask.allocate_bitmask(1, llama3.size)
        out = b""
        for _ in range(60):
            m.fill_bitmask(mask)
            allowed = m.allowed_tokens()
            assert allowed.size
            t = int(rng.choice(allowed))
            assert m.accept_token(t)
            if t in llama3.stop_ids:
                break
            out += llama3.tokens[t]
        if m.is_terminated():
            json.loads(out)
        else:
            assert ReferenceMatcher(json_gbnf.ir).is_prefix(out)
