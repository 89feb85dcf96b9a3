"""Fuzz the regex front end and the compiler: ``python fuzz/fuzz_regex.py [-max_total_time=300]``."""

from __future__ import annotations

import json
from collections.abc import Iterator

import _harness as H  # type: ignore[import-not-found]  # noqa: I001

import cfgmask


def test_one_input(data: bytes) -> None:
    H.front_end(lambda: cfgmask.Grammar.from_regex(H.text_of(data), limits=H.LIMITS), data)


def seeds() -> Iterator[bytes]:
    """The ``pattern`` keywords of the JSON Schema corpora, and a few hand-made ones."""
    yield from (
        rb"[a-z]+(\d{2,4})?",
        rb"(a|b)*abb",
        rb"\w+@\w+\.(com|org)",
        "[é-😀]{1,3}".encode(),
        rb"(?:x|y){0,300}z",
    )
    for text in H.files("tests/corpora/jsonschemabench/*.jsonl", max_bytes=1 << 24):
        for line in text.splitlines():
            stack = [json.loads(line)]
            while stack:
                x = stack.pop()
                if isinstance(x, dict):
                    if isinstance(x.get("pattern"), str):
                        yield x["pattern"].encode("utf-8", "surrogatepass")
                    stack.extend(x.values())
                elif isinstance(x, list):
                    stack.extend(x)


if __name__ == "__main__":
    H.main(test_one_input, seeds)
