"""The shipped examples finish with valid output under sampling (issue 15): `cfgmask generate`
on each example of examples/ with the default model, temperature 0.8, five seeds; every
output must be complete (exit status 0, not cut at --max-tokens) and valid under the
example's schema.  Bounds in the examples (every string has a maxLength, every array a
maxItems) are what makes this hold: an unbounded string lets a sampled model run on.

Slow: ten generations with the real model (in this process, the model loaded once).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).parent.parent
EXAMPLES = ROOT / "examples"
PERSON = json.loads((EXAMPLES / "person.schema.json").read_text())
PROMPT = (EXAMPLES / "person.prompt.txt").read_text().strip()
SEEDS = range(5)


@pytest.fixture(scope="module")
def generate(generate_in_process):
    def go(*argv: str) -> tuple[int, str, str]:
        p = generate_in_process(*argv)
        return p.returncode, p.stdout, p.stderr

    return go


def test_every_example_is_tested():
    """A new example needs its sampling test: person.* here, tools.json in test_cli_tools.py
    (10 sampled runs whose calls must validate)."""
    assert sorted(
        p.name for p in EXAMPLES.iterdir() if p.suffix in (".json", ".gbnf", ".lark", ".regex")
    ) == [
        "person.gbnf",
        "person.schema.json",
        "tools.json",
    ]


@pytest.mark.parametrize("grammar", ["--json-schema=person.schema.json", "--gbnf=person.gbnf"])
def test_example_finishes_valid_under_sampling(generate, grammar):
    jsonschema = pytest.importorskip("jsonschema")
    flag, name = grammar.split("=")
    for seed in SEEDS:
        argv = [flag, str(EXAMPLES / name), "--prompt", PROMPT, "--temperature", "0.8", "--seed", str(seed)]
        rc, out, err = generate(*argv)
        assert rc == 0, f"seed {seed}: exit {rc}\n{out}\n{err}"
        assert "stopped at stop token" in err, err
        jsonschema.validate(json.loads(out), PERSON)  # person.gbnf's language is a subset of the schema's
