"""The prelude: automata every JSON Schema grammar may share, whatever its schema says.

A schema that allows any JSON value somewhere (``{}``, an object's extra properties, an
array's items: about a third of JSONSchemaBench) needs the grammar of every JSON value, its
strings and whitespace; those rules come out of the front end the same each time, and their
automata cost ~0.1-0.3 ms of a cold compile.  They are built once a process, in a cache of
their own (nothing a user compiled goes in), and pinned in :data:`.cache.CACHE`, so every
generation of it, the one after ``clear_caches()`` included, starts with them: what the
engine is made of, like the vocabulary's pinned walks, not what an earlier grammar taught.
A schema's own rules (the start rule's component) are not kept.
"""

from __future__ import annotations

import threading
from typing import Any

from .cache import CACHE, AutomatonCache
from .limits import DEFAULT_LIMITS
from .prepare import prepare
from .tables import build_tables

# The schemas whose shared rules are pinned, each in both generation modes: any value, an
# object or an array of any values, and a plain string; and VALUES in the default mode.
SCHEMAS: tuple[dict[str, str], ...] = ({}, {"type": "object"}, {"type": "array"}, {"type": "string"})

# The values of the commonest properties, each twice (a rule with two callers is built on its
# own, and so cached: one with one caller is built inside its caller's automaton), in the
# default generation mode only: a number, an integer, a boolean, a string, each or null.
_TYPES = ("number", "integer", "boolean", "string")
VALUES: dict[str, Any] = {
    "type": "object",
    "properties": {
        f"{t}{null}{i}": {"type": [t, "null"] if null else t}
        for t in _TYPES
        for null in ("", "-null")
        for i in (0, 1)
    },
}
# and the commonest string formats: a date-time's value, built from a ~400-state NFA, was ~0.9 M
# instructions (~40 %) of a median compile that has it twice (docs/design.md §7, ttfd43)
FORMATS = ("date-time", "date", "time", "email", "uri", "uuid")
VALUES["properties"].update(
    {f"{fmt}{i}": {"type": "string", "format": fmt} for fmt in FORMATS for i in (0, 1)}
)
VALUES["required"] = list(VALUES["properties"])

_LOCK = threading.Lock()
_pinned = False


def pin() -> None:
    """Build the prelude and pin it in the automaton cache, once a process (~5 ms): every
    generation from the next ``clear_caches()`` on starts with it, and so does the current one
    if nothing was compiled yet (``AutomatonCache.pin``)."""
    global _pinned
    with _LOCK:
        if _pinned:
            return
        from ..frontends.json_schema import schema_to_grammar

        own = AutomatonCache()
        starts = set()
        seed: dict[int, int] = {}  # the IR objects met, their node ids (the same every generation)
        held: list[object] = []
        for canonical, schemas in ((True, (*SCHEMAS, VALUES)), (False, SCHEMAS)):
            for schema in schemas:
                g, _ = schema_to_grammar(schema, canonical=canonical)
                starts.add(g.start)
                sess = prepare(g, DEFAULT_LIMITS, own.session())
                build_tables(g, DEFAULT_LIMITS, sess)
                seed.update(sess.memo)
                held += sess.keep
        CACHE.pin(own, lambda members: not starts.intersection(members), seed, held)
        _pinned = True
