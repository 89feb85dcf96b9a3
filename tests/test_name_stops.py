"""The upward filter's name stops (csrc/walk.c, name_stops): a rest of an uncertain token after its
rule exits, whose first byte after a run of name bytes no state the rule's callers reach through
name bytes reads (or a non-ASCII lead byte, then a byte no state reached on it reads), dies there
without a chart step.  Every state's entry must be the same as with every rest read through the
upward chart, and as a plain walk's."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given

import cfgmask
from cfgmask import _core
from cfgmask.compile.strategy import Strategy

from .strategies import Vocab, vocabularies
from .test_engine_differential import _vocab
from .test_entries import (
    EXPR_PIECES,
    assert_same_entries,
    entries,
    expression_grammars,
    shipped,
)


def _name_stops_same(g: cfgmask.Grammar, vocab: cfgmask.Vocabulary, every: bool) -> int:
    """Every state's entry with the name stops (in every filter, or as by default) equal to
    each rest read through the upward chart; how many questions the stops answered."""
    on = {"name_stops": 1} if every else {}
    before = _core.name_stop_hits()
    fast = cfgmask.compile(g, vocab, _strategy=Strategy(**on))
    fast_entries = entries(fast)
    hits = _core.name_stop_hits() - before
    slow = cfgmask.compile(g, vocab, _strategy=Strategy(name_stops=0))
    for s, (a, b) in enumerate(zip(fast_entries, entries(slow), strict=True)):
        assert np.array_equal(a[0], b[0]), f"state {s}: accepted tokens differ"
        assert np.array_equal(a[1], b[1]), f"state {s}: uncertain tokens differ"
    return hits


@pytest.mark.parametrize("name", ["sql.lark", "c.gbnf"])
def test_name_stops_taken_and_same_entries_llama3(name: str) -> None:
    """sql.lark's names are called from everywhere, and an alias may follow a name: a Llama-3 word
    token with a non-ASCII letter (` František`, ` Nguyễn`) leaves the name at each position, and
    each rest dies on the letter's bytes (after the `%ignore /\\s+/` blanks' Unicode spaces are
    told apart by their second byte).  The stops answer thousands of those rests by default."""
    hits = _name_stops_same(shipped(name), cfgmask.Vocabulary.llama3(), every=False)
    if name.endswith(".lark"):
        assert hits > 1000, hits


# Names followed by what may follow a name in each: an alias (a name right after a name), blanks
# that include Unicode spaces (C2 A0, E1 9A 80: their lead bytes go on after a name), quoted names,
# strings and comments (which read any byte, but not right after a name), case-insensitive
# keywords (Python's IGNORECASE: `s` also matches U+017F, C5 BF; `k` U+212A, E2 84 AA), a letter
# whose bytes the grammar itself reads after a name (é, C3 A9: the stops must not drop it), or
# only after more name bytes.
NAME_STOP_GRAMMARS = [
    cfgmask.Grammar.from_lark(
        'start: item ("," item)*\nitem: expr (AS? NAME)? | SK NAME\n'
        '?expr: NAME | NAME "(" expr ")" | STRING | "-" expr\n'
        "AS: /as(?!\\w)/i\nSK: /sk(?!\\w)/i\n"
        "NAME: /[a-z_][a-z0-9_]*/i | /\"[^\"\\n]+\"/\nSTRING: /'[^'\\n]*'/\n"
        "%ignore /\\s+/\n%ignore /--[^\\n]*/\n"
    ),
    cfgmask.Grammar.from_gbnf(
        'root ::= item ( "," item )*\nitem ::= expr ( " "? name )?\n'
        'expr ::= name | name "(" expr ")" | "-" expr\nname ::= [a-zA-Z_] [a-zA-Z0-9_]* ( "é" | "ñ" )?'
    ),
    cfgmask.Grammar.from_gbnf(
        'root ::= item ( "," item )*\nitem ::= expr ( "\\u00a0"? name )?\n'
        'expr ::= name | name "(" expr ")"\nname ::= [a-z_] [a-z0-9_]*'
    ),
    cfgmask.Grammar.from_gbnf(
        'root ::= item+\nitem ::= expr ( [ \\u1680]* name )? ( "\\"" [^"]* "\\"" )?\n'
        'expr ::= name | "(" item ")"\nname ::= [a-zA-Z]+'
    ),
    # an alias whose letters end in a non-ASCII one: read after name bytes only
    cfgmask.Grammar.from_gbnf(
        'root ::= item ( "," item )*\nitem ::= expr ( " "? alias )?\n'
        'expr ::= name | name "(" expr ")"\nname ::= [a-z_]+\nalias ::= [a-z]+ ( "é" | "ễ" )'
    ),
]
NAME_BYTES = [*b"abcsxkzASK_09"]
FIRST = [*b' "', *b"ab"]
TAILS = [
    "é", "ñ", "ễ", "š", "\u00a0", "\u1680", "\u017f", "\u212a", "(", ",", " ", "--", "'", '"', ")",
]  # fmt: skip


def name_vocab(seed: int) -> cfgmask.Vocabulary:
    """Every byte and 1,200 random name tokens: a blank, a quote or a letter, name bytes, then
    what may or may not go on after a name (none, one or two of TAILS), and a few more name bytes."""
    rng = np.random.default_rng(seed)
    toks = {bytes([b]) for b in range(256)}
    for _ in range(1200):
        body = bytes(rng.choice(NAME_BYTES, size=int(rng.integers(1, 12))).astype(np.uint8))
        tail = "".join(rng.choice(TAILS, size=int(rng.integers(0, 3)))).encode()
        more = bytes(rng.choice(NAME_BYTES, size=int(rng.integers(0, 4))).astype(np.uint8))
        toks.add(bytes([int(rng.choice(FIRST))]) + body + tail + more)
    return cfgmask.Vocabulary.from_token_bytes(sorted(toks))


@pytest.mark.parametrize("index", range(len(NAME_STOP_GRAMMARS)))
@pytest.mark.parametrize("seed", range(3))
def test_name_stops_same_entries_random_vocab(index: int, seed: int) -> None:
    """Random name tokens (a blank, a quote or a letter, then name bytes) ending in what may or may
    not go on after a name, one or two of them: the name stops in every filter against every rest
    read through the upward chart, and against plain walks."""
    vocab = name_vocab(seed)
    g = NAME_STOP_GRAMMARS[index]
    assert _name_stops_same(g, vocab, every=True) > 0
    assert_same_entries(g, vocab, name_stops=1)


@given(expression_grammars(), vocabularies(EXPR_PIECES))
def test_expression_grammars_name_stops_same_entries(text: str, v: Vocab) -> None:
    _name_stops_same(cfgmask.Grammar.from_gbnf(text), _vocab(v), every=True)
