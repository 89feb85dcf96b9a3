"""What the converter did with each keyword: enforced, narrowed, relaxed or rejected."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ...errors import NotEnforceable

ENFORCED, NARROWED, RELAXED, REJECTED = "enforced", "narrowed", "relaxed", "rejected"
# What strict mode refuses: a verdict under which the grammar may allow an invalid document.
UNSOUND = (RELAXED, REJECTED)
_RANK = {ENFORCED: 0, NARROWED: 1, RELAXED: 2, REJECTED: 3}


@dataclass(frozen=True)
class ReportEntry:
    """One keyword at one place in the schema.

    ``path`` is the JSON pointer of the keyword (``/properties/a/maxLength``;
    inside a combined ``allOf`` it is the path of the ``allOf``).  ``status``:

    * ``enforced``: the grammar enforces the keyword exactly (annotations
      trivially; ``reason`` may say which reading of a standard was chosen);
    * ``narrowed``: a sound subset: every document the grammar allows is valid, but some
      valid documents are left out (``reason`` says which: canonical key order, literal keys,
      required keys in schema order past the tracking limit);
    * ``relaxed``: enforced in a documented weaker form: the grammar may allow an invalid
      document (``reason`` says which);
    * ``rejected``: not enforced at all.  In strict mode this raises; in
      non-strict mode the keyword is ignored (the grammar accepts a superset).

    Strict mode refuses ``relaxed`` and ``rejected``; with ``canonical=False`` (the schema's
    whole language) it refuses ``narrowed`` too, so it never narrows silently.
    """

    path: str
    keyword: str
    status: str
    reason: str = ""


Row = tuple[str, str, str, str]  # (path, keyword, status, reason): a verdict as recorded


@dataclass
class SchemaReport:
    """Every keyword the converter met, with its status."""

    entries: list[ReportEntry] = field(default_factory=list)

    @classmethod
    def _of_rows(cls, rows: list[Row]) -> SchemaReport:
        """The report of the verdicts ``rows`` (:class:`Reporter`'s), its entries made when first
        read: a compile reads none of them, and a frozen dataclass costs ~1 µs each to make."""
        report = cls.__new__(cls)
        report.__dict__["_rows"] = rows
        return report

    if not TYPE_CHECKING:  # mypy would take every attribute for a list

        def __getattr__(self, name: str) -> list[ReportEntry]:
            # only for attributes not found: ``entries`` of a report made by _of_rows, once
            # (read before it is dropped: two threads reading at once both find it)
            rows = self.__dict__.get("_rows") if name == "entries" else None
            if rows is None:
                raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
            self.entries = entries = _entries(rows)
            self.__dict__.pop("_rows", None)
            return entries

    def __iter__(self) -> Iterator[ReportEntry]:
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)

    @property
    def exact(self) -> bool:
        """True when every keyword is enforced exactly (nothing narrowed either)."""
        return all(e.status == ENFORCED for e in self.entries)

    @property
    def sound(self) -> bool:
        """True when every document the grammar allows is valid (nothing relaxed or rejected)."""
        return all(e.status not in UNSOUND for e in self.entries)

    def with_status(self, status: str) -> list[ReportEntry]:
        return [e for e in self.entries if e.status == status]

    @property
    def narrowed(self) -> list[ReportEntry]:
        return self.with_status(NARROWED)

    @property
    def relaxed(self) -> list[ReportEntry]:
        return self.with_status(RELAXED)

    @property
    def rejected(self) -> list[ReportEntry]:
        return self.with_status(REJECTED)

    def __str__(self) -> str:
        rows = [
            f"{e.status:9} {e.path or '/'} {e.keyword}" + (f": {e.reason}" if e.reason else "")
            for e in self.entries
        ]
        return "\n".join(rows)


def _entries(rows: list[Row]) -> list[ReportEntry]:
    """One entry per (path, keyword), where it was first met, with its worst verdict (the first
    row of that rank)."""
    at: dict[tuple[str, str], int] = {}  # (path, keyword) -> index of its row in ``out``
    out: list[Row] = []
    for row in rows:
        key = (row[0], row[1])
        i = at.get(key)
        if i is None:
            at[key] = len(out)
            out.append(row)
        elif _RANK[row[2]] > _RANK[out[i][2]]:
            out[i] = row
    return [ReportEntry(*row) for row in out]


class Reporter:
    """Collects verdicts; in strict mode the first unsound one raises (and, when ``narrowing``
    is off, the first narrowed one: the whole language was asked for).  A keyword met twice
    keeps one entry, its worst verdict: the rows are merged so when the report is read
    (:func:`_entries`), which a compile never does."""

    def __init__(self, strict: bool, narrowing: bool = True) -> None:
        self.strict = strict
        self.narrowing = narrowing
        self.rows: list[Row] = []  # every verdict, in the order met

    @property
    def report(self) -> SchemaReport:
        return SchemaReport._of_rows(self.rows)

    def add(self, path: str, keyword: str, status: str, reason: str = "") -> None:
        """Record a verdict.  Strict mode raises on a verdict it refuses: never recorded, so no
        verdict met earlier for the keyword can be as bad (merging it in could not hide it)."""
        if (
            self.strict
            and status is not ENFORCED
            and (status in UNSOUND or (status == NARROWED and not self.narrowing))
        ):
            where = path or "/"
            raise NotEnforceable(
                f"JSON Schema keyword {keyword!r} at {where} cannot be enforced exactly: {reason}"
                " (strict=False compiles it and lists it in schema_report)",
                pointer=where,
            )
        self.rows.append((path, keyword, status, reason))

    def enforced(self, path: str, keyword: str, reason: str = "") -> None:
        """``add(path, keyword, ENFORCED, reason)``, the most frequent verdict, inline: the
        mildest, it never raises."""
        self.rows.append((path, keyword, ENFORCED, reason))

    def narrowed(self, path: str, keyword: str, reason: str) -> None:
        self.add(path, keyword, NARROWED, reason)

    def relaxed(self, path: str, keyword: str, reason: str) -> None:
        self.add(path, keyword, RELAXED, reason)

    def rejected(self, path: str, keyword: str, reason: str) -> None:
        self.add(path, keyword, REJECTED, reason)


def pointer(path: str, *parts: object) -> str:
    """Extend a JSON pointer with escaped reference tokens."""
    for p in parts:
        t = p if isinstance(p, str) else str(p)
        if "~" in t or "/" in t:
            t = t.replace("~", "~0").replace("/", "~1")
        path += "/" + t
    return path
