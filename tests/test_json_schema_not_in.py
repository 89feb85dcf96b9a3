"""``strings.not_in``: the JSON spellings of every string but a listed few (the keys an object
with ``additionalProperties`` may add), checked against a plain set-membership reference with
the pure-Python matcher, with and without subtrees of the name trie made rules."""

from __future__ import annotations

import json
from unittest import mock

from hypothesis import given, settings
from hypothesis import strategies as st

from cfgmask import ir
from cfgmask.frontends.json_schema import strings

from .reference import ReferenceMatcher

ALPHABET = 'ab"\\é'  # a short escape, a multi-byte character, names sharing prefixes
NAMES = st.lists(st.text(ALPHABET, max_size=4), max_size=6)
WORDS = st.lists(st.text(ALPHABET, max_size=5), min_size=1, max_size=12)


def matcher(names: list[str], canonical: bool, rule_size: int | None) -> ReferenceMatcher:
    rules: dict[str, ir.Expr] = {}
    with mock.patch.object(strings, "NOT_IN_RULE_SIZE", rule_size or 1):
        body = strings.not_in(names, rules if rule_size else None, canonical)
    rules["root"] = body
    return ReferenceMatcher(ir.Grammar(rules, "root"))


@settings(max_examples=40, deadline=None)
@given(names=NAMES, words=WORDS, canonical=st.booleans(), rule_size=st.sampled_from([None, 1, 3, 24]))
def test_not_in_is_the_complement_of_the_names(
    names: list[str], words: list[str], canonical: bool, rule_size: int | None
) -> None:
    m = matcher(names, canonical, rule_size)
    for w in [*words, *names, *(n + "a" for n in names), *(n[:-1] for n in names)]:
        spellings = {json.dumps(w, ensure_ascii=False)[1:-1]}
        if not canonical:
            spellings.add(json.dumps(w)[1:-1])  # \u00e9 and the like: every spelling counts
        for sp in spellings:
            assert m.accepts(sp.encode()) == (w not in names), (names, w, sp)
