"""Cache entries built the cheap ways equal the entries of whole trie walks.

Three shortcuts build a state's mask-cache entry (csrc/cache.c picks one of csrc/compose.c,
csrc/donor.c, csrc/flat.c): *composition* (a state that
calls rules takes its callees' entries and has its own chart decide only what they leave
uncertain), *donors* (a state that goes where a string loop goes on most bytes takes the loop's
entry and walks again only the other first bytes) and *flat walks* (a lazily built DFA over
private charts whose live items all wait on the unknown caller, and with *flat calls* over the
chart suffixes of rules called inside a token).  All claim the very entry that
a walk of the whole trie through the private Earley chart gives.  Here every state's entry --
accepted tokens and uncertain tokens -- is compared bit for bit with the shortcuts off: on the
shipped grammars and on JSON Schemas with Llama-3, and on random grammars, vocabularies and
lookahead markers under hypothesis.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import cfgmask
from cfgmask import _core, ir
from cfgmask.compile.strategy import Strategy
from cfgmask.vocab import FORMAT_SAMPLES

from .helpers import core_switch, masks_along, same_entries
from .strategies import Vocab, grammars, vocabularies
from .test_engine_differential import _vocab

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "tests" / "corpora" / "jsonschemabench"
WALKS_ONLY = Strategy(compose_entries=False, flat_walks=False, share_loop_walks=False)


def entries(compiled: cfgmask.CompiledGrammar) -> list[tuple[np.ndarray, np.ndarray]]:
    return [compiled._handle.entry(s) for s in range(compiled.tables.n_states)]


def assert_switch_same_entries(
    switch: Callable[..., object],
    counter: Callable[[], int],
    g: cfgmask.Grammar,
    vocab: cfgmask.Vocabulary,
    *,
    what: str,
    plain: bool = False,
    limits: cfgmask.CompileLimits | None = None,
    strategy: Strategy | None = None,
) -> int:
    """Every state's entry, caches cleared, with ``switch`` (a ``_core.*_enable``) on equal to it
    off (``what`` names the off side in messages) and, with ``plain``, to whole walks'; how far
    ``counter`` moved with it on (it must not move with it off)."""

    def build(on: bool) -> tuple[list, int]:
        with core_switch(switch, on):
            n0 = counter()
            got = entries(cfgmask.compile(g, vocab, limits=limits, _strategy=strategy or Strategy()))
            return got, counter() - n0

    on, moved = build(True)
    off, none = build(False)
    assert none == 0, f"{what}: the counter moved with the switch off"
    same_entries(on, off, what)
    if plain:
        same_entries(
            on, entries(cfgmask.compile(g, vocab, limits=limits, _strategy=WALKS_ONLY)), "whole walks"
        )
    return moved


def assert_same_entries(g: cfgmask.Grammar | ir.Grammar, vocab: cfgmask.Vocabulary, **limits: int) -> dict:
    """Every state's entry equal with the shortcuts on (or as `limits` say) and off; the stats
    of the shortcut build."""
    fast = cfgmask.compile(g, vocab, _strategy=Strategy(**limits))
    slow = cfgmask.compile(g, vocab, _strategy=WALKS_ONLY)
    for s, (a, b) in enumerate(zip(entries(fast), entries(slow), strict=True)):
        assert np.array_equal(a[0], b[0]), f"state {s}: accepted tokens differ"
        assert np.array_equal(a[1], b[1]), f"state {s}: uncertain tokens differ"
    return fast.stats


def shipped(name: str) -> cfgmask.Grammar:
    text = (ROOT / "grammars" / name).read_text()
    return cfgmask.Grammar.from_lark(text) if name.endswith(".lark") else cfgmask.Grammar.from_gbnf(text)


@pytest.mark.parametrize("name", ["sql.lark", "sql.gbnf", "c.gbnf", "arithmetic.gbnf"])
def test_shipped_grammars_same_entries(name: str) -> None:
    stats = assert_same_entries(shipped(name), cfgmask.Vocabulary.llama3())
    assert stats["composed_entries"] > 0 and stats["flat_configs"] > 0, stats


@pytest.mark.parametrize("shortcut", ["compose_entries", "flat_walks"])
def test_sql_lark_each_shortcut_alone(shortcut: str) -> None:
    other = {"compose_entries": "flat_walks", "flat_walks": "compose_entries"}[shortcut]
    stats = assert_same_entries(shipped("sql.lark"), cfgmask.Vocabulary.llama3(), **{other: False})
    assert stats["composed_entries" if shortcut == "compose_entries" else "flat_configs"] > 0, stats


@pytest.mark.parametrize("name", ["arithmetic.gbnf", "c.gbnf"])
def test_flat_sets_only_same_entries(name: str) -> None:
    """Flat walks without flat calls: a set that predicts a rule that reads leaves the DFA, and
    the subtree below it is walked with the chart (the expression chain of an operand)."""
    stats = assert_same_entries(shipped(name), cfgmask.Vocabulary.llama3(), flat_calls=False)
    assert stats["flat_configs"] > 0, stats


def test_flat_dead_bytes_same_entries() -> None:
    """The flat DFA takes a byte that no item of a configuration's last set reads as dead
    without loading and scanning a chart (csrc/flat.c, ``reads``): literal keys with shared
    prefixes, whose trie nodes have many children that die, and a key left open to any string;
    flat walks alone (no composition) against whole walks."""
    keys = ["audio_codec", "audio_channels", "bitrate", "bit_depth", "url", "u"]
    props: dict = {k: {"type": "integer"} for k in keys}
    props["urls"] = {"type": "array", "items": {"type": "string"}}
    schema = {
        "type": "object",
        "properties": props,
        "required": keys[:3],
        "additionalProperties": {"type": "number"},
    }
    g = cfgmask.Grammar.from_json_schema(json.dumps(schema))
    stats = assert_same_entries(g, cfgmask.Vocabulary.llama3(), compose_entries=False)
    assert stats["flat_configs"] > 0, stats


@pytest.mark.parametrize(("name", "order"), [("c.gbnf", "reversed"), ("arithmetic.gbnf", "shuffled")])
def test_flat_transitions_whatever_came_before(name: str, order: str) -> None:
    """A flat transition reuses what earlier ones left (csrc/flat.c): the configuration still
    loaded in the scratch chart, its sets' versions by content, so that the chart's closure memo
    holds across configurations, and the configuration a memoized closure made before.  So the
    entries are built here in another order than state order, flat walks alone (no compositions,
    which would build the callees' first), each against the whole walk of its state."""
    g = shipped(name)
    vocab = cfgmask.Vocabulary.llama3()
    fast = cfgmask.compile(g, vocab, _strategy=Strategy(compose_entries=False))
    slow = cfgmask.compile(g, vocab, _strategy=WALKS_ONLY)
    states = list(range(fast.tables.n_states))
    if order == "reversed":
        states.reverse()
    else:
        np.random.default_rng(12).shuffle(states)
    for s in states:
        a, b = fast._handle.entry(s), slow._handle.entry(s)
        assert np.array_equal(a[0], b[0]), f"state {s}: accepted tokens differ"
        assert np.array_equal(a[1], b[1]), f"state {s}: uncertain tokens differ"
    assert fast.stats["flat_configs"] > 0, fast.stats


def _tail_entries(compiled: cfgmask.CompiledGrammar) -> None:
    """Every state's entry of `compiled` equal to the entry with tail parts off (compositions as
    before: each byte edge walked from the state it leads to)."""
    off = cfgmask.compile(compiled.grammar, compiled.vocab, _strategy=Strategy(tail_parts=0))
    for s, (a, b) in enumerate(zip(entries(compiled), entries(off), strict=True)):
        assert np.array_equal(a[0], b[0]), f"state {s}: accepted tokens differ"
        assert np.array_equal(a[1], b[1]), f"state {s}: uncertain tokens differ"


@pytest.mark.parametrize("name", ["arithmetic.gbnf", "c.gbnf", "sql.gbnf"])
def test_tail_parts_taken_and_same_entries(name: str) -> None:
    """A whitespace position's byte edge into the next position (which calls an operand) takes
    the operand's tail part, walked once per (callee start, byte) and shared by every position
    (csrc/compose.c): the same entries as walking the edge, and as the whole walks (above)."""
    compiled = cfgmask.compile(shipped(name), cfgmask.Vocabulary.llama3())
    _tail_entries(compiled)
    stats = compiled.stats
    # shared: more byte edges took a tail part than there were tail parts to walk
    assert 0 < stats["tail_walks"] < stats["tail_uses"], stats


def test_tail_parts_past_the_cache_limit_same_entries() -> None:
    """Past max_cache_bytes a tail part is walked for one edge and freed, as entries are."""
    vocab = cfgmask.Vocabulary.llama3()
    g = shipped("arithmetic.gbnf")
    tiny = cfgmask.compile(g, vocab, matcher_limits=cfgmask.MatcherLimits(max_cache_bytes=1 << 16))
    full = cfgmask.compile(g, vocab, _strategy=Strategy(tail_parts=0))
    for s in range(0, tiny.tables.n_states, 3):
        a, b = tiny._handle.entry(s), full._handle.entry(s)
        assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1]), f"state {s}"
    kept = cfgmask.compile(g, vocab)
    for s in range(0, kept.tables.n_states, 3):
        kept._handle.entry(s)
    # the flat DFA alone passes the limit, so tail parts were walked again instead of kept
    assert tiny.stats["tail_walks"] > kept.stats["tail_walks"] > 0, (tiny.stats, kept.stats)


# A keyword, blanks, then an operand: the state right after the keyword calls nothing and reads
# only blanks, into the blank loop that calls the operand's rule.
KEYWORD_BLANKS = """root ::= "SELECT" [ \t]+ list ( [ ]+ "WHERE" [ ]+ list )?
list ::= item ( "," [ ]* item )*
item ::= [a-z]+ | [0-9]+ | "(" [ ]* list [ ]* ")"
"""


def _blank_states(compiled: cfgmask.CompiledGrammar) -> list[int]:
    """States that call nothing and read only blanks, each into a state that calls."""
    t = compiled.tables
    trans = np.asarray(t.trans).reshape(t.n_states, t.n_classes)
    cls, ref_off = np.asarray(t.byte_class), np.asarray(t.ref_off)
    out = []
    for s in range(t.n_states):
        targets = {int(trans[s, cls[b]]) for b in range(256) if trans[s, cls[b]] >= 0}
        blanks = {int(trans[s, cls[b]]) for b in b" \t" if trans[s, cls[b]] >= 0}
        if ref_off[s] == ref_off[s + 1] and targets and targets == blanks:
            if all(ref_off[y] < ref_off[y + 1] for y in targets):
                out.append(s)
    return out


def test_keyword_then_blanks_composed_from_tail_parts() -> None:
    """The state after `SELECT` (or `WHERE`) calls nothing, so it is no composition of callees;
    its byte edges lead into the blank loop before the operand, whose tail parts it takes
    (csrc/compose.c, cm_compose_edges): the same entry as a whole walk, built without one."""
    vocab = cfgmask.Vocabulary.llama3()
    g = cfgmask.Grammar.from_gbnf(KEYWORD_BLANKS)
    compiled = cfgmask.compile(g, vocab)
    states = _blank_states(compiled)
    assert len(states) >= 2, states  # after SELECT and after WHERE
    compiled._handle.entry(states[0])
    # its own entry composed, nothing else (the blank loop's tail parts are no entries)
    assert compiled.stats["composed_entries"] == 1 and compiled.stats["tail_walks"] > 0, compiled.stats
    assert_same_entries(g, vocab)
    _tail_entries(compiled)


# Tail parts for every byte edge, however few tokens the byte leads (by default only subtrees of
# 256 entries or more take them): the small vocabularies below have no such subtree.
EVERY_TAIL = Strategy(tail_parts=1)

# Expression grammars with whitespace between operators and operands, and vocabularies whose
# tokens mix whitespace with the operands' first bytes and with what follows an operand: the
# tail parts' accepted tokens, the tokens an operand ends inside (left to the state's chart) and
# the whitespace positions' own bytes (a bounded count, a loop back to the same state).
EXPR = """root ::= ws expr ws
expr ::= term ( ws {ops} ws term )*
term ::= "-" ws term | atom
atom ::= {atoms}
ws ::= {ws}
"""
EXPR_ATOMS = ("[a-c]+", "[0-9]+", '"(" ws expr ws ")"', '[a-c]+ ws "(" ws expr ( ws "," ws expr )* ws ")"')
EXPR_WS = ("[ \\t]{0,3}", "[ ]{0,2}", '" "*', "[ \\t]*", '" "?', "[ ] [ ]?", "[ ]+", "[ \\t]{1,3}")
EXPR_PIECES = (
    b" ", b"  ", b" a+", b" 1)", b" a", b"\t", b" (", b" a,",
    b"1", b"ab", b"  a", b" ab", b"+ ", b" + ", b"(", b"( ", b")", b" )", b" a)", b"a(", b" a(",
    b"a", b" 1", b" +", b" 1+", b",", b", ", b" ,", b"-", b" -", b" -a", b"a b", b" \t", b"\t1", b" a+1",
)  # fmt: skip


@st.composite
def expression_grammars(draw: st.DrawFn) -> str:
    atoms = draw(st.lists(st.sampled_from(EXPR_ATOMS), min_size=1, max_size=4, unique=True))
    if all("(" in a for a in atoms):
        atoms.append("[a-c]+")  # a base case
    ops = "[" + "".join(draw(st.lists(st.sampled_from("+*-"), min_size=1, max_size=3, unique=True))) + "]"
    return EXPR.format(
        ops=ops.replace("-", "\\-"), atoms=" | ".join(atoms), ws=draw(st.sampled_from(EXPR_WS))
    )


def test_operand_ending_inside_a_whitespace_token_same_entries() -> None:
    """`( a+b`: after `(` the space leads into expr -> term -> atom, each a tail part of the one
    above; atom ends inside the token, term leaves it uncertain too, and expr's own chart takes
    `+b` (the callers' checks of their callees' uncertain tails)."""
    text = EXPR.format(ops="[+]", atoms='[a-c]+ | "(" ws expr ws ")"', ws="[ ]{0,2}")
    vocab = cfgmask.Vocabulary.from_token_bytes(
        [bytes([c]) for c in b" abc()+"] + [b" a+b", b" a+", b" (a", b"  a+b"]
    )
    compiled = cfgmask.compile(cfgmask.Grammar.from_gbnf(text), vocab, _strategy=EVERY_TAIL)
    aliases = _core.tail_aliases()
    _tail_entries(compiled)
    aliases = _core.tail_aliases() - aliases
    assert_same_entries(compiled.grammar, vocab, tail_parts=1)
    # expr's, term's and atom's: a level that passes its one callee through takes that one's
    # (csrc/compose.c, tail_through; tests/test_tail_levels.py)
    assert compiled.stats["tail_walks"] + aliases >= 3, (compiled.stats, aliases)


@given(expression_grammars(), vocabularies(EXPR_PIECES))
def test_expression_grammars_tail_parts_same_entries(text: str, v: Vocab) -> None:
    g = cfgmask.Grammar.from_gbnf(text)
    vocab = _vocab(v)
    _tail_entries(cfgmask.compile(g, vocab, _strategy=EVERY_TAIL))
    assert_same_entries(g, vocab, tail_parts=1)


# A length-bounded string with an unanchored pattern (the shape of JSONSchemaBench's
# Github_easy/o10009): the front end counts characters around the first match with helper
# rules (str-str-q4, ...) that the string's rule calls, so inside the string the private
# chart predicts rules that read at almost every byte.
BOUNDED_PATTERN = {
    "type": "object",
    "properties": {"id": {"type": "string", "pattern": "[0-9a-f]+", "minLength": 12, "maxLength": 12}},
    "required": ["id"],
}


def test_flat_calls_same_entries() -> None:
    """Flat calls keep those charts in the flat DFA (as chart suffixes: the callee's items and
    the callers they return to): more configurations, and every entry still a whole walk's."""
    g = cfgmask.Grammar.from_json_schema(BOUNDED_PATTERN)
    vocab = cfgmask.Vocabulary.llama3()
    assert_same_entries(g, vocab)
    configs = {}
    for flat_calls in (True, False):
        lazy = cfgmask.compile(g, vocab, _strategy=Strategy(flat_calls=flat_calls))
        m = cfgmask.Matcher(lazy)
        assert m.accept_bytes(b'{"id":"')
        m.fill_bitmask(cfgmask.allocate_bitmask(1, vocab.size))
        configs[flat_calls] = lazy.stats["flat_configs"]
    assert configs[True] > configs[False], configs


def _schemas(split: str, n: int) -> list[tuple[str, dict]]:
    out = []
    for line in (BENCH / f"{split}.jsonl").read_text().splitlines():
        case = json.loads(line)
        try:
            cfgmask.Grammar.from_json_schema(case["schema"])
        except cfgmask.GrammarError:
            continue
        out.append((case["id"], case["schema"]))
        if len(out) == n:
            break
    return out


@pytest.mark.parametrize(
    ("case_id", "schema"),
    [c for split in ("Github_medium", "Glaiveai2K", "Snowplow") for c in _schemas(split, 2)],
    ids=lambda x: x if isinstance(x, str) else "",
)
def test_json_schemas_same_entries(case_id: str, schema: dict) -> None:
    assert_same_entries(cfgmask.Grammar.from_json_schema(schema), cfgmask.Vocabulary.llama3())


def test_nullable_callees_compose() -> None:
    """A state that calls a rule that may be empty (a string body shared by several values, a
    nest of brackets) is composed from the callee's start and from the state it returns to,
    where the empty callee leaves it at once; the entries are those of whole walks."""
    vocab = _vocab(
        Vocab([b"(", b")", b"()", b"(()", b"<", b">", b"<>", b"<(", b")>", b"[", b"]", b")]", b"x"], (), ())
    )
    g = cfgmask.Grammar.from_gbnf('root ::= "<" s ">" | "[" s "]"\ns ::= "(" s ")" s | ""')
    assert assert_same_entries(g, vocab)["composed_entries"] >= 2
    long = {"type": "string", "maxLength": 300}
    schema = {"type": "object", "properties": {"a": long, "b": {**long, "type": ["string", "null"]}}}
    stats = assert_same_entries(cfgmask.Grammar.from_json_schema(schema), cfgmask.Vocabulary.llama3())
    assert stats["composed_entries"] > 0 and stats["chain_entries"] > 0, stats


def test_json_keys_take_their_entries_from_the_key_loop() -> None:
    """An object open to other keys: the states inside a key that is a prefix of a listed one
    (``{"bil`` of ``billing_address``) take the entry of the state where any key goes (the
    donor) and walk again only the first bytes where the two part."""
    schema = {
        "type": "object",
        "properties": {"billing_address": {"type": "string"}, "items": {"type": "array"}},
        "required": ["billing_address"],
    }
    vocab = cfgmask.Vocabulary.llama3()
    for ws in ("default", "compact"):
        g = cfgmask.Grammar.from_json_schema(schema, whitespace=ws, canonical=False)  # open to other keys
        assert_same_entries(g, vocab)
        lazy = cfgmask.compile(g, vocab)
        m = cfgmask.Matcher(lazy)
        assert m.accept_bytes(b'{"bil')
        m.fill_bitmask(cfgmask.allocate_bitmask(1, vocab.size))
        assert lazy.stats["donor_entries"] > 0, lazy.stats


def test_loop_walks_shared_through_the_vocabulary() -> None:
    """A second grammar compiled for the same vocabulary finds the walks of its string loops in
    the vocabulary's cache (walked for the first): the same entries as whole walks."""
    vocab = cfgmask.Vocabulary.from_token_bytes(
        [bytes([b]) for b in range(32, 127)] + [b'"', b'a"', b'":"', b"abc", b"\\n", "\u00e9t\u00e9".encode()]
    )
    first = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}
    second = {"type": "object", "properties": {"bcd": {"type": "string"}}, "required": ["bcd"]}
    cfgmask.compile(cfgmask.Grammar.from_json_schema(first), vocab, warm=True)
    g = cfgmask.Grammar.from_json_schema(second)
    stats = assert_same_entries(g, vocab)
    assert stats["vocab_loop_walks"] > 0, stats


def test_wide_loop_walks_same_entries() -> None:
    """A loop of ~110 states (three-byte words, their middles all distinct): the shared walk's
    byte table holds a row per state (label * 256 in uint16 cells), its row stack one per byte of
    the longest token; every state's entry equal to whole walks, with tokens through every row."""
    words = [
        x + y + ("#" if (z := chr(33 + (i * 7 + j * 3) % 90)) in '"\\' else z)
        for i, x in enumerate("ABCDEFGHIJKLMNOPQRST")
        for j, y in enumerate("abcdefghijkl")
    ]
    quoted = " | ".join(json.dumps(w) for w in words)
    g = cfgmask.Grammar.from_gbnf(f'root ::= "<" ({quoted})* ">"')
    # tokens that start anywhere in a word and end anywhere in the next, and ones that leave the loop
    nexts = words[5:] + words[:5]
    pieces = {w[i:] + v[:j] for w, v in zip(words, nexts, strict=True) for i in range(3) for j in range(4)}
    pieces |= {w + ">" for w in words[::7]} | {w[:2] + "!" for w in words[::5]}
    tokens = [bytes([b]) for b in range(256)] + sorted(p.encode() for p in pieces)
    vocab = cfgmask.Vocabulary.from_token_bytes(tokens)
    cfgmask.clear_caches()
    assert_same_entries(g, vocab, compose_entries=False, flat_walks=False)
    again = cfgmask.compile(g, vocab, warm=True, _strategy=Strategy(compose_entries=False, flat_walks=False))
    assert again.tables.n_states > 100 and again.stats["vocab_loop_walks"] > 100, again.stats


def test_lark_meta_grammar_same_entries() -> None:
    """Lark's own grammar (tests/corpora/lark): names, strings and regexes with follow restrictions."""
    text = (ROOT / "tests" / "corpora" / "lark" / "grammars" / "lark.lark").read_text()
    stats = assert_same_entries(cfgmask.Grammar.from_lark(text), cfgmask.Vocabulary.llama3())
    assert stats["composed_entries"] > 0, stats


@given(grammars(), vocabularies())
def test_random_grammars_same_entries(g: ir.Grammar, v: Vocab) -> None:
    vocab = _vocab(v)
    try:
        cfgmask.compile(g, vocab)
    except cfgmask.GrammarError:
        return  # an empty language (test_engine_differential checks when)
    assert_same_entries(g, vocab)
    assert_same_entries(g, vocab, flat_calls=False)


KEYWORDS = (
    'start: stmt+\nstmt: "if" NAME | NAME "=" NAME | KW NAME | "(" stmt+ ")"\n'
    'KW: /do(?!\\w)/\nNAME: /[a-z\u00e9]+/\n%ignore " "'
)


PIECES = (b"i", b"f", b"d", b"o", b"=", b"a", b"(", b")", b" ", b"if", b"do ", b" a", "\u00e9".encode())


@given(vocabularies(PIECES))
def test_markers_same_entries(v: Vocab) -> None:
    """Lookahead markers (a keyword's (?!\\w), a name's longest match) over random vocabularies."""
    assert_same_entries(cfgmask.Grammar.from_lark(KEYWORDS), _vocab(v))


def test_clear_caches_drops_the_vocabulary_walks_too() -> None:
    """``cfgmask.clear_caches()`` makes the next compile cold: no tables, no automata, and no
    loop walks left in any live vocabulary (the grammar above would find them otherwise)."""
    vocab = cfgmask.Vocabulary.from_token_bytes(
        [bytes([b]) for b in range(32, 127)] + [b'"', b'a"', b'":"', b"abc", b"\\n", "\u00e9t\u00e9".encode()]
    )
    first = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}
    second = {"type": "object", "properties": {"bcd": {"type": "string"}}, "required": ["bcd"]}
    cfgmask.compile(cfgmask.Grammar.from_json_schema(first), vocab, warm=True)
    cfgmask.clear_caches()
    stats = cfgmask.compile(cfgmask.Grammar.from_json_schema(second), vocab, warm=True).stats
    assert stats["vocab_loop_walks"] == 0, stats
    cfgmask.compile(cfgmask.Grammar.from_json_schema(first), vocab, warm=True)
    stats = cfgmask.compile(cfgmask.Grammar.from_json_schema(second), vocab, warm=True).stats
    assert stats["vocab_loop_walks"] > 0, stats


def test_large_vocabularies_pin_the_json_string_walks() -> None:
    """A vocabulary of 10,000 tokens or more walks a JSON string's inside once when its trie is
    built and keeps the walk through ``clear_caches()``: the next schema's strings copy it, and
    every entry is still that of a plain walk."""
    vocab = cfgmask.Vocabulary.llama3()
    vocab._handle()
    cfgmask.clear_caches()
    schema = {"type": "object", "properties": {"zz": {"type": "string"}}, "required": ["zz"]}
    stats = assert_same_entries(cfgmask.Grammar.from_json_schema(schema), vocab)
    assert stats["vocab_loop_walks"] > 0, stats


@pytest.mark.parametrize("fmt", sorted(FORMAT_SAMPLES))
def test_large_vocabularies_pin_the_format_walks(fmt: str) -> None:
    """The string formats that are loops of their own are walked with the vocabulary too: a
    schema's first such string (a property of its own, in an object the pins never saw) takes the
    loop's walk from the vocabulary through ``clear_caches()``, and every entry is a plain walk's."""
    vocab = cfgmask.Vocabulary.llama3()
    vocab._handle()
    cfgmask.clear_caches()
    schema = {
        "type": "object",
        "properties": {"n": {"type": "integer"}, "link": {"type": "string", "format": fmt}},
        "required": ["link"],
    }
    stats = assert_same_entries(cfgmask.Grammar.from_json_schema(schema), vocab)
    assert stats["vocab_loop_walks"] > 0, stats


# Entries built in the order a document visits them: whole walks go by first byte (only the bytes
# the start set reads), the exits of a shared loop walk reuse their start configurations, and
# each mask decides only the span of candidates its entries marked.  The order matters: a state
# first met as an exit's continuation has its configuration cached before its own whole walk.
DOC_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 8}},
        "size": {"type": "number"},
        "kind": {"enum": ["a", "bb", 3]},
        "ver": {"type": "string", "pattern": "[0-9]+\\.[0-9]+$"},
    },
    "required": ["name", "size"],
}
DOC = (
    '{"name": "x\\"y \u00e9t\u00e9", "tags": ["a b", "12345678"], '
    '"size": -1.5e3, "kind": "bb", "ver": "v1.20"}'
).encode()


def _longest_tokens(vocab: cfgmask.Vocabulary, text: bytes) -> list[int]:
    """Greedy longest-match tokens of text (any split will do: every mask along it is compared)."""
    by_bytes = {b: i for i, b in vocab.iter_text_tokens()}
    longest = max(len(b) for b in by_bytes)
    out, at = [], 0
    while at < len(text):
        n = min(longest, len(text) - at)
        while text[at : at + n] not in by_bytes:
            n -= 1
        out.append(by_bytes[text[at : at + n]])
        at += n
    return out


@pytest.mark.parametrize("direct", [False, True], ids=["cached", "direct-walks"])
def test_entries_in_document_order_same_masks_and_entries(direct: bool) -> None:
    vocab = cfgmask.Vocabulary.llama3()
    g = cfgmask.Grammar.from_json_schema(DOC_SCHEMA)
    tokens = _longest_tokens(vocab, DOC)
    strategy = Strategy(direct_walk_states=1) if direct else Strategy()
    fast = cfgmask.compile(g, vocab, _strategy=strategy)
    slow = cfgmask.compile(g, vocab, _strategy=WALKS_ONLY)
    fast_masks, slow_masks = masks_along(fast, tokens, final=True), masks_along(slow, tokens, final=True)
    for step, (a, b) in enumerate(zip(fast_masks, slow_masks, strict=True)):
        assert np.array_equal(a, b), f"mask {step} differs after {vocab.decode(tokens[:step])!r}"
    if direct:
        return
    assert fast.stats["vocab_loop_walks"] + fast.stats["flat_configs"] > 0, fast.stats
    for s, (a, b) in enumerate(zip(entries(fast), entries(slow), strict=True)):  # the rest now
        assert np.array_equal(a[0], b[0]), f"state {s}: accepted tokens differ"
        assert np.array_equal(a[1], b[1]), f"state {s}: uncertain tokens differ"


def test_first_bytes_a_lookahead_forbids() -> None:
    """A start state that has transitions on bytes its lookahead debt forbids (a keyword's
    ``(?!\\w)`` before the next token): those first bytes are read, then die; the whole walk
    by first byte classifies their subtrees as the plain walk does."""
    grammar = "start: KW NAME?\nKW: /do(?![a-z])/\nNAME: /[a-z ]+/\n"
    tokens = [b"do", b"dot", b"do ", b"d", b"o", b" x", b"xy", b"a b", b"zz"]
    tokens += [bytes([b]) for b in range(97, 123)]
    vocab = cfgmask.Vocabulary.from_token_bytes(tokens)
    assert_same_entries(cfgmask.Grammar.from_lark(grammar), vocab)
    assert_same_entries(cfgmask.Grammar.from_lark(grammar), cfgmask.Vocabulary.llama3())


# The upward filter (csrc/walk.c) keeps its verdicts per (rule, bytes after an exit) for the
# grammar's life, and a later state of the same rule reads them instead of scanning again.  A
# verdict depends on the rule and the bytes only, so every entry is the same whichever states
# asked first: built in state order, in reverse, or alone in a fresh grammar (an empty memo).
def _entries_in_order(g: cfgmask.Grammar, vocab: cfgmask.Vocabulary, order: list[int]) -> dict:
    compiled = cfgmask.compile(g, vocab)
    return {s: compiled._handle.entry(s) for s in order}


def assert_entries_order_free(g: cfgmask.Grammar, vocab: cfgmask.Vocabulary, n_alone: int) -> int:
    """Entries equal built forward, backward, and (the n_alone states keeping the most uncertain
    tokens: those the filter read) each first in a fresh grammar; the number of uncertain tokens
    the entries keep."""
    n = cfgmask.compile(g, vocab).tables.n_states
    forward = _entries_in_order(g, vocab, list(range(n)))
    backward = _entries_in_order(g, vocab, list(reversed(range(n))))
    for s in range(n):
        assert np.array_equal(forward[s][0], backward[s][0]), f"state {s}: accepted tokens differ"
        assert np.array_equal(forward[s][1], backward[s][1]), f"state {s}: uncertain tokens differ"
    for s in sorted(range(n), key=lambda s: -len(forward[s][1]))[:n_alone]:
        a, u = _entries_in_order(g, vocab, [s])[s]
        assert np.array_equal(a, forward[s][0]) and np.array_equal(u, forward[s][1]), f"state {s} alone"
    return sum(len(forward[s][1]) for s in range(n))


def test_filter_verdicts_order_free_sql_lark() -> None:
    """sql.lark's names are called from everywhere: thousands of uncertain tokens each, whose
    verdicts the states of one rule share."""
    assert assert_entries_order_free(shipped("sql.lark"), cfgmask.Vocabulary.llama3(), 6) > 0


@given(expression_grammars(), vocabularies(EXPR_PIECES))
def test_expression_grammars_filter_verdicts_order_free(text: str, v: Vocab) -> None:
    assert_entries_order_free(cfgmask.Grammar.from_gbnf(text), _vocab(v), 8)


def test_filter_verdicts_of_long_rests() -> None:
    """A memo slot names a rest by a 16-bit length: a token whose rest after the exit is longer
    is read through the upward chart every time, never kept truncated.  `x` completes after `a`;
    the rest of a long token is read on by `"b"+` (uncertain) or dies on its `c` (rejected)."""
    g = cfgmask.Grammar.from_gbnf('root ::= x "b"+ | "c" x "c"\nx ::= "a" | "(" x ")"\n')
    long = 70_000
    tokens = [b"a", b"b", b"c", b"(", b")", b"a" + b"b" * long, b"a" + b"b" * long + b"c"]
    tokens += [b"a" + b"b" * (long // 2), b"a)" + b"b" * long, b"a" + b"c" * long]
    vocab = cfgmask.Vocabulary.from_token_bytes(tokens)
    assert_same_entries(g, vocab)
    assert assert_entries_order_free(g, vocab, 3) == 4  # the three b-runs after `a`, one after `a)`


def test_literal_states_same_entries() -> None:
    """States that read a few bytes each into states that do the same (the rest of a key, a
    choice of keywords) take the tokens inside the literal by binary search in the trie and walk
    on only the subtrees that leave it: tokens ending inside, at the end, running past into a
    call, into an accepting state with a byte that follows, and ids that share their bytes."""
    words = [b"s", b"se", b"sel", b"select", b"selects", b"set", b"sets", b"set ", b"setx", b"sex"]
    words += [b"e", b"ect", b"ect(", b"ect x", b"et", b"et(", b"et)", b"t(", b"(", b")", b" ", b"x", b"xx"]
    words += [b"select(", b"set(x)", b"select x)", b"ec", b"ect", b"sel"]  # the last two: ids sharing bytes
    vocab = _vocab(Vocab(words, (), ()))
    g = cfgmask.Grammar.from_gbnf(
        'root ::= ("select" | "set" | "sex") ("(" args ")" | " " args) root?\nargs ::= "x"+ | ""'
    )
    assert_same_entries(g, vocab)
    schema = {
        "type": "object",
        "properties": {k: {"type": "integer"} for k in ("name", "names", "nation", "id", "idle")},
        "required": ["name"],
    }
    assert_same_entries(cfgmask.Grammar.from_json_schema(schema), cfgmask.Vocabulary.llama3())


def test_flat_walk_flags_along_shared_prefixes() -> None:
    """A flat walk keeps a cell a trie node and computes the flags of an exit (the rule could
    complete, the next byte follows it: dying makes a token uncertain) only where a subtree ends
    dead or leaves the DFA, from the depth up to which they are known (csrc/flat.c,
    flat_walk_from): every string of one to four of seven bytes, so that exits, deaths and shared
    prefixes come in every order; flat walks alone (no composition, loop or run walks), with and
    without flat calls, and all shortcuts, against whole chart walks."""
    alphabet = [b"a", b"b", b",", b";", b"(", b")", b"]"]
    words = [b""]
    tokens: list[bytes] = []
    for _ in range(4):
        words = [w + c for w in words for c in alphabet]
        tokens += words
    vocab = _vocab(Vocab(tokens, (), ()))
    g = cfgmask.Grammar.from_gbnf(
        'root ::= "[" item ("," item)* "]"\nitem ::= [ab]+ ("," "b" | ";" "b")? | "(" item ")"'
    )  # after `a` the rule may end, and `,` both follows it and goes on in it
    flat_only = {"compose_entries": False, "share_loop_walks": False, "run_walks": 0}
    stats = assert_same_entries(g, vocab, **flat_only)
    assert stats["flat_configs"] > 0, stats
    fast = cfgmask.compile(g, vocab, _strategy=Strategy(**flat_only))
    assert any(len(e[1]) for e in entries(fast)), "no uncertain tokens: the flags are not exercised"
    assert_same_entries(g, vocab, flat_calls=False, **flat_only)
    assert_same_entries(g, vocab)


def _plain_skip_same(g: cfgmask.Grammar, vocab: cfgmask.Vocabulary) -> None:
    """Every state's entry with the bulk skip of plain tokens equal to a plain flat walk's."""
    fast = cfgmask.compile(g, vocab, _strategy=Strategy())
    slow = cfgmask.compile(g, vocab, _strategy=Strategy(plain_skip=False))
    for s, (a, b) in enumerate(zip(entries(fast), entries(slow), strict=True)):
        assert np.array_equal(a[0], b[0]), f"state {s}: accepted tokens differ"
        assert np.array_equal(a[1], b[1]), f"state {s}: uncertain tokens differ"


PLAIN_SKIP_SCHEMAS = [
    # o78129's keys: a counted hex key (dies past 31 plain bytes: the skip holds to depth 15)
    # and its complement
    {"type": "object", "patternProperties": {"^[0-9a-f]{32}$": {"type": "null"}}},
    # any string (applies), a short bounded string (maxLength below the plain length: fails),
    # a long bounded one (applies), a string where one plain byte dies (fails)
    {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string", "maxLength": 5}}},
    {"type": "object", "properties": {"c": {"type": "string", "maxLength": 40}}},
    {"type": "object", "properties": {"d": {"type": "string", "pattern": "^[^x]*$"}}},
    {"type": "object", "additionalProperties": {"type": "string", "minLength": 3}},
    # loops whose plain bytes leave them for a string's inside (their exits walk only the entries
    # that are not plain): unanchored patterns (o16373, o13110), a key's run with any other key
    # allowed (wp_81); a loop left on a plain byte for a state that dies on one (fails)
    {"type": "object", "properties": {"e": {"type": "string", "pattern": "(\\w{2})"}}},
    {"type": "object", "properties": {"f": {"type": "string", "pattern": "[0-9]+.[0-9]+.[0-9]+$"}}},
    {
        "type": "object",
        "patternProperties": {"^[a-zA-Z0-9_]*$": {"type": "integer"}},
        "properties": {"g": {}},
    },
    {"type": "object", "properties": {"h": {"type": "string", "pattern": "^[^d]*d[^x]*$"}}},
]


@pytest.mark.parametrize("schema", PLAIN_SKIP_SCHEMAS)
def test_plain_skip_same_entries_llama3(schema: dict) -> None:
    _plain_skip_same(cfgmask.Grammar.from_json_schema(json.dumps(schema)), cfgmask.Vocabulary.llama3())


def _loop_walks_taken(schemas: list[dict], taken: tuple[bool, ...], counter: Callable[[], int]) -> None:
    """Whether each schema's entries (Llama-3) add to the counter of a loop walk's kind."""
    vocab = cfgmask.Vocabulary.llama3()
    for schema, want in zip(schemas, taken, strict=True):
        cfgmask.clear_caches()
        before = counter()
        entries(cfgmask.compile(cfgmask.Grammar.from_json_schema(json.dumps(schema)), vocab))
        assert (counter() > before) == want, schema


def test_plain_skip_loop_exits_taken() -> None:
    """The loops of PLAIN_SKIP_SCHEMAS that leave on plain bytes for a live string take every plain
    token at once (csrc/loops.c, loop_plain_live) at Llama-3's size, the last one never."""
    _loop_walks_taken(PLAIN_SKIP_SCHEMAS[-4:], (True, True, True, False), _core.plain_loop_walks)


@pytest.mark.parametrize("seed", range(4))
def test_plain_skip_same_entries_random_vocab(seed: int) -> None:
    """A random small vocabulary: plain tokens of every length around the bound, others mixed in."""
    rng = np.random.default_rng(seed)
    alphabet = [*b' a0x{}:,"\\', 0x0A, 0xC3]
    toks = sorted(
        {bytes(rng.choice(alphabet, size=int(rng.integers(1, 20))).astype(np.uint8)) for _ in range(600)}
        | {bytes([b]) for b in range(256)}
    )
    vocab = cfgmask.Vocabulary.from_token_bytes(toks)
    for schema in PLAIN_SKIP_SCHEMAS:
        _plain_skip_same(cfgmask.Grammar.from_json_schema(json.dumps(schema)), vocab)


def _name_skip_same(g: cfgmask.Grammar, vocab: cfgmask.Vocabulary) -> None:
    """Every state's entry with the bulk skip of name tokens equal to a flat walk's of each:
    with every shortcut (byte edges' subtrees, tail parts) and with flat walks alone (whole
    walks; no plain skip either, which would take the names after a plain byte first)."""
    flat_only = {"compose_entries": False, "share_loop_walks": False, "run_walks": 0, "plain_skip": False}
    for limits in ({}, flat_only):
        fast = cfgmask.compile(g, vocab, _strategy=Strategy(**limits))
        slow = cfgmask.compile(g, vocab, _strategy=Strategy(**{**limits, "name_skip": False}))
        for s, (a, b) in enumerate(zip(entries(fast), entries(slow), strict=True)):
            assert np.array_equal(a[0], b[0]), f"state {s} ({limits}): accepted tokens differ"
            assert np.array_equal(a[1], b[1]), f"state {s} ({limits}): uncertain tokens differ"


NAME_SKIP_GRAMMARS = [
    # Lark: keywords that may not run into a name (a lookahead), names, blanks between (sql.lark's shape)
    cfgmask.Grammar.from_lark(
        'start: item ("," item)*\n?item: SELECT NAME | NAME "(" NAME ")" | NAME\n'
        "SELECT: /select(?!\\w)/i\nNAME: /[a-z_][a-z0-9_]*/i\n%import common.WS\n%ignore WS"
    ),
    # a bounded name (dies past 6 bytes: the proof must fail), a name whose first byte may be a
    # digit, a name of letters only (a digit dies), a name after a quote
    cfgmask.Grammar.from_gbnf('root ::= ( " " | "\\"" )? [a-z_] [a-z0-9_]{0,5} ";"'),
    cfgmask.Grammar.from_gbnf('root ::= " "? [a-zA-Z0-9_]+ ( " " [a-zA-Z0-9_]+ )* ";"?'),
    cfgmask.Grammar.from_gbnf('root ::= " "? [a-zA-Z_]+ ( "." [a-zA-Z_]+ )*'),
    cfgmask.Grammar.from_gbnf('root ::= ( " " | "\\"" | "x" )* [a-zA-Z_] [a-zA-Z0-9_]* "\\""'),
]


@pytest.mark.parametrize("index", range(len(NAME_SKIP_GRAMMARS)))
@pytest.mark.parametrize("seed", range(3))
def test_name_skip_same_entries_random_vocab(index: int, seed: int) -> None:
    """A random vocabulary: names of every length around the bound after every kind of first
    byte (blank, quote, letter, digit, dot), other tokens mixed in."""
    rng = np.random.default_rng(seed)
    name = [*b"abcsxyzSELECTelt_019"]
    first = [*b' "x_0.\t(']
    toks = {bytes([b]) for b in range(256)}
    for _ in range(1500):
        body = bytes(rng.choice(name, size=int(rng.integers(1, 20))).astype(np.uint8))
        toks.add(bytes([int(rng.choice(first))]) + body)
        if rng.random() < 0.3:  # a name that runs into something else
            toks.add(bytes([int(rng.choice(first))]) + body + bytes([int(rng.choice([*b'(),; "']))]))
    _name_skip_same(NAME_SKIP_GRAMMARS[index], cfgmask.Vocabulary.from_token_bytes(sorted(toks)))


@pytest.mark.parametrize("name", ["sql.lark", "c.gbnf"])
def test_name_skip_same_entries_llama3(name: str) -> None:
    _name_skip_same(shipped(name), cfgmask.Vocabulary.llama3())


def _shared_edges_same(g: cfgmask.Grammar, vocab: cfgmask.Vocabulary, **limits: int) -> tuple[dict, dict]:
    """Every state's entry with composed entries' byte edges taken from the walk kept per (target,
    byte) (csrc/compose.c, walk_byte_edges) equal to each state walking its edges; both stats."""
    on = cfgmask.compile(g, vocab, _strategy=Strategy(**limits))
    off = cfgmask.compile(g, vocab, _strategy=Strategy(**{**limits, "share_edges": 0}))
    for s, (a, b) in enumerate(zip(entries(on), entries(off), strict=True)):
        assert np.array_equal(a[0], b[0]), f"state {s} ({limits}): accepted tokens differ"
        assert np.array_equal(a[1], b[1]), f"state {s} ({limits}): uncertain tokens differ"
    return on.stats, off.stats


@pytest.mark.parametrize("name", ["sql.lark", "c.gbnf", "sql.gbnf", "arithmetic.gbnf"])
def test_shared_edges_taken_and_same_entries_llama3(name: str) -> None:
    """A Lark rule's blank run y (before the %ignore lookahead marker) is entered on ' ' from the
    rule's start, from y and from the marker's return state: the walk of ' ''s subtree from y is
    kept once and taken by each (the tail part of (y, ' ')).  The same entries as each state
    walking the edge, and as whole walks (test_shipped_grammars_same_entries); GBNF grammars have
    no such run and keep nothing more."""
    on, off = _shared_edges_same(shipped(name), cfgmask.Vocabulary.llama3())
    if name.endswith(".lark"):
        assert on["tail_walks"] > off["tail_walks"], (on, off)  # the edges' walks were kept
    else:
        assert on["tail_walks"] == off["tail_walks"], (on, off)


# Lark expression grammars with ignored blanks (each rule's blank run before its lookahead
# marker), negation and, in some, a `--` comment: runs of '-' nest negations and comments.
SHARED_EDGE_LARK = [
    'start: expr\n?expr: term (("+" | "-") term)*\n?term: "-" term | atom\n'
    'atom: NAME | NUMBER | "(" expr ")"\nNAME: /[a-z_]+/\nNUMBER: /[0-9]+/\n'
    "%import common.WS\n%ignore WS\n" + extra
    for extra in ("", "%ignore /--[^\\n]*/\n")
]
SHARED_EDGE_PIECES = b" \t\n-*/+=(),;.'\"abcxyzSELECTWHERENOT019_"


@pytest.mark.parametrize("grammar", ["sql.lark", "c.gbnf", "lark0", "lark1"])
@pytest.mark.parametrize("seed", range(3))
def test_shared_edges_same_entries_random_vocab(grammar: str, seed: int) -> None:
    """A random vocabulary of the grammars' bytes (blank runs, runs of '-' and '*', names,
    keywords, operators): every edge into a blank run shared however few tokens its byte leads,
    with tail parts for every edge or by default; against each state walking its edges and
    against whole walks."""
    rng = np.random.default_rng(seed)
    pieces = [*SHARED_EDGE_PIECES]
    toks = {bytes([b]) for b in range(256)}
    for _ in range(1500):
        toks.add(bytes(rng.choice(pieces, size=int(rng.integers(1, 12))).astype(np.uint8)))
        if rng.random() < 0.2:  # a run of one byte after a blank
            toks.add(b" " + bytes([int(rng.choice([*b" -*a"]))]) * int(rng.integers(2, 30)))
    vocab = cfgmask.Vocabulary.from_token_bytes(sorted(toks))
    lark = grammar.startswith("lark")
    g = cfgmask.Grammar.from_lark(SHARED_EDGE_LARK[int(grammar[-1])]) if lark else shipped(grammar)
    for limits in ({"share_edges": 1}, {"share_edges": 1, "tail_parts": 1}):
        on, off = _shared_edges_same(g, vocab, **limits)
        if grammar.endswith("lark") or lark:
            assert on["tail_walks"] > off["tail_walks"], (limits, on, off)
    assert_same_entries(g, vocab, share_edges=1)


TEXT_SKIP_SCHEMAS = [
    # o78129's keys (the key start proves its text entries live: any other key is allowed)
    {"type": "object", "patternProperties": {"^[0-9a-f]{32}$": {"type": "null"}}, "properties": {"k": {}}},
    {"type": "object", "patternProperties": {"[0-9a-f]{32}": {"type": "null"}}},
    # such a key or one without a character (its lead byte lives), no other: the proof fails
    *(
        {
            "type": "object",
            "patternProperties": {"[0-9a-f]{32}": {"type": "null"}, f"^[^{c}]*$": {"type": "null"}},
            "additionalProperties": False,
        }
        for c in "é\u20ac\U0001f600"
    ),
    {"type": "object", "additionalProperties": {"type": "string"}},
    {"type": "object", "properties": {"a": {"type": "string", "maxLength": 40}}},
    # non-ASCII patterns: one character allowed (the others die), one character dying (a
    # continuation byte dies after its lead: the proof must fail), a 3-byte range, 4-byte ones
    {"type": "object", "properties": {"b": {"type": "string", "pattern": "^[a-zé ]*$"}}},
    {"type": "object", "properties": {"c": {"type": "string", "pattern": "^[^ü]*$"}}},
    {"type": "object", "properties": {"d": {"type": "string", "pattern": "^[^\u20ac-\u20af]*$"}}},
    {"type": "object", "properties": {"e": {"type": "string", "pattern": "^[^\U0001f600]*$"}}},
    {"type": "object", "properties": {"f": {"type": "string", "pattern": "ção"}}},
    # loops whose text bytes leave them (csrc/loops.c, loop_text_live): an unanchored pattern
    # (o13110), a key's run with any other key allowed (wp_81); left on a plain byte and on a lead
    # byte inside a character for a live rest (U+0100-U+013F: lead 0xC4; `.` would not do: U+2028
    # dies) and for one where a continuation byte dies; left on a plain byte for a state where a
    # character dies, and for a live one from a loop where one dies (the proof must fail)
    {"type": "object", "properties": {"g": {"type": "string", "pattern": "(\\w{2})"}}},
    {
        "type": "object",
        "patternProperties": {"^[a-zA-Z0-9_]*$": {"type": "integer"}},
        "properties": {"h": {}},
    },
    {
        "type": "object",
        "properties": {"i": {"type": "string", "pattern": "^[^\u0100-\u013fd]*[\u0100-\u013fd]"}},
    },
    {"type": "object", "properties": {"j": {"type": "string", "pattern": "^[^\u0100-\u013fd]*[\u0100d]"}}},
    {"type": "object", "properties": {"k": {"type": "string", "pattern": "^[^d]*d[^é]*$"}}},
    {"type": "object", "properties": {"l": {"type": "string", "pattern": "^[^üd]*d"}}},
]


@pytest.mark.parametrize("schema", TEXT_SKIP_SCHEMAS)
def test_text_skip_same_entries_llama3(schema: dict) -> None:
    """Text tokens (plain bytes and whole UTF-8 characters, vocab.h) taken in bulk by a whole flat
    walk (flat.c: flat_text_live): every state's entry equal to a plain walk's."""
    _plain_skip_same(cfgmask.Grammar.from_json_schema(json.dumps(schema)), cfgmask.Vocabulary.llama3())


def test_text_skip_loop_exits_taken() -> None:
    """The loops of TEXT_SKIP_SCHEMAS that leave on text bytes for a state that reads every text
    entry's rest take every text token at once (csrc/loops.c, loop_text_live) at Llama-3's size
    (their entries equal a plain walk's: test_text_skip_same_entries_llama3), the last three never."""
    _loop_walks_taken(TEXT_SKIP_SCHEMAS[-6:], (True, True, True, False, False, False), _core.text_loop_walks)


@pytest.mark.parametrize("seed", range(4))
def test_text_skip_same_entries_random_vocab(seed: int) -> None:
    """A random small vocabulary of plain bytes, UTF-8 lead and continuation bytes (well-formed
    characters, surrogates, overlong and cut ones) and others."""
    rng = np.random.default_rng(seed)
    alphabet = [*b' a0x{}:,"\\', 0x0A, *b"\xc3\xa9\xbc\xc0\xe2\x82\xac\xed\xa0\xf0\x9f\x98\x80\xc4"]
    chars = [c.encode() for c in "éüç€\U0001f600\ud7ff\U0010ffff\u0100\u0101\u013fdw"]
    toks = {bytes(rng.choice(alphabet, size=int(rng.integers(1, 20))).astype(np.uint8)) for _ in range(500)}
    for _ in range(500):
        parts = [chars[int(i)] for i in rng.integers(0, len(chars), size=int(rng.integers(1, 6)))]
        toks.add(b"".join(p if rng.random() < 0.7 else bytes([int(rng.choice(alphabet[:4]))]) for p in parts))
    toks |= {bytes([b]) for b in range(256)}
    vocab = cfgmask.Vocabulary.from_token_bytes(sorted(toks))
    for schema in TEXT_SKIP_SCHEMAS:
        _plain_skip_same(cfgmask.Grammar.from_json_schema(json.dumps(schema)), vocab)
