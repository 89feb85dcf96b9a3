"""The exception hierarchy: one root, one class per kind of failure."""

from __future__ import annotations


class CfgmaskError(Exception):
    """Root of every error cfgmask raises on purpose."""


class GrammarError(CfgmaskError, ValueError):
    """A grammar (or schema, or regex) that cannot be compiled.

    ``line`` and ``column`` are 1-based and point into the source text when
    the error has a position; ``str()`` then shows the offending line with a
    caret under the column.  ``pointer`` is the JSON pointer of the offending keyword when the
    source is a JSON Schema (``/properties/a/type``).
    """

    def __init__(
        self,
        message: str,
        *,
        line: int | None = None,
        column: int | None = None,
        context: str | None = None,
        pointer: str | None = None,
    ) -> None:
        self.message = message
        self.pointer = pointer
        self.line = line
        self.column = column
        self.context = context
        super().__init__(self._render())

    @classmethod
    def at(cls, message: str, text: str, offset: int) -> GrammarError:
        """An error at character ``offset`` of ``text``."""
        offset = max(0, min(offset, len(text)))
        line = text.count("\n", 0, offset) + 1
        start = text.rfind("\n", 0, offset) + 1
        end = text.find("\n", offset)
        if end < 0:
            end = len(text)
        return cls(message, line=line, column=offset - start + 1, context=text[start:end])

    def _render(self) -> str:
        if self.line is None:
            return self.message
        out = f"{self.message} (line {self.line}, column {self.column})"
        if self.context is not None and self.column is not None:
            shown = self.context.expandtabs(1)
            out += f"\n  {shown}\n  {' ' * (self.column - 1)}^"
        return out


class NotEnforceable(GrammarError):
    """Strict mode refused a JSON Schema keyword that the grammar cannot enforce exactly;
    ``strict=False`` (the command line's ``--lenient``) compiles it and lists it in the report."""


class VocabularyError(CfgmaskError, ValueError):
    """A vocabulary that cannot be used: bad ids, bad bytes, wrong sizes."""


class MatcherError(CfgmaskError):
    """A matcher used wrongly (bad token id, wrong buffer) or in its error state."""


class LimitError(CfgmaskError):
    """A configured resource limit was exceeded; ``limit`` names it, ``value`` is its setting.

    Most limits are compile-time (:class:`~cfgmask.CompileLimits`); a matcher that hits one of
    :class:`~cfgmask.MatcherLimits` raises this once and then :class:`MatcherError` from its
    sticky error state."""

    def __init__(self, message: str, *, limit: str = "", value: int | float | None = None) -> None:
        self.limit = limit
        self.value = value
        super().__init__(message)
