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

from .cache import CACHE, AutomatonCache
from .limits import DEFAULT_LIMITS
from .prepare import prepare
from .tables import build_tables

# The schemas whose shared rules are pinned, each in both generation modes: any value, an
# object or an array of any values, and a plain string.
SCHEMAS: tuple[dict[str, str], ...] = ({}, {"type": "object"}, {"type": "array"}, {"type": "string"})

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
        for canonical in (True, False):
            for schema in SCHEMAS:
                g, _ = schema_to_grammar(schema, canonical=canonical)
                starts.add(g.start)
                sess = prepare(g, DEFAULT_LIMITS, own.session())
                build_tables(g, DEFAULT_LIMITS, sess)
                seed.update(sess.memo)
                held += sess.keep
        CACHE.pin(own, lambda members: not starts.intersection(members), seed, held)
        _pinned = True
