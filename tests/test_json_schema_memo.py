"""The JSON Schema front end's memo tables never change what it makes.

The front end keeps process-wide tables of what repeats between schemas (literals, rule-name
stems, whitespace, canonical strings, pattern and format languages and automata, the products of a
string's constraints, object keys' spellings, the JSON spellings of pattern expressions, regex
syntax checks).  A schema compiled when the tables are warm from
other schemas must give the same IR (rule names in order, bodies, start, meta) and the same
report or error as in a process that has seen nothing, whatever came before it.
"""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from cfgmask import Grammar, ir
from cfgmask.errors import CfgmaskError
from cfgmask.frontends import json_schema
from cfgmask.frontends.json_schema import _ir_util, chardfa, containers, strings
from cfgmask.frontends.json_schema.formats import FORMATS
from cfgmask.frontends.json_schema.lexical import encode_text

CORPUS = Path(__file__).parent / "corpora" / "jsonschemabench"


def _schemas() -> list[tuple[str, Any]]:
    out = []
    for path in sorted(CORPUS.glob("*.jsonl")):
        for line in path.read_text().split("\n"):
            if line.strip():
                r = json.loads(line)
                out.append((r["id"], r["schema"]))
    return out


def _clear_memos() -> None:
    """Empty every memo table of the front end's modules: a fresh process."""
    pkg = Path(json_schema.__file__).parent
    for mod in list(sys.modules.values()):
        f = getattr(mod, "__file__", None) or ""
        if f and Path(f).parent == pkg:
            for v in vars(mod).values():
                if isinstance(v, functools._lru_cache_wrapper):
                    v.cache_clear()
    _ir_util._STEMS.clear()
    _ir_util._LITERALS.clear()
    containers._KEYS.clear()


def _output(schema: Any, canonical: bool) -> str:
    try:
        g = Grammar.from_json_schema(json.dumps(schema), canonical=canonical, strict=False)
    except CfgmaskError as e:
        return f"{type(e).__name__}: {e}"
    rules = [(name, repr(body)) for name, body in g.ir.rules.items()]
    report = [(e.path, e.keyword, e.status, e.reason) for e in g.schema_report]
    return repr((g.ir.start, g.ir.meta, rules, report))


@pytest.mark.parametrize("canonical", [True, False])
def test_warm_memo_tables_give_what_a_fresh_process_gives(canonical: bool) -> None:
    """Every schema of the sample (the whole language: every fourth, it is slower to build)."""
    schemas = _schemas()
    assert len(schemas) == 240
    if not canonical:
        schemas = schemas[::4]
    _clear_memos()
    warm = {ident: _output(s, canonical) for ident, s in schemas}  # each after all before it
    for ident, s in reversed(schemas):
        _clear_memos()
        assert _output(s, canonical) == warm[ident], ident


def test_the_same_schema_twice_gives_the_same_grammar() -> None:
    """A memo hit (the second compile) builds equal IR, and compiling other schemas in
    between (other patterns, formats, keys) does not disturb it."""
    schema = {
        "type": "object",
        "properties": {
            "when": {"type": "string", "format": "date-time"},
            "code": {"type": "string", "pattern": "^[A-Z]{2}-\\d+$", "maxLength": 12},
            "a/b~c": {"enum": ["x", "y\n"]},
        },
        "additionalProperties": {"type": "integer"},
    }
    first = _output(schema, True)
    for _, other in _schemas()[:40]:
        _output(other, True)
    assert _output(schema, True) == first
    _clear_memos()
    assert _output(schema, True) == first


def _fresh_product(
    langs: list[tuple[str, str]], lo: int, hi: int | None, excluded: list[str]
) -> tuple[Any, dict[str, Any]]:
    """What ``strings._product`` keeps, built here from the languages, uncached."""
    parts = [
        chardfa.from_expr(ir.alt(*strings._search_language.__wrapped__(v)))
        if k == "pattern"
        else chardfa.from_expr(FORMATS[v]())
        for k, v in langs
    ]
    if lo or hi is not None:
        parts.append(chardfa.length(lo, hi))
    if excluded:
        parts.append(chardfa.words(excluded))
        out = chardfa.product(parts, lambda f: all(f[:-1]) and not f[-1])
    else:
        out = chardfa.product(parts, all) if len(parts) > 1 else parts[0]
    rules: dict[str, Any] = {}
    return out.to_expr(rules, "str"), rules


@pytest.mark.parametrize(
    ("langs", "lo", "hi", "excluded"),
    [
        ([("pattern", "^(ab|c)+$")], 2, 9, []),
        ([("pattern", "^[0-9]+-0"), ("format", "date")], 0, None, []),
        ([("format", "email")], 3, 40, ["a@b.cd"]),
        ([("pattern", "a"), ("format", "uuid")], 0, 36, ["00000000-0000-0000-0000-00000000000a"]),
    ],
)
def test_a_kept_product_is_what_a_fresh_build_makes(
    langs: list[tuple[str, str]], lo: int, hi: int | None, excluded: list[str]
) -> None:
    """The string automata kept across compiles (a pattern's, a format's, their product's
    expression and rules) equal a build from nothing, on a miss and on the hit after it; the
    caller (the encoder) leaves the kept rules as they were."""
    _clear_memos()
    want = _fresh_product(langs, lo, hi, excluded)
    key = (tuple(langs), lo, hi, bool(lo) or hi is not None, tuple(excluded))
    assert strings._product(*key) == want
    assert strings._product(*key) == want
    assert strings._product.cache_info().hits >= 1
    schema: dict[str, Any] = {"type": "string", **dict(langs)}
    schema.update({k: v for k, v in (("minLength", lo), ("maxLength", hi)) if v})
    if excluded:
        schema["not"] = {"enum": excluded}
    first = _output(schema, True)
    assert "('str-" in first and "allows no value" not in first  # the product's rules, named
    assert _output(schema, False) != first  # the same product, encoded for the other mode
    assert _output(schema, True) == first
    assert strings._product(*key) == want  # not changed by the encoders that read it


def test_a_string_product_that_fails_is_not_kept() -> None:
    """A product past MAX_STATES is an error each time (the same report), never a kept entry:
    only built automata are shared."""
    _clear_memos()
    schema = {"type": "string", "pattern": "^[ab]*a[ab]{12}$", "format": "date"}
    first = _output(schema, True)
    assert "more than 4000 automaton states" in first
    assert strings._product.cache_info().currsize == 0
    assert strings.pattern_dfa.cache_info().currsize == 0
    assert _output(schema, True) == first


def test_kept_automata_and_keys_are_bounded() -> None:
    assert strings._product.cache_info().maxsize == 256
    assert strings.pattern_dfa.cache_info().maxsize == 256
    assert strings._format_dfa.cache_info().maxsize == 64
    _clear_memos()
    n = containers._KEYS_MAX + 10
    props = {f"k.{i}": {"type": "null"} for i in range(n)}  # not plain: canonical plain keys skip key()
    _output({"type": "object", "properties": props}, True)
    assert len(containers._KEYS) == containers._KEYS_MAX


@pytest.mark.parametrize("name", ["id", 'a"b', "\u00e9\n", "\U0001f600", "\ud83d\ude00", "\ud800", ""])
def test_a_kept_key_is_the_key_spelled_afresh(name: str) -> None:
    """A key's expression is kept per (name, mode): each mode's is the quoted spelling
    ``encode_text`` makes, and the two modes' are not confused."""
    _clear_memos()
    quote = ir.Literal(b'"')
    for canonical in (True, False, True):
        c = SimpleNamespace(canonical=canonical)
        got = containers.Containers(c, 2_000).key(name)  # type: ignore[arg-type]
        assert got == ir.seq(quote, encode_text(name, canonical), quote)
    assert len(containers._KEYS) == 2


def test_clear_caches_forgets_what_schemas_taught() -> None:
    """``cfgmask.clear_caches()`` empties the front end's memos of schema content, so that a
    cold compile (MaskBench's) reuses nothing an earlier schema taught; a schema read after it
    gives the same grammar."""
    import cfgmask
    from cfgmask.frontends.json_schema import _ir_util, containers, numbers, strings

    schema = {
        "type": "object",
        "properties": {
            "mail to": {"type": "string", "pattern": "^mailto:", "format": "uri", "maxLength": 40},
            "n": {"type": "integer", "minimum": 3, "maximum": 977, "multipleOf": 7},
        },
    }
    before = _output(schema, True)
    memos = (strings._product, strings.pattern_dfa, strings._search_language, numbers.number_range)
    assert all(m.cache_info().currsize > 0 for m in memos[1:])
    assert containers._KEYS and _ir_util._LITERALS
    cfgmask.clear_caches()
    assert all(m.cache_info().currsize == 0 for m in memos)
    assert not containers._KEYS and not _ir_util._STEMS
    assert _ir_util._LITERALS == _ir_util._PUNCTUATION  # JSON's punctuation only: no schema's content
    assert _output(schema, True) == before


def _rebuilt(e: ir.Expr) -> ir.Expr:
    """Digits capped by rebuilding every node (the plain recursion ``numbers._cap_digits`` follows)."""
    from cfgmask.frontends.json_schema.numbers import CANONICAL_EXTRA_DIGITS

    if isinstance(e, ir.Repeat):
        item = _rebuilt(e.item)
        if e.hi is None and isinstance(item, (ir.ByteClass, ir.Literal)):
            return ir.Repeat(item, e.lo, e.lo + CANONICAL_EXTRA_DIGITS)
        return ir.Repeat(item, e.lo, e.hi)
    if isinstance(e, ir.Seq):
        return ir.seq(*(_rebuilt(x) for x in e.items))
    if isinstance(e, ir.Alt):
        return ir.alt(*(_rebuilt(x) for x in e.items))
    return e


_BOUNDS = [None, "0", "1", "-1", "7", "0.5", "-2.25", "100", "1e15", "9999999999999999", "1e16", "3.5e17"]


@pytest.mark.parametrize("integer", [True, False])
@pytest.mark.parametrize("lo", _BOUNDS)
@pytest.mark.parametrize("hi", [None, "0", "100", "1e16", "2.5e18"])
def test_capped_ranges_equal_a_rebuild(lo: str | None, hi: str | None, integer: bool) -> None:
    """Capping keeps unchanged nodes as they are: the result equals capping by rebuilding every
    node, whatever parts of the range are shared constants (an integer's scientific tail)."""
    from decimal import Decimal

    from cfgmask.frontends.json_schema import numbers

    a, b = (None if x is None else Decimal(x) for x in (lo, hi))
    for forms in numbers.INT_FORMS if integer else ("all",):
        e = numbers.number_range(a, True, b, False, integer, forms)
        got = numbers._cap_digits(e)
        assert got == _rebuilt(e) and repr(got) == repr(_rebuilt(e))


@pytest.mark.parametrize(
    "lo", ["0", "1", "2", "9.5", "1e10", "123456789012345", "1e15", "9999999999999999", "9.999e15"]
)
@pytest.mark.parametrize("incl", [True, False])
def test_integer_scientific_tail_below_1e16_is_the_constant(lo: str, incl: bool) -> None:
    """Below 1e16 an integer range's lower bound cuts none of its scientific spellings (they
    start at 1e16), so every such range shares the engine's constant."""
    from decimal import Decimal

    from cfgmask.frontends.json_schema import numbers

    d = Decimal(lo)
    assert numbers._sci_positive(d, incl, None, True, True) == numbers._int_sci_unbounded()
    assert numbers.sci_positive(d, incl, None, True, True) is numbers._int_sci_unbounded()
    assert numbers.sci_positive(Decimal("1e16"), incl, None, True, True) == numbers._sci_positive(
        Decimal("1e16"), incl, None, True, True
    )


def test_unbounded_numbers_outlive_clear_caches() -> None:
    """The unbounded number and integer (no schema's content) are constants of the engine:
    ``clear_caches()`` keeps them, as it keeps the named formats' languages."""
    import cfgmask
    from cfgmask.frontends.json_schema import numbers

    first = numbers.number_range(None, True, None, True, True, "no_fraction")
    cfgmask.clear_caches()
    assert numbers.number_range(None, True, None, True, True, "no_fraction") is first


@pytest.mark.parametrize("canonical", [True, False])
def test_a_format_alone_is_spelled_once_and_outlives_clear_caches(canonical: bool) -> None:
    """A ``format`` with no length, pattern or excluded value: its JSON spelling is made once a
    process (no schema's content: ``clear_caches()`` keeps it), equal to what the encoder makes
    of the format's language from nothing, and the schema's IR is the one it gives."""
    import cfgmask
    from cfgmask.frontends.json_schema.lexical import Encoder, _encode_pure

    for fmt in FORMATS:
        _encode_pure.cache_clear()
        fresh = ir.alt(*[Encoder({}, "str", canonical=canonical).encode(strings.format_language(fmt))])
        kept = strings.format_spelling(fmt, canonical)
        assert kept == fresh
        cfgmask.clear_caches()
        assert strings.format_spelling(fmt, canonical) is kept
        g, _ = json_schema.schema_to_grammar({"type": "string", "format": fmt}, canonical=canonical)
        assert g.rules[g.start] == ir.seq(ir.Literal(b'"'), fresh, ir.Literal(b'"'))
