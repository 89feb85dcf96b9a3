"""Decimal ``multipleOf`` against an exact-decimal oracle.

``jsonschema`` divides floats (``0.3`` is "not a multiple of" ``0.1`` there, and ``1e308`` against
``0.123456789`` overflows), so the oracle here reads the instance's JSON text as an exact decimal
(``json.loads(..., parse_float=Decimal, parse_int=Decimal)``) and asks whether ``value / m`` is an
integer in rational arithmetic (``fractions.Fraction``), as JSON Schema 2020-12 (6.2.1) says.

What is asserted, with ``base`` the grammar of the same schema without ``multipleOf``:

* the whole language (``canonical=False``) accepts a text iff ``base`` accepts it, its value is a
  multiple, and it has the documented exponent shape (:data:`in_shape`: the language of all
  spellings is not regular, see ``numbers.py``); every plain spelling keeps its verdict;
* canonical mode accepts only texts the whole language accepts, and every valid value's
  ``json.dumps`` text that canonical ``base`` accepts;
* a divisor whose automaton is past the state budget is refused with its JSON pointer.
"""

from __future__ import annotations

import json
import re
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cfgmask.errors import NotEnforceable
from cfgmask.frontends.json_schema import schema_to_grammar
from cfgmask.frontends.json_schema.lexical import JSON_NUMBER
from cfgmask.frontends.json_schema.numbers import (
    MULTIPLE_OF_INT_ZEROS,
    MULTIPLE_OF_SIG_DIGITS,
    multiples_within,
)

from .engine import EngineRecognizer, schema_recognizer

RECORDS = Path(__file__).parent / "corpora" / "jsonschemabench" / "picked" / "records.jsonl"
NUMBER = re.compile(r"(-?)(0|[1-9][0-9]*)(?:\.([0-9]+))?(?:[eE]([+-]?[0-9]+))?\Z")


def value_of(text: str) -> Fraction:
    return Fraction(json.loads(text, parse_float=Decimal, parse_int=Decimal))


def is_multiple(text: str, m: str) -> bool:
    """The oracle: the text's exact value divided by ``m`` is an integer."""
    return (value_of(text) / Fraction(m)).denominator == 1


def _valuation(n: int, f: int) -> int:
    v = 0
    while n % f == 0:
        n //= f
        v += 1
    return v


def in_shape(text: str, m: str) -> bool:
    """The exponent spellings the grammar takes (``numbers.py``): a mantissa fraction that is all
    zeros, or ends in a nonzero digit within q + MULTIPLE_OF_SIG_DIGITS digits; and before an
    exponent, an integer part's trailing zeros count up to max(A, B, 0) + MULTIPLE_OF_INT_ZEROS
    + 1 (A, B: the 2- and 5-valuations of p minus q, m = p / 10**q), beyond that as that many.
    Plain spellings always."""
    sign, whole, frac, exp = NUMBER.match(text).groups()  # type: ignore[union-attr]
    if exp is None or value_of(text) == 0:
        return True
    frac = frac or ""
    r = Fraction(m)
    q = 0
    while (r * 10**q).denominator != 1:
        q += 1
    p = int(r * 10**q)
    top = max(_valuation(p, 2), _valuation(p, 5)) - q
    if frac.strip("0"):
        return not frac.endswith("0") and len(frac) <= q + MULTIPLE_OF_SIG_DIGITS
    zeros = len(whole) - len(whole.rstrip("0"))
    keep = max(top, 0) + MULTIPLE_OF_INT_ZEROS + 1
    if zeros > keep:  # counted as ``keep`` zeros: the value with the others dropped must be a multiple
        return is_multiple(f"{sign}{whole[: len(whole) - zeros + keep]}{'.' + frac if frac else ''}e{exp}", m)
    return True


# ---------------------------------------------------------------------------- number texts

DIVISORS = st.builds(
    lambda p, q: str(Decimal(p).scaleb(-q).normalize()),
    st.sampled_from([1, 2, 3, 4, 5, 6, 7, 8, 12, 15, 16, 20, 25, 40, 75, 125]),
    st.integers(0, 4),
).filter(lambda m: Fraction(m).denominator != 1)  # integer divisors have their own path


@st.composite
def number_texts(draw: Any, m: str) -> str:
    """Texts near the multiples of ``m``: a multiple (or a multiple plus a small step) spelled
    plain, with trailing zeros, with ``json.dumps``, or with an exponent (normalized or not)."""
    k = draw(st.integers(-(10**6), 10**6))
    v = Fraction(m) * k
    if draw(st.booleans()):
        v += Fraction(draw(st.integers(1, 9)), 10 ** draw(st.integers(0, 6)))
    d = Decimal(v.numerator) / Decimal(v.denominator)
    plain = format(d, "f")
    form = draw(st.integers(0, 4))
    if form == 0:
        return plain
    if form == 1:
        return plain + ("" if "." in plain else ".") + "0" * draw(st.integers(1, 4))
    if form == 2:
        return json.dumps(float(plain))
    # an exponent spelling: move the point by s places
    s = draw(st.integers(-6, 6))
    digits = plain.lstrip("-").replace(".", "")
    point = len(plain.lstrip("-").partition(".")[0]) - s
    sign = "-" if plain.startswith("-") else ""
    if form == 4:  # normalized: one nonzero digit before the point
        stripped = digits.lstrip("0") or "0"
        point -= len(digits) - len(stripped)
        digits = stripped
        s += point - 1
        point = 1
    if point <= 0:
        digits = "0" * (1 - point) + digits
        point = 1
    whole, frac = digits[:point].lstrip("0") or "0", digits[point:]
    if draw(st.booleans()):
        frac = frac.rstrip("0")
    e = draw(st.sampled_from(["e", "E"])) + draw(st.sampled_from(["", "+"])) if s >= 0 else "e-"
    return f"{sign}{whole}{'.' + frac if frac else ''}{e}{abs(s)}"


@given(st.data())
def test_automaton_against_the_oracle(data: Any) -> None:
    """The whole-language automaton over every JSON number spelling: accepts iff multiple and
    in shape (many texts a divisor, cheap: no engine compile)."""
    m = data.draw(DIVISORS)
    auto = multiples_within(Decimal(m), JSON_NUMBER, False)
    for text in data.draw(st.lists(number_texts(m), min_size=30, max_size=30)):
        assert NUMBER.match(text), text
        want = is_multiple(text, m) and in_shape(text, m)
        assert auto.matches(text) == want, (m, text, want)


@pytest.mark.parametrize(
    ("m", "texts"),
    [
        ("0.01", ["0", "-0", "0.0", "1", "1.5", "1.25", "-99.99", "99.990000", "1e2", "1.5e1", "1.25e0",
                  "125e-2", "1250e-3", "1.0e3", "12.3E-1", "0.01", "0.001", "1.255", "1e-3", "0.1e-1",
                  "0.01e-1", "1.250e1", "0e-9", "0.000e5", "1.0000000000000000001e19",
                  "1.00000000000000000001e20", "1.00000000000000000000000e3", "100000000e-8",
                  "1000000000e-9", "1e16", "1.2345678901234567e+16"]),
        ("0.1", ["0.3", "0.7", "1e-1", "3E-1", "0.30", "0.35", "1.0000000001"]),
        ("0.25", ["0.25", "0.5", "0.75", "1", "0.2", "0.125", "2.5e-1", "7.5e-1", "1.25e-1", "-0.75"]),
        ("1.5", ["0", "1.5", "3", "4.5", "4.5e0", "45e-1", "0.15e1", "1", "7.5", "7.4", "1.5e300"]),
        ("1E-8", ["12391239123", "1e-8", "3e-8", "1.5e-8", "0.00000001", "0.000000015"]),
    ],
)  # fmt: skip
def test_automaton_examples(m: str, texts: list[str]) -> None:
    auto = multiples_within(Decimal(m), JSON_NUMBER, False)
    for text in texts:
        assert auto.matches(text) == (is_multiple(text, m) and in_shape(text, m)), (m, text)


def test_the_oracle_is_exact_where_floats_are_not() -> None:
    """Why the oracle is not ``jsonschema``: it divides floats."""
    import jsonschema

    assert is_multiple("0.3", "0.1") and is_multiple("4.35", "0.01")
    assert not jsonschema.Draft202012Validator({"multipleOf": 0.1}).is_valid(0.3)
    auto = multiples_within(Decimal("0.1"), JSON_NUMBER, False)
    assert auto.matches("0.3") and auto.matches("4.35") is False and auto.matches("4.3")


# ---------------------------------------------------------------------------- schemas, engine


BOUNDS = st.fixed_dictionaries(
    {},
    optional={
        "minimum": st.integers(-300, 100).map(lambda x: x / 4),
        "exclusiveMaximum": st.integers(-100, 300).map(lambda x: x / 4),
        "type": st.sampled_from(["number", "integer"]),
    },
)


@given(st.data())
def test_schemas_through_the_engine(data: Any) -> None:
    """``{multipleOf, bounds, type}`` in both modes through the C matcher, against the oracle
    and the same schema without ``multipleOf``."""
    m = data.draw(DIVISORS)
    schema = {**data.draw(BOUNDS), "multipleOf": float(m)}
    rest = {k: v for k, v in schema.items() if k != "multipleOf"}
    full, canon = schema_recognizer(json.dumps(schema), False), schema_recognizer(json.dumps(schema), True)
    base, base_canon = schema_recognizer(json.dumps(rest), False), schema_recognizer(json.dumps(rest), True)
    for text in data.draw(st.lists(number_texts(m), min_size=12, max_size=12)):
        b = text.encode()
        want = base.accepts(b) and is_multiple(text, m) and in_shape(text, m)
        assert full.accepts(b) == want, (schema, text, want)
        assert not canon.accepts(b) or want, ("canonical", schema, text)
        v = value_of(text)
        if want and float(v) == v:  # a valid value's json.dumps text, canonical
            dumped = json.dumps(float(v) if schema.get("type") != "integer" else int(v))
            if base_canon.accepts(dumped.encode()):
                assert canon.accepts(dumped.encode()), ("canonical", schema, dumped)


def test_a_divisor_past_the_state_budget_is_refused() -> None:
    """``0.123456789``: p = 123456789 residues; refused with the pointer, at once, not built."""
    schema = {"properties": {"x": {"type": "number", "multipleOf": 0.123456789}}}
    for canonical in (False, True):
        with pytest.raises(NotEnforceable) as e:
            schema_to_grammar(schema, canonical=canonical)
        assert e.value.pointer == "/properties/x/multipleOf"
        assert "automaton states" in str(e.value)
    _, report = schema_to_grammar(schema, canonical=False, strict=False)
    assert [(x.path, x.status) for x in report if x.keyword == "multipleOf"] == [
        ("/properties/x/multipleOf", "rejected")
    ]


def test_decimal_multiple_of_beside_excluded_values() -> None:
    schema = {"multipleOf": 0.5, "not": {"enum": [1, 2.5]}, "minimum": 0, "maximum": 3}
    g, report = schema_to_grammar(schema, canonical=False)
    assert report.exact
    m = EngineRecognizer(g)
    for text in ["0", "0.5", "1", "1.0", "1.5", "2", "2.5", "3", "3.5", "-0.5", "0.25"]:
        want = (
            is_multiple(text, "0.5")
            and 0 <= value_of(text) <= 3
            and value_of(text) not in (1, Fraction(5, 2))
        )
        assert m.accepts(text.encode()) == want, text


# ---------------------------------------------------------------------------- JSONSchemaBench


def _records() -> list[dict[str, Any]]:
    return [
        r
        for r in map(json.loads, RECORDS.read_text().splitlines())
        if "multipleOf" in json.dumps(r["schema"])
    ]


@pytest.mark.parametrize("rec", _records(), ids=lambda r: r["id"])
def test_bench_schemas_with_a_decimal_multiple_of(rec: dict[str, Any]) -> None:
    """Snowplow sp_35 / sp_47 / sp_54 (refused before: the per-split shortfall) and Github_easy
    o46416 compile in both modes; each instance's verdict is the corpus's (its ``valid`` flags
    agree with the exact oracle: every price there has at most 2 decimals)."""
    for canonical in (False, True):
        g, report = schema_to_grammar(rec["schema"], canonical=canonical)
        statuses = {x.status for x in report if x.keyword == "multipleOf"}
        assert statuses == {"enforced"}, statuses
        m = EngineRecognizer(g)
        for test in rec["tests"]:
            for sep in ((", ", ": "), (",", ":")):
                text = json.dumps(test["data"], separators=sep)
                got = m.accepts(text.encode())
                assert got == test["valid"] or (canonical and not got), (rec["id"], canonical, text[:200])
