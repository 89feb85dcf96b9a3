"""The direct walk's threshold (``Strategy.direct_walk_states``, csrc/grammar.c; docs/design.md
section 7, "A direct walk's threshold met by many-property objects").

A set with at least that many scanning states not in the cache walks the whole trie with the
real chart instead of building the states' entries.  An object of many properties with unbounded
strings and ``additionalProperties`` (Snowplow sp_0 without its ``maxLength``s) holds, after
``","``, one such state per remaining name plus the free key's: at 33 it walked the trie (2.5 ms a
mask), at 64 it builds the entries, which the object's later keys reuse.  Both paths must give
the same masks, and the test proves that the old threshold and the default took different paths
at the same steps, so that it cannot pass with the default back at 33.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import cfgmask
from cfgmask.compile.strategy import Strategy

CORPUS = Path(__file__).parent / "corpora" / "jsonschemabench"


def _replay(compiled: cfgmask.CompiledGrammar, tokens: list[int]) -> tuple[list[np.ndarray], list[dict]]:
    m = cfgmask.Matcher(compiled)
    mask = cfgmask.allocate_bitmask(1, compiled.vocab.size)
    masks, stats = [], []
    for t in [*tokens, None]:
        m.fill_bitmask(mask, 0)
        masks.append(mask.copy())
        stats.append(m._h.mask_stats())
        if t is None:
            break
        assert m.accept_token(t)
    assert m.is_accepting()
    return masks, stats


def _strip(node: object) -> object:
    if isinstance(node, dict):
        return {k: _strip(v) for k, v in node.items() if k not in ("maxLength", "minLength")}
    if isinstance(node, list):
        return [_strip(v) for v in node]
    return node


def test_many_property_object_builds_entries_below_the_threshold() -> None:
    quicktok = pytest.importorskip("quicktok")
    enc = quicktok.get_encoding("llama3")
    vocab = cfgmask.Vocabulary.llama3()
    rows = [json.loads(line) for line in (CORPUS / "Snowplow.jsonl").read_text().splitlines() if line.strip()]
    (row,) = [r for r in rows if r["id"] == "Snowplow/sp_0_Normalized"]
    doc = next(t["data"] for t in row["tests"] if t["valid"])
    tokens = enc.encode(json.dumps(doc, separators=(",", ":")))
    g = cfgmask.Grammar.from_json_schema(json.dumps(_strip(row["schema"])))
    runs = {}
    for name, strategy in (
        ("default", None),
        ("at 33", Strategy(direct_walk_states=33)),
        ("never", Strategy(direct_walk_states=2**31)),
    ):
        cfgmask.clear_caches()
        compiled = cfgmask.compile(g, vocab, _strategy=strategy) if strategy else cfgmask.compile(g, vocab)
        runs[name] = _replay(compiled, tokens)
    base_masks, base_stats = runs["default"]
    for name in ("at 33", "never"):
        masks = runs[name][0]
        for step, (a, b) in enumerate(zip(base_masks, masks, strict=True)):
            assert np.array_equal(a, b), f"{name}: step {step}"
    # where the old threshold walked the trie (no state looked up, tokens checked), the default
    # looked up the entries of at least 33 states
    at33 = runs["at 33"][1]
    wide = [i for i, o in enumerate(at33) if o["states"] == 0 and o["checked"] > 0]
    assert wide, "no set reached 33 uncached states"
    assert all(base_stats[i]["states"] >= 33 for i in wide), [(i, base_stats[i]) for i in wide]
