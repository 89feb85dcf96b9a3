"""JSON Schema ``pattern`` and ``patternProperties`` with ECMA-262 semantics (``u`` flag, a match
anywhere), over the decoded string whatever its JSON spelling.

References: the JSON-Schema-Test-Suite's ``optional/ecmascript-regex.json`` (both drafts), the
issue's cases, and ``jsonschema`` with its pattern keywords checked by the ``regress`` ECMAScript
engine (tests/ecma.py) for random patterns, strings and keys.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from cfgmask import Grammar
from cfgmask.errors import GrammarError, LimitError, NotEnforceable
from cfgmask.frontends import ecmascript
from cfgmask.frontends.json_schema import schema_to_grammar

from . import ecma
from .engine import EngineRecognizer
from .helpers import check
from .test_regex_ecmascript import TEXT, patterns

SUITE = Path(__file__).parent / "corpora" / "json-schema-test-suite" / "tests"


def spellings(data: Any) -> set[str]:
    """Compact, ``json.dumps`` defaults (non-ASCII as ``\\u`` escapes) and raw UTF-8."""
    return {
        json.dumps(data),
        json.dumps(data, separators=(",", ":")),
        json.dumps(data, ensure_ascii=False),
    }


@pytest.mark.parametrize("draft", ["draft2020-12", "draft7"])
def test_optional_ecmascript_regex_suite(draft: str) -> None:
    counts: Counter[str] = Counter()
    wrong = []
    for group in json.loads((SUITE / draft / "optional" / "ecmascript-regex.json").read_text()):
        schema = group["schema"]
        if draft == "draft7" and isinstance(schema, dict):
            schema = {**schema, "$schema": "http://json-schema.org/draft-07/schema#"}
        g, report = schema_to_grammar(schema, canonical=False)  # strict: every group compiles
        assert report.exact, group["description"]
        counts["compiled"] += 1
        rec = EngineRecognizer(g)
        for test in group["tests"]:
            for text in spellings(test["data"]):
                counts["verdicts"] += 1
                if rec.accepts(text.encode()) != test["valid"]:
                    wrong.append(f"{group['description']} | {test['description']}: {text[:80]}")
    print(f"\n{draft} optional/ecmascript-regex.json: {dict(counts)}")
    assert not wrong, "\n".join(wrong)
    assert counts["compiled"] == 20


def grammar(schema: Any) -> Any:
    return schema_to_grammar(schema, canonical=False)[0]


def test_issue_digits() -> None:
    """``^\\d{3}$`` is three ASCII digits, however the JSON spells them."""
    check(
        grammar({"type": "string", "pattern": "^\\d{3}$"}),
        accepts=['"123"', '"\\u0031\\u0032\\u0033"', '"1\\u00323"'],
        rejects=[
            '"١٢٣"',
            '"\\u0661\\u0662\\u0663"',
            '"🯸🯸🯸"',
            '"\\ud83e\\udff8\\ud83e\\udff8\\ud83e\\udff8"',
            '"12"',
        ],
        using=EngineRecognizer,
    )


def test_issue_letters() -> None:
    """``\\p{Letter}`` compiles and is enforced (strict mode, draft 2020-12 and draft 7)."""
    for extra in ({}, {"$schema": "http://json-schema.org/draft-07/schema#"}):
        g = Grammar.from_json_schema(
            {"type": "string", "pattern": "^\\p{Letter}+$", **extra}, canonical=False
        )
        check(
            g.ir,
            accepts=['"abc"', '"é\\u00e9λЖ"', '"漢字"'],
            rejects=['"ab1"', '""', '"a b"', '"\\u0031"'],
            using=EngineRecognizer,
        )
    keys = grammar(
        {
            "type": "object",
            "patternProperties": {"^\\p{Lu}\\w*$": {"type": "integer"}},
            "additionalProperties": False,
        }
    )
    check(
        keys,
        accepts=['{"Abc": 1}', '{"\\u0041_1": 2}', '{"É": 3}', "{}"],
        rejects=['{"abc": 1}', '{"Abé": 1}', '{"A": "x"}'],
        using=EngineRecognizer,
    )


def test_canonical_mode_uses_the_same_semantics() -> None:
    g = Grammar.from_json_schema({"type": "string", "pattern": "^\\d+$"})  # canonical output
    check(g.ir, accepts=['"0123"'], rejects=['"٣"', '"\\u0661"'], using=EngineRecognizer)


def test_word_boundaries_and_lookarounds_in_a_search() -> None:
    cases = [
        ("\\bcat\\b", ["cat", "a cat.", "é cat", "x-cat"], ["concat", "cats", "cat_"]),
        ("a(?!b)", ["a", "ac", "aab", "xa"], ["ab", "", "b"]),
        ("(?<=@)x", ["@x", "a@xy"], ["x", "ax"]),
    ]
    for pattern, good, bad in cases:
        for s in good + bad:
            assert ecma.search(pattern, s) == (s in good), (pattern, s)
        rec = EngineRecognizer(grammar({"type": "string", "pattern": pattern}))
        for s in good + bad:
            for text in spellings(s):
                assert rec.accepts(text.encode()) == (s in good), (pattern, text)


def test_unsupported_valid_patterns_are_refused_not_weakened() -> None:
    schema = {"type": "string", "pattern": "(a)\\1"}
    with pytest.raises(NotEnforceable, match="/pattern"):
        schema_to_grammar(schema)
    with pytest.raises(GrammarError, match="invalid ECMAScript regular expression"):
        schema_to_grammar({"type": "string", "pattern": "\\a"})


# --------------------------------------------------------------------------- random


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much]
)
@given(pattern=patterns(), strings=st.lists(TEXT, min_size=1, max_size=5))
def test_random_patterns_against_an_ecmascript_validator(pattern: str, strings: list[str]) -> None:
    """A random pattern as ``pattern`` and as a ``patternProperties`` key: each instance's
    every spelling is accepted iff the validator (with ``regress``) says valid."""
    assume(ecma.is_valid(pattern) and ecmascript.syntax_error(pattern) is None)
    string_schema = {"type": "string", "pattern": pattern}
    object_schema = {
        "type": "object",
        "patternProperties": {pattern: {"type": "integer"}},
        "additionalProperties": {"type": "null"},
    }
    for schema, instances in (
        (string_schema, strings),
        (object_schema, [{s: 1} for s in strings] + [{s: None} for s in strings]),
    ):
        validator = ecma.ecma_validator(schema)
        try:
            rec = EngineRecognizer(grammar(schema))
        except LimitError:  # a typed refusal: a key automaton over every JSON spelling of \p{L}...
            assume(False)
            return
        except GrammarError as e:
            if "language is empty" in e.message:  # a pattern no string matches
                assert not any(validator.is_valid(data) for data in instances), pattern
                continue
            # refused: only the constructs the regex front end refuses
            assert any(w in e.message for w in ("anchor", "look", "word boundary", "automaton")), e.message
            assume(False)
            return
        for data in instances:
            valid = validator.is_valid(data)
            for text in spellings(data):
                assert rec.accepts(text.encode()) == valid, (pattern, text, valid)
