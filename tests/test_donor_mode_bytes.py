"""A state's mode target (the state most of its bytes lead to: the donor's pick, csrc/donor.c
``mode_target``) counted by its own bytes where it has at most 32 (``_core.donor_mode_bytes_enable``).

Off, every state is read by its classes (n_classes^2 compares and a count of the 256 bytes'
classes); on, a state with few bytes counts each byte's target among the few seen, and of the
targets most bytes lead to takes the one whose lowest class is lowest, as the class scan does.  The
pick decides which donor an entry is built from, not the entry (every donor's is exact), so the
references are the picks' traces as well as the entries: the build statistics (entries composed,
donated) and the donor take's subtree count equal with the count on and off, every entry equal to
the plain walks', and Llama-3's masks equal along the first documents of median JSONSchemaBench
schemas."""

from __future__ import annotations

import json
from contextlib import AbstractContextManager
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cfgmask
from cfgmask import _core

from .helpers import core_switch, masks_along, same_document_masks
from .test_entries import WALKS_ONLY, entries
from .test_listed_reuse import _same

CORPUS = Path(__file__).parent / "corpora" / "jsonschemabench"


def _bytes_on(on: bool) -> AbstractContextManager[None]:
    return core_switch(_core.donor_mode_bytes_enable, on)


def _build(g: cfgmask.Grammar, vocab: cfgmask.Vocabulary, on: bool) -> tuple[list, dict, int, int]:
    """Every state's entry, caches cleared, the count on or off; the build statistics, the donor
    take's subtrees and the states counted by their bytes."""
    with _bytes_on(on):
        n0, a0 = _core.donor_mode_bytes_hits(), _core.donor_alike_hits()
        c = cfgmask.compile(g, vocab)
        got = entries(c)
        return got, c._handle.build_stats, _core.donor_alike_hits() - a0, _core.donor_mode_bytes_hits() - n0


def _check(g: cfgmask.Grammar, toks: list[bytes]) -> int:
    toks = list(dict.fromkeys(t for t in toks if t))
    vocab = cfgmask.Vocabulary.from_token_bytes([*toks, b""], stop_token_ids=[len(toks)])
    on, st_on, alike_on, hits = _build(g, vocab, True)
    off, st_off, alike_off, none = _build(g, vocab, False)
    assert none == 0
    assert st_on == st_off and alike_on == alike_off, "the donors picked differ"
    _same(on, off, "the count by classes")
    with _bytes_on(True):
        _same(on, entries(cfgmask.compile(g, vocab, _strategy=WALKS_ONLY)), "plain walks")
    return hits


def _schema(props: dict[str, object], required: list[str], extra: bool) -> cfgmask.Grammar:
    schema = {"type": "object", "properties": props, "required": required, "additionalProperties": extra}
    return cfgmask.Grammar.from_json_schema(json.dumps(schema))


KEYS = ["base", "height", "length", "radius", "width", "bill", "billing_address", "x"]
DATE_TIME = {"type": "string", "format": "date-time"}
VALUES = [{"type": "number"}, {"type": "string"}, DATE_TIME, {"type": "boolean"}]
PIECES = [b'{"', b'"', b'":', b'":"', b",", b',"', b"}", b'"}', b'","', b"10", b"0", b"2", b"-", b".", b"e"]
PIECES += [b"ba", b"se", b"height", b"len", b"gth", b"ra", b"dius", b"wid", b"th"]
PIECES += [b"bill", b"ing", b"_address"]
PIECES += [b"true", b"false", b"202", b"4", b"T", b":", b"Z", b"a", b"b", b" ", b"\\", b"\\n", b"\xc3\xa9"]


def test_optional_numbers_entries_same() -> None:
    """calculate_area's object (five optional numbers): every entry equal with the count on, off
    and plain walks', the same donors picked; on, states were counted by their bytes."""
    props = {k: {"type": "number"} for k in KEYS[:5]}
    assert _check(_schema(props, [], True), PIECES) > 0


@settings(max_examples=40, deadline=None)
@given(
    keys=st.lists(st.sampled_from(KEYS), min_size=1, max_size=5, unique=True),
    values=st.lists(st.sampled_from(VALUES), min_size=5, max_size=5),
    n_required=st.integers(0, 5),
    extra=st.booleans(),
    picks=st.lists(st.sampled_from(PIECES), min_size=6, max_size=30),
    words=st.lists(st.text('abeghilnrstwx_"{},:0129', min_size=1, max_size=6), max_size=10),
)
def test_objects_entries_same(
    keys: list[str], values: list[dict], n_required: int, extra: bool, picks: list[bytes], words: list[str]
) -> None:
    """Hypothesis: objects of optional and required properties (numbers, strings, date-times,
    booleans; additional properties or not) over small vocabularies: every entry and the donors
    picked equal with the count on and off, and the entries the plain walks'."""
    props = dict(zip(keys, values, strict=False))
    _check(_schema(props, keys[:n_required], extra), [*picks, *(w.encode() for w in words)])


def first_document(split: str, sid: str) -> tuple[str, str]:
    for line in (CORPUS / f"{split}.jsonl").read_text().splitlines():
        rec = json.loads(line)
        if rec["id"] == f"{split}/{sid}":
            doc = next(t["data"] for t in rec["tests"] if t["valid"])
            return json.dumps(rec["schema"]), json.dumps(doc, separators=(",", ":"))
    raise LookupError(sid)


def llama3_document(split: str, sid: str) -> tuple[cfgmask.Grammar, cfgmask.Vocabulary, list[int]]:
    """The schema's grammar, Llama-3 and its first document's tokens (skipped without quicktok)."""
    quicktok = pytest.importorskip("quicktok")
    schema, doc = first_document(split, sid)
    tokens = quicktok.get_encoding("llama3").encode(doc)
    return cfgmask.Grammar.from_json_schema(schema), cfgmask.Vocabulary.llama3(), tokens


@pytest.mark.parametrize(
    ("split", "sid"),
    [
        ("Glaiveai2K", "calculate_area_2540405e"),
        ("Glaiveai2K", "create_calendar_event_33766336"),
        ("WashingtonPost", "wp_121_Normalized"),
    ],
)
def test_llama3_first_documents_masks_same(split: str, sid: str) -> None:
    """Llama-3 along the first document of median JSONSchemaBench schemas: every mask and the
    build statistics equal with the count on and off; on, states were counted by their bytes."""
    g, vocab, tokens = llama3_document(split, sid)
    masks, stats = {}, {}
    for on in (False, True):
        with _bytes_on(on):
            n0 = _core.donor_mode_bytes_hits()
            c = cfgmask.compile(g, vocab)
            masks[on], stats[on] = masks_along(c, tokens), c._handle.build_stats
            assert (_core.donor_mode_bytes_hits() - n0 > 0) == on
    assert stats[True] == stats[False]
    same_document_masks([masks[False]], [masks[True]], [tokens])
