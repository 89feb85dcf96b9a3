"""What cm_grammar_new derives of each state's byte row (csrc/grammar.c ``derive``, which reads
a row of up to 64 classes as a bit per class, a wider one as runs), against the rows
themselves: the bytes with a transition and whether there is one, and the refusal of a target
that is neither -1 nor a state of the row's own rule, at every class of a row (run starts,
middles and ends); in the compiler's layout (each rule's states one block) and in a permuted
one, so that no check may lean on the blocks."""

from __future__ import annotations

import dataclasses
import json
import string

import numpy as np
import pytest

import cfgmask
from cfgmask import _core
from cfgmask.compile.compiled import MatcherLimits, _settings, clear_caches
from cfgmask.compile.strategy import DEFAULT
from cfgmask.compile.tables import Tables
from cfgmask.errors import MatcherError

from .test_tables_raw import _as_raw

BYTES = cfgmask.Vocabulary.from_token_bytes([bytes([b]) for b in range(256)] + [b'{"', b'":', b"12", b"ab"])

SCHEMAS = {
    "object": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"enum": ["x", "y"]}}},
    "string64": {"type": "string", "maxLength": 64},
    "strings": {
        "type": "object",
        "properties": {"s": {"type": "string", "maxLength": 40}, "t": {"type": "string"}},
    },
    "nested": {
        "type": "array",
        "items": {"type": "object", "properties": {"k": {"type": "string", "pattern": "^[a-f0-9]{2,5}$"}}},
    },
    # more than 64 global byte classes (70 first bytes, each its own continuation): the rows
    # derive walks as runs, not as the bit per class of narrower tables
    "wide": {"enum": [c * 3 for c in string.ascii_letters + string.digits + "-_.~!@#$"]},
}


def _tables(name: str) -> Tables:
    clear_caches()
    g = cfgmask.Grammar.from_json_schema(json.dumps(SCHEMAS[name]))
    return cfgmask.compile(g, BYTES, limits=cfgmask.CompileLimits(unroll_budget=1 << 12)).tables


def _handle(t: Tables) -> _core.GrammarHandle:
    return _core.GrammarHandle(t, BYTES._handle(), list(BYTES.stop_ids), _settings(MatcherLimits(), DEFAULT))


def _expected(t: Tables) -> list[tuple[bool, list[int]]]:
    """Per state: any target, and the bytes b with trans[s, byte_class[b]] >= 0 as 8 words."""
    out = []
    for s in range(t.n_states):
        row = np.asarray(t.trans[s])
        on = row[np.asarray(t.byte_class, dtype=np.intp)] >= 0
        words = np.packbits(on.reshape(8, 32)[:, ::-1], axis=1).view(">u4").ravel()
        out.append((bool((row >= 0).any()), [int(w) for w in words]))
    return out


def _got(t: Tables) -> list[tuple[bool, list[int]]]:
    h = _handle(t)
    return [h.state_bytes(s) for s in range(t.n_states)]


def _csr(off: np.ndarray, cols: list[np.ndarray], perm: np.ndarray, inv: np.ndarray) -> list[np.ndarray]:
    """A CSR over the states renumbered: new state inv[s] has old state s's edges."""
    n = len(perm)
    counts = np.diff(off.astype(np.int64))[perm]
    new_off = np.zeros(n + 1, dtype=np.uint32)
    np.cumsum(counts, out=new_off[1:])
    idx = np.concatenate(
        [np.arange(off[s], off[s + 1], dtype=np.int64) for s in perm] or [np.zeros(0, np.int64)]
    )
    return [new_off] + [np.asarray(c)[idx].astype(np.uint32) for c in cols]


def _permuted(t: Tables, seed: int) -> Tables:
    """The same grammar with its states renumbered at random (rules no longer blocks)."""
    n = t.n_states
    perm = np.random.default_rng(seed).permutation(n)  # new state i is old state perm[i]
    inv = np.empty(n, dtype=np.int64)
    inv[perm] = np.arange(n)
    trans = np.asarray(t.trans)[perm]
    trans = np.where(trans >= 0, inv[np.maximum(trans, 0)], -1).astype(np.int32)
    ref_off, ref_rule, ref_target = _csr(t.ref_off, [t.ref_rule, t.ref_target], perm, inv)
    tok_off, tok_set, tok_target = _csr(t.tok_off, [t.tok_set, t.tok_target], perm, inv)
    return dataclasses.replace(
        t,
        trans=trans,
        state_rule=np.asarray(t.state_rule)[perm].astype(np.uint32),
        accepting=np.asarray(t.accepting)[perm].astype(np.uint8),
        ref_off=ref_off,
        ref_rule=ref_rule,
        ref_target=inv[ref_target].astype(np.uint32),
        rule_start=inv[np.asarray(t.rule_start)].astype(np.uint32),
        tok_off=tok_off,
        tok_set=tok_set,
        tok_target=inv[tok_target].astype(np.uint32),
    )


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_row_bytes_against_the_rows(name: str) -> None:
    t = _tables(name)
    assert "_raw" in vars(t)
    want = _expected(dataclasses.replace(t))
    assert _got(t) == want  # raw, rules as blocks
    arrays = dataclasses.replace(t)
    assert _got(arrays) == want
    p = _permuted(arrays, 1)
    if len(t.rule_names) > 1:
        assert np.any(np.diff(p.state_rule.astype(np.int64)) < 0)  # not blocks: the run walk
    assert _got(p) == _expected(p)
    assert _got(_as_raw(p)) == _expected(p)


def _valid(t: Tables, s: int, v: int) -> bool:
    return v == -1 or (0 <= v < t.n_states and int(t.state_rule[v]) == int(t.state_rule[s]))


@pytest.mark.parametrize("name", ["nested", "strings", "wide"])
@pytest.mark.parametrize("layout", ["blocks", "permuted"])
def test_bad_targets_refused_at_every_class(layout: str, name: str) -> None:
    """Each class of a row (every lane of the sixteen-class compares (``strings``: 31 classes),
    the four-class ones and the tail) with a target
    just outside the rule's block, in another rule, out of range, below -1, or a legal one at
    the block's ends: refused exactly when the reference says it is broken."""
    base = dataclasses.replace(_tables(name))
    if layout == "permuted":
        base = _permuted(base, 2)
    n, k = base.n_states, base.trans.shape[1]
    assert k % 4 != 0 or k > 4  # some tail or several compares
    assert (k > 64) == (name == "wide")  # both ways derive reads a row
    assert (16 < k < 64) == (name == "strings")  # sixteen at once, then four, then the tail
    rng = np.random.default_rng(3)
    states = rng.choice(n, size=min(n, 6), replace=False)
    sr = np.asarray(base.state_rule).astype(np.int64)
    for s in states:
        same = np.flatnonzero(sr == sr[s])
        other = np.flatnonzero(sr != sr[s])
        values = {-2, -(1 << 31), n, n + 5, (1 << 31) - 1, int(same.min()), int(same.max())}
        values |= {int(same.min()) - 1, int(same.max()) + 1}
        if other.size:
            values.add(int(other[0]))
        for c in range(k):
            for v in sorted(values):
                trans = np.asarray(base.trans).copy()
                trans[s, c] = v
                bad = dataclasses.replace(base, trans=trans)
                for tab in (bad, _as_raw(bad)):
                    if _valid(base, int(s), v):
                        h = _handle(tab)
                        assert h.state_bytes(int(s)) == _expected(bad)[s]
                    else:
                        with pytest.raises(MatcherError):
                            _handle(tab)
