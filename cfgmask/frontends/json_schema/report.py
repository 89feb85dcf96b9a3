"""What the converter did with each keyword: enforced, narrowed, relaxed or rejected."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

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


class Reporter:
    """Collects entries; in strict mode the first unsound one raises (and, when ``narrowing``
    is off, the first narrowed one: the whole language was asked for)."""

    def __init__(self, strict: bool, narrowing: bool = True) -> None:
        self.strict = strict
        self.narrowing = narrowing
        self.report = SchemaReport()
        self._seen: dict[tuple[str, str], int] = {}  # (path, keyword) -> index of its entry

    def add(self, path: str, keyword: str, status: str, reason: str = "") -> None:
        """Record a verdict; a keyword met twice keeps one entry, its worst verdict."""
        key = (path, keyword)
        at = self._seen.get(key)
        entries = self.report.entries
        if at is not None and _RANK[entries[at].status] >= _RANK[status]:
            return
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
        entry = ReportEntry(path, keyword, status, reason)
        if at is None:
            self._seen[key] = len(entries)
            entries.append(entry)
        else:
            entries[at] = entry

    def enforced(self, path: str, keyword: str, reason: str = "") -> None:
        """``add(path, keyword, ENFORCED, reason)``, the most frequent verdict, inline: the
        mildest, it never raises and never replaces an entry."""
        key = (path, keyword)
        if key not in self._seen:
            entries = self.report.entries
            self._seen[key] = len(entries)
            entries.append(ReportEntry(path, keyword, ENFORCED, reason))

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
