"""A bounded run of every fuzz target in fuzz/ (seeds from tests/corpora, then mutations):
about 200 executions each, no atheris needed.  Longer, coverage-guided campaigns:
``python fuzz/fuzz_<target>.py -max_total_time=600`` (see fuzz/README.md)."""

from __future__ import annotations

import importlib
import sys
import warnings
from pathlib import Path

import pytest

FUZZ = Path(__file__).resolve().parent.parent / "fuzz"
# target -> (executions, largest seed used in bytes): big seeds compile slowly
TARGETS = {
    "fuzz_gbnf": (200, 4096),
    "fuzz_regex": (200, 4096),
    "fuzz_lark": (200, 1500),
    "fuzz_json_schema": (200, 250),
    "fuzz_matcher": (200, 4096),
}


@pytest.mark.parametrize("name", list(TARGETS))
def test_fuzz_target_smoke(name: str) -> None:
    sys.path.insert(0, str(FUZZ))
    try:
        harness = importlib.import_module("_harness")
        target = importlib.import_module(name)
    finally:
        sys.path.remove(str(FUZZ))
    n, max_seed = TARGETS[name]
    seeds = list(target.seeds())
    assert seeds, "a target needs seeds"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # re: "possible nested set" in mutated patterns
        assert harness.smoke(target.test_one_input, seeds, n, seed=1, max_seed_bytes=max_seed) == n
