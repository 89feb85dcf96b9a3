"""Fuzz the GBNF front end and the compiler: ``python fuzz/fuzz_gbnf.py [-max_total_time=300]``."""

from __future__ import annotations

from collections.abc import Iterator

import _harness as H  # type: ignore[import-not-found]  # noqa: I001

import cfgmask


def test_one_input(data: bytes) -> None:
    H.front_end(lambda: cfgmask.Grammar.from_gbnf(H.text_of(data), limits=H.LIMITS), data)


def seeds() -> Iterator[bytes]:
    yield from H.files("grammars/*.gbnf", "tests/corpora/llama.cpp/grammars/*.gbnf")
    yield from (b'root ::= "a"{2,5} b*\nb ::= [a-z\\u00e9] | "(" root ")"', b'root ::= x x\nx ::= x | "a" |')


if __name__ == "__main__":
    H.main(test_one_input, seeds)
