"""Fuzz the JSON Schema front end and the compiler: ``python fuzz/fuzz_json_schema.py``.

The input is JSON text; what parses is given as a dict (strict, then relaxed), what does
not is given as text (so the front end's own JSON errors are covered too)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import _harness as H  # type: ignore[import-not-found]  # noqa: I001

import cfgmask


def test_one_input(data: bytes) -> None:
    text = H.text_of(data)
    try:
        schema = json.loads(text)
    except (ValueError, RecursionError):
        H.front_end(lambda: cfgmask.Grammar.from_json_schema(text, limits=H.LIMITS), data)
        return
    strict = len(data) % 2 == 0
    H.front_end(lambda: cfgmask.Grammar.from_json_schema(schema, strict=strict, limits=H.LIMITS), data)


def seeds() -> Iterator[bytes]:
    for text in H.files("tests/corpora/jsonschemabench/*.jsonl", max_bytes=1 << 24):
        for line in text.splitlines():
            yield json.dumps(json.loads(line)["schema"]).encode()
    for text in H.files("tests/corpora/json-schema-test-suite/tests/draft2020-12/*.json"):
        for group in json.loads(text):
            yield json.dumps(group["schema"]).encode()


if __name__ == "__main__":
    H.main(test_one_input, seeds)
