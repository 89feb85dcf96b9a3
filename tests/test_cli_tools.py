"""End to end: ``cfgmask generate --tools`` on the real SmolLM2-135M-Instruct (see
test_cli_generate.py for how the model is found and cached).

Ten sampled runs with ``--tool-choice required`` (five with parallel calls, five without): every
call's arguments validate against its tool's schema (``jsonschema``), and a run without parallel
calls makes exactly one and ends.  With parallel calls SmolLM2 tends to repeat its calls until
``--max-tokens``; the test accepts that cut (exit 3) when every complete call validates.
Runs with ``--tool-choice auto`` on a prompt no tool fits: the model
writes plain text, and any call it does make validates too.  The runs call ``cfgmask generate``
in this process (``cli.main``) with the model loaded once.  Slow (a few seconds to half a minute
a run on two busy cores); run with ``pytest -m slow``.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
TOOLS_FILE = ROOT / "examples" / "tools.json"
SCHEMAS = {t["function"]["name"]: t["function"]["parameters"] for t in json.loads(TOOLS_FILE.read_text())}
CALL = re.compile(r"<tool_call>\n(.*?)\n</tool_call>", re.DOTALL)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def generate(generate_in_process):
    """``cfgmask generate --tools examples/tools.json ARGS``, in this process (the model loaded
    once; see conftest.py)."""

    def go(*args: str) -> subprocess.CompletedProcess[str]:
        return generate_in_process("--tools", str(TOOLS_FILE), *args)

    return go


def _calls(stdout: str) -> list[dict]:
    """The calls in Hermes syntax, read with a regex and json (not with cfgmask.tools)."""
    return [json.loads(body) for body in CALL.findall(stdout)]


def _validate(call: dict) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    assert set(call) == {"name", "arguments"}, call
    jsonschema.validate(call["arguments"], SCHEMAS[call["name"]])


@pytest.mark.parametrize("seed", range(10))
def test_required_calls_validate(generate, seed: int) -> None:
    parallel = seed < 5
    p = generate(
        "--prompt",
        "What is the weather in Paris, in celsius? And what time is it in Tokyo?",
        "--tool-choice",
        "required",
        "--parallel-tool-calls" if parallel else "--no-parallel-tool-calls",
        "--whitespace",
        "compact",
        "--temperature",
        "0.8",
        "--seed",
        str(seed),
        "--max-tokens",
        "120",
    )
    print(f"seed {seed} parallel={parallel} rc={p.returncode}: {p.stdout!r}")
    calls = _calls(p.stdout)
    assert calls and (parallel or len(calls) == 1)
    for call in calls:
        _validate(call)
    if parallel:
        # a small model may repeat its calls until --max-tokens (exit 3): every complete call
        # still validates, and what follows the last one is the start of another call
        assert p.returncode in (0, 3), p.stderr
        rest = CALL.sub("", p.stdout).strip("\n")
        assert rest == "" or (p.returncode == 3 and "<tool_call>\n{".startswith(rest[:13]))
    else:
        assert p.returncode == 0, p.stderr  # 0: a complete string of the grammar
        assert CALL.sub("", p.stdout).strip("\n") == ""
    assert f"cfgmask: {len(calls)} tool call" in p.stderr


@pytest.mark.parametrize("parallel", [True, False])
def test_auto_writes_plain_text_when_no_tool_fits(generate, parallel: bool) -> None:
    p = generate(
        "--prompt",
        "Write one short sentence about cats.",
        "--parallel-tool-calls" if parallel else "--no-parallel-tool-calls",
        "--temperature",
        "0.8",
        "--seed",
        "1",
        "--max-tokens",
        "60",
    )
    assert p.returncode in (0, 3), p.stderr  # 3: cut at --max-tokens, still free text
    print(f"auto parallel={parallel}: {p.stdout!r}")
    for call in _calls(p.stdout):
        _validate(call)
    assert "<tool_call>" not in p.stdout
    assert p.stdout.strip()
