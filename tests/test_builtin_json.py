"""The builtin JSON grammar: any JSON value, bounded whitespace."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from cfgmask.frontends.json_schema import builtin_json

from .helpers import check
from .reference import ReferenceMatcher

_MATCHER = ReferenceMatcher(builtin_json())

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=12,
)


@given(json_values)
def test_accepts_every_json_dumps_style(value: object) -> None:
    for text in (
        json.dumps(value),
        json.dumps(value, separators=(",", ":")),
        json.dumps(value, indent=2),
        json.dumps(value, ensure_ascii=False),
    ):
        assert _MATCHER.accepts(text.encode("utf-8", "surrogatepass")), text


@given(json_values, st.data())
def test_rejects_broken_json(value: object, data: st.DataObject) -> None:
    text = json.dumps(value, separators=(",", ":"))
    cut = data.draw(st.integers(0, len(text) - 1))
    broken = text[:cut]  # a proper prefix of a JSON text is never a complete JSON text ...
    try:
        json.loads(broken)
        complete = True
    except ValueError:
        complete = False
    if not complete:  # ... except a number prefix like "12" of "123"
        assert not _MATCHER.accepts(broken.encode("utf-8", "surrogatepass")), broken


def test_spec_table() -> None:
    check(
        builtin_json(),
        accepts=[
            '{"a": [1, -2.5e+3, true, false, null, "\\u00e9\\n"]}',
            "[]",
            '"\\ud800"',
            "0",
            '{\n  "a": 1\n}',
        ],
        rejects=[
            "[1,]",
            '{"a" 1}',
            "01",
            "'a'",
            '"\x01"',
            "tru",
            "[1]]",
            "{}\n\n",
            " 1",
            '{"a":1,\n\n"b":2}',
        ],
    )
    check(builtin_json("compact"), accepts=['{"a":[1]}'], rejects=['{"a": [1]}'])
    check(builtin_json("any"), accepts=['\n {"a" :\t[1] }\n\n'])
