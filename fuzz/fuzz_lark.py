"""Fuzz the Lark front end and the compiler: ``python fuzz/fuzz_lark.py [-max_total_time=300]``."""

from __future__ import annotations

from collections.abc import Iterator

import _harness as H  # type: ignore[import-not-found]  # noqa: I001

import cfgmask


def test_one_input(data: bytes) -> None:
    H.front_end(lambda: cfgmask.Grammar.from_lark(H.text_of(data), limits=H.LIMITS), data)


def seeds() -> Iterator[bytes]:
    yield from H.files("grammars/*.lark", "tests/corpora/lark/**/*.lark", "tests/corpora/syncode/**/*.lark")
    yield b'start: x+\nx: "a" | "(" start ")"\n%ignore " "'


if __name__ == "__main__":
    H.main(test_one_input, seeds)
