"""What the converter did with each keyword: enforced, relaxed or rejected."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from ...errors import GrammarError

ENFORCED, RELAXED, REJECTED = "enforced", "relaxed", "rejected"


@dataclass(frozen=True)
class ReportEntry:
    """One keyword at one place in the schema.

    ``path`` is the JSON pointer of the keyword (``/properties/a/maxLength``;
    inside a combined ``allOf`` it is the path of the ``allOf``).  ``status``:

    * ``enforced``: the grammar enforces the keyword exactly (annotations
      trivially; ``reason`` may say which reading of a standard was chosen);
    * ``relaxed``: enforced in a documented weaker or narrower form
      (``reason`` says which);
    * ``rejected``: not enforced at all.  In strict mode this raises; in
      non-strict mode the keyword is ignored (the grammar accepts a superset).
    """

    path: str
    keyword: str
    status: str
    reason: str = ""


@dataclass
class SchemaReport:
    """Every keyword the converter met, with its status."""

    entries: list[ReportEntry] = field(default_factory=list)

    def __iter__(self) -> Iterator[ReportEntry]:
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)

    @property
    def exact(self) -> bool:
        """True when every keyword is enforced exactly."""
        return all(e.status == ENFORCED for e in self.entries)

    def with_status(self, status: str) -> list[ReportEntry]:
        return [e for e in self.entries if e.status == status]

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


class Reporter:
    """Collects entries; in strict mode the first non-enforced one raises."""

    def __init__(self, strict: bool) -> None:
        self.strict = strict
        self.report = SchemaReport()
        self._seen: set[tuple[str, str, str]] = set()

    def add(self, path: str, keyword: str, status: str, reason: str = "") -> None:
        key = (path, keyword, status)
        if key in self._seen:
            return
        if self.strict and status != ENFORCED:
            where = path or "/"
            raise GrammarError(
                f"JSON Schema keyword {keyword!r} at {where} cannot be enforced exactly: {reason}"
            )
        self._seen.add(key)
        self.report.entries.append(ReportEntry(path, keyword, status, reason))

    def enforced(self, path: str, keyword: str, reason: str = "") -> None:
        self.add(path, keyword, ENFORCED, reason)

    def relaxed(self, path: str, keyword: str, reason: str) -> None:
        self.add(path, keyword, RELAXED, reason)

    def rejected(self, path: str, keyword: str, reason: str) -> None:
        self.add(path, keyword, REJECTED, reason)


def pointer(path: str, *parts: object) -> str:
    """Extend a JSON pointer with escaped reference tokens."""
    for p in parts:
        path += "/" + str(p).replace("~", "~0").replace("/", "~1")
    return path
