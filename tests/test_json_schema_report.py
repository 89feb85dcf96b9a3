"""The JSON Schema report: verdicts recorded as rows, merged into entries when the report is read.

The reference for the merge is its specification, written independently of the code: one entry per
(path, keyword), at the place the keyword was first met, holding the worst verdict met for it (the
first one of that rank)."""

from __future__ import annotations

import copy
import dataclasses
import pickle
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cfgmask import Grammar
from cfgmask.errors import NotEnforceable
from cfgmask.frontends.json_schema.report import (
    ENFORCED,
    NARROWED,
    REJECTED,
    RELAXED,
    ReportEntry,
    Reporter,
    SchemaReport,
)

WORST_LAST = [ENFORCED, NARROWED, RELAXED, REJECTED]


def reference(rows: list[tuple[str, str, str, str]]) -> list[ReportEntry]:
    keys = list(dict.fromkeys((p, k) for p, k, _, _ in rows))
    out = []
    for key in keys:
        mine = [r for r in rows if (r[0], r[1]) == key]
        out.append(ReportEntry(*max(mine, key=lambda r: WORST_LAST.index(r[2]))))  # max: the first
    return out


ROWS = st.lists(
    st.tuples(
        st.sampled_from(["", "/a", "/properties/x"]),
        st.sampled_from(["type", "enum", "properties"]),
        st.sampled_from(WORST_LAST),
        st.sampled_from(["", "why", "because"]),
    ),
    max_size=12,
)


@settings(max_examples=300, deadline=None)
@given(ROWS)
def test_entries_are_the_worst_verdict_per_keyword_where_first_met(
    rows: list[tuple[str, str, str, str]],
) -> None:
    rep = Reporter(strict=False)
    for path, keyword, status, reason in rows:
        if status == ENFORCED:
            rep.enforced(path, keyword, reason)
        else:
            getattr(rep, status)(path, keyword, reason)
    report = rep.report
    expected = reference(rows)
    assert report == SchemaReport(expected)
    assert list(report) == expected and len(report) == len(expected)
    assert report.exact == all(e.status == ENFORCED for e in expected)
    assert report.sound == all(e.status in (ENFORCED, NARROWED) for e in expected)
    for status in WORST_LAST:
        assert report.with_status(status) == [e for e in expected if e.status == status]


def test_a_read_report_behaves_as_one_built_with_its_entries() -> None:
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "string", "description": "d"},
            "b": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
        },
        "required": ["a"],
    }
    lazy = Grammar.from_json_schema(schema, strict=False).schema_report
    entries = list(Grammar.from_json_schema(schema, strict=False).schema_report)
    eager = SchemaReport(list(entries))
    assert repr(lazy) == repr(eager) and str(lazy) == str(eager)
    assert lazy.narrowed == eager.narrowed and lazy.rejected == eager.rejected
    assert lazy.relaxed == eager.relaxed == []
    assert [e.keyword for e in lazy.rejected] == ["uniqueItems"]
    assert lazy == eager and lazy.entries is lazy.entries  # made once
    assert dataclasses.asdict(lazy) == dataclasses.asdict(eager)
    assert vars(lazy) == vars(eager)  # the rows are dropped once the entries are made
    assert not hasattr(lazy, "rows") and not hasattr(lazy, "_rows")


def test_an_unread_report_copies_pickles_and_compares() -> None:
    schema = {"type": "object", "properties": {"a": {"enum": [1, "x"]}}, "x-note": 1}
    entries = list(Grammar.from_json_schema(schema).schema_report)
    for make in (copy.copy, copy.deepcopy, lambda r: pickle.loads(pickle.dumps(r))):
        assert make(Grammar.from_json_schema(schema).schema_report) == SchemaReport(entries)
    assert Grammar.from_json_schema(schema).schema_report == Grammar.from_json_schema(schema).schema_report
    assert dataclasses.replace(Grammar.from_json_schema(schema).schema_report).entries == entries
    with pytest.raises(AttributeError, match="no attribute 'missing'"):
        Grammar.from_json_schema(schema).schema_report.missing  # noqa: B018


def test_threads_reading_one_report_at_once_see_the_same_entries() -> None:
    schema = {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(50)}}
    expected = list(Grammar.from_json_schema(schema).schema_report)
    for _ in range(20):
        report = Grammar.from_json_schema(schema).schema_report
        seen: list[list[ReportEntry]] = []
        threads = [threading.Thread(target=lambda r=report, out=seen: out.append(list(r))) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert seen == [expected] * 4


def test_strict_mode_raises_at_the_verdict_and_records_nothing() -> None:
    rep = Reporter(strict=True, narrowing=False)
    rep.enforced("/a", "type")
    for status in (NARROWED, RELAXED, REJECTED):
        with pytest.raises(NotEnforceable) as e:
            getattr(rep, status)("/a", "type", "why")
        assert e.value.pointer == "/a"
    assert list(rep.report) == [ReportEntry("/a", "type", ENFORCED)]
    Reporter(strict=True).narrowed("/a", "properties", "order")  # narrowing allowed: no raise
