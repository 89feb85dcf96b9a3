"""The canonical JSON text of a string: the one spelling canonical mode generates.

Every character is written as itself except ``"`` (``\\"``), ``\\`` (``\\\\``), the control
characters (``\\b \\f \\n \\r \\t``, the others ``\\u00XX`` in lowercase hex) and a lone
surrogate of a Python str (``\\udXXX``, lowercase); ``/`` is not escaped.  This is what
``json.dumps(s, ensure_ascii=False)`` writes, surrogates aside, so a whole list of strings is
spelled by one call into its C encoder.
"""

from __future__ import annotations

import functools
import json
import re
from json.encoder import encode_basestring

_SURROGATE = re.compile("[\ud800-\udfff]")
# a high surrogate right before a low one: json.loads reads such a pair as one character, so
# no JSON text has this str as its value
_PAIR = re.compile("[\ud800-\udbff][\udc00-\udfff]")


def _escape_surrogate(m: re.Match[str]) -> str:
    return f"\\u{ord(m.group()):04x}"


def _spell(text: str) -> bytes:
    if not text.isascii() and _SURROGATE.search(text):
        text = _SURROGATE.sub(_escape_surrogate, text)
    return text.encode("utf-8")


# json.dumps(x, ensure_ascii=False) without a JSONEncoder made per call (same settings, no state kept)
_dumps_utf8 = json.JSONEncoder(ensure_ascii=False).encode


@functools.lru_cache(maxsize=8192)  # keys and enum strings repeat across a schema and between schemas
def canonical_string(s: str) -> bytes:
    """The canonical JSON text of ``s``, quotes included (UTF-8)."""
    return _spell(encode_basestring(s))  # what json.dumps(s, ensure_ascii=False) returns for a str


def canonical_strings(values: list[str]) -> list[bytes]:
    """``[canonical_string(s) for s in values]``, in one pass of the JSON encoder."""
    if not values:
        return []
    # '", "' never occurs inside a string's text (a quote there is escaped), so it
    # separates the items of the list; NUL never occurs in one either (it is \\u0000)
    blob = _spell(_dumps_utf8(values))
    return blob[1:-1].replace(b'", "', b'"\x00"').split(b"\x00")


def has_surrogate(s: str) -> bool:
    """Whether ``s`` holds a surrogate code point (only an escape spells one)."""
    return not s.isascii() and _SURROGATE.search(s) is not None


def unspellable(s: str) -> bool:
    """Whether no JSON text has ``s`` as its value (a surrogate pair as two code points)."""
    return not s.isascii() and _PAIR.search(s) is not None  # keys are mostly ASCII: no regex run
