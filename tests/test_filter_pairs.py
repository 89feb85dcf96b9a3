"""The upward filter's pair stops (csrc/walk.c, pair_stops): once a rule's filters have met enough
rests of its uncertain tokens (what is left of a token after the rule exits inside it), the bytes
its upward chart reads second after each first byte are made from the chart, and a rest whose
second byte is not among them dies without being asked (after a JSON value's `ws`, ` the` leaves
`the`, which dies on `h`).  Every state's entry must be the same as with every rest asked through
the upward chart, and as a plain walk's."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import cfgmask
from cfgmask import _core
from cfgmask.compile.limits import CompileLimits
from cfgmask.compile.strategy import Strategy

from .test_entries import WALKS_ONLY, entries, shipped

# the pair stops made at a rule's first rest
EVERY = Strategy(filter_pairs=1)


def _pairs_same(
    g: cfgmask.Grammar, vocab: cfgmask.Vocabulary, *, fast: Strategy | None = EVERY, **kw: Any
) -> int:
    """Every state's entry with the pair stops on (made at once, or as `fast` says) equal to each
    rest asked through the upward chart (and with `plain=True`, to a plain walk's; `limits`: the
    compile's); how many rests the pair stops answered."""
    before = _core.filter_pair_hits()
    limits, plain = kw.get("limits"), kw.get("plain", False)
    on = entries(cfgmask.compile(g, vocab, limits=limits, _strategy=fast))
    hits = _core.filter_pair_hits() - before
    for strategy in [Strategy(filter_pairs=0)] + ([WALKS_ONLY] if plain else []):
        slow = entries(cfgmask.compile(g, vocab, limits=limits, _strategy=strategy))
        differ = [
            s
            for s, (a, b) in enumerate(zip(on, slow, strict=True))
            if not (np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1]))
        ]
        assert not differ, f"states {differ[:8]}: entries differ from {strategy}"
    return hits


# Each rule its own: a name's rests after it exits go through its callers' upward chart.
OWN_RULES = CompileLimits(inline_max_states=1, inline_shared_states=1)

# Values of every kind after `ws`: Llama-3's blank-led tokens leave `ws` with a rest each, most of
# them dying on their second byte (` the`, ` and`), as in JSONSchemaBench's value starts.
ANY_VALUES = {
    "type": "object",
    "properties": {
        "a": {"type": "boolean"},
        "b": {},
        "c": {"type": "array", "items": {"type": "integer"}},
        "d": {"type": "string", "maxLength": 40},
    },
    "required": ["a", "b"],
}


@pytest.mark.parametrize("case", ["json_schema", "c.gbnf"])
def test_pairs_taken_and_same_entries_llama3(case: str) -> None:
    """The JSON Schema above with the pair stops as by default, and c.gbnf (whose names and
    blanks leave rests that many callers read on) with them made at a rule's first rest."""
    every = case == "c.gbnf"
    g = shipped(case) if every else cfgmask.Grammar.from_json_schema(json.dumps(ANY_VALUES))
    hits = _pairs_same(g, cfgmask.Vocabulary.llama3(), fast=EVERY if every else None)
    assert hits > (0 if every else 1000), hits


# A name whose callers read one of a few byte pairs after it (then more), so that which second
# bytes survive depends on the first; a caller's blank run reads on into another name.
PAIR_GRAMMARS = [
    'root ::= item ( "," item )*\nitem ::= name ( "=" [0-9] | ":" "x" name | "(" name ")" )?\n'
    "name ::= [a-z]+",
    'root ::= item+\nitem ::= name " "{0,3} ( "=" "=" | "-" [a-c] name | ";" )?\nname ::= [a-z] [a-z0-9]*',
    'root ::= "[" item ( "," " "? item )* "]"\nitem ::= word | word ":" ( "t" "rue" | "f" "alse" | [0-9]+ )\n'
    'word ::= [a-z]+ | "\'" [a-z]* "\'"',
]
PAIR_BYTES = [*b"abz09=:-(),; [']tfx\n"]


def _pair_vocab(
    seed: int, n: int = 900, heads: bytes = b"abz'", rests: list[int] = PAIR_BYTES, longest: int = 5
) -> cfgmask.Vocabulary:
    """Every byte, and tokens of a few name bytes (of `heads`) then two to `longest` bytes of the
    grammars' own (`rests`): their rests after the name are pairs the callers read, or not."""
    rng = np.random.default_rng(seed)
    toks = {bytes([b]) for b in range(256)}
    for _ in range(n):
        head = bytes(rng.choice([*heads], size=int(rng.integers(1, 4))).astype(np.uint8))
        rest = bytes(rng.choice(rests, size=int(rng.integers(2, longest + 1))).astype(np.uint8))
        toks.add(head + rest)
    return cfgmask.Vocabulary.from_token_bytes(sorted(toks))


@pytest.mark.parametrize("index", range(len(PAIR_GRAMMARS)))
@pytest.mark.parametrize("seed", range(3))
def test_pairs_same_entries_random_vocab(index: int, seed: int) -> None:
    """Random rests of two to five bytes: the pair stops against every rest asked through the
    upward chart, and against plain walks."""
    g = cfgmask.Grammar.from_gbnf(PAIR_GRAMMARS[index])
    assert _pairs_same(g, _pair_vocab(seed), limits=OWN_RULES, plain=True) > 0, PAIR_GRAMMARS[index]


# (head, rest) pieces of a random vocabulary for PAIR_GRAMMARS: a name's few bytes, then pair bytes
PAIR_PIECES = st.lists(
    st.tuples(
        st.sampled_from([b"a", b"ab", b"'", b"z9", b"a "]),
        st.lists(st.sampled_from(PAIR_BYTES), min_size=1, max_size=5).map(bytes),
    ),
    min_size=1,
    max_size=80,
)


@given(st.integers(0, len(PAIR_GRAMMARS) - 1), PAIR_PIECES)
def test_pairs_same_entries_hypothesis(index: int, pieces: list) -> None:
    toks = {bytes([x]) for x in range(256)} | {head + rest for head, rest in pieces}
    g = cfgmask.Grammar.from_gbnf(PAIR_GRAMMARS[index])
    _pairs_same(g, cfgmask.Vocabulary.from_token_bytes(sorted(toks)), limits=OWN_RULES)
