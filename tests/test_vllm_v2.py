"""cfgmask's vLLM plugin under Model Runner V2, driven without the runner itself.

V2 needs Triton, which has no CPU backend here, so the engine cannot run end to end.  These
tests use vLLM's own pieces instead: a real ``VllmConfig`` of SmolLM2, the real front end
(``InputProcessor`` with the V2 validator), the real plugin loader
(``build_custom_logits_processors``, which finds cfgmask by its entry point) and a real
``RequestState`` on CPU (its UVA buffers patched to host memory as vLLM's CPU worker does).
The two Triton kernels the runner would launch around the processor are replaced by the same
writes in Python: ``apply_write`` (staged request state) and ``post_update`` (committed tokens
and ``total_len``).  ``Runner`` then makes the runner's calls (``add_request``,
``apply_staged_writes``, ``apply`` every step with the rows reordered, slots recycled,
preemption, draft rows) with random logits, and every masked row is compared with a plain
``Matcher`` fed the same tokens; the finished outputs are checked by jsonschema / re.fullmatch.
"""

from __future__ import annotations

import json
import os
import random
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from .vllm_support import requires_vllm

pytestmark = requires_vllm

jsonschema = pytest.importorskip("jsonschema")
torch = pytest.importorskip("torch")

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 8},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
    },
    "required": ["name", "age"],
    "additionalProperties": False,
}
ANSWER_RE = r"(yes|no), [0-9]{1,3}"
COLOR_GBNF = 'root ::= "The color is " ("red" | "green" | "blue") "."'
EOS = 2  # SmolLM2's <|im_end|>: what vLLM stops on


@pytest.fixture(scope="module")
def vllm_config(smollm2_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """SmolLM2's VllmConfig, built under the V1 runner (VllmConfig refuses V2 without Triton)
    and then switched to V2 for what reads the switch afterwards (the front end's validator)."""
    d = smollm2_dir
    os.environ["CFGMASK_VLLM_CACHE_DIR"] = str(tmp_path_factory.mktemp("grammars"))
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from vllm.engine.arg_utils import EngineArgs

    cfg = EngineArgs(
        model=str(d), enforce_eager=True, dtype="float32", max_model_len=256
    ).create_engine_config()
    old = os.environ.get("VLLM_USE_V2_MODEL_RUNNER")
    os.environ["VLLM_USE_V2_MODEL_RUNNER"] = "1"
    assert cfg.use_v2_model_runner
    yield cfg
    if old is None:
        os.environ.pop("VLLM_USE_V2_MODEL_RUNNER")
    else:
        os.environ["VLLM_USE_V2_MODEL_RUNNER"] = old


def _params(xargs: dict[str, Any] | None, **kw: Any) -> Any:
    from vllm import SamplingParams

    p = SamplingParams(max_tokens=200, extra_args=xargs, **kw)
    p.update_from_generation_config({"eos_token_id": EOS}, eos_token_id=EOS)  # as the front end does
    return p


# ---- the front end --------------------------------------------------------------------------


def test_v2_front_end_validates_like_v1(vllm_config: Any) -> None:
    """The V2 front end calls the processor's validate_params through the validator the V2 loader
    builds (loaded from the entry point): a bad grammar is a VLLMValidationError (HTTP 400) with
    cfgmask's caret message, a good one is compiled there, into the cache the engine reads."""
    from vllm.exceptions import VLLMValidationError
    from vllm.v1.engine.input_processor import InputProcessor

    import cfgmask.vllm

    front = InputProcessor(vllm_config)
    bad = [
        ({"gbnf": "root ::= ("}, r"cfgmask: unclosed '\(' \(line 1, column 10\)"),
        ({"json_schema": '{"type": "object", "properties": {"a": {"type": 5}}}'}, "cfgmask: .*/properties/a"),
        ({"regex": "a", "gbnf": 'root ::= "a"'}, "cfgmask: one grammar per request, got gbnf, regex"),
        ({"whitespace": "compact"}, "cfgmask: whitespace given without a grammar"),
    ]
    for xargs, message in bad:
        with pytest.raises(VLLMValidationError, match=message):
            front._validate_params(_params(xargs), ("generate",))
    with pytest.raises(VLLMValidationError, match="cfgmask: min_tokens cannot be combined"):
        front._validate_params(_params({"regex": ANSWER_RE}, min_tokens=3), ("generate",))
    before = len(cfgmask.vllm.shared_cache()._lru)
    front._validate_params(_params({"json_schema": json.dumps(PERSON)}), ("generate",))
    front._validate_params(_params(None), ("generate",))
    assert len(cfgmask.vllm.shared_cache()._lru) == before + 1, "the front end should have compiled it"


# ---- the runner's calls ---------------------------------------------------------------------


class Runner:
    """The calls Model Runner V2 makes around a logits processor, on a real RequestState."""

    def __init__(self, vllm_config: Any, max_reqs: int = 6, spec: int = 0, seed: int = 0) -> None:
        import vllm.v1.worker.cpu.shm  # noqa: F401  (vLLM's CPU patch: UVA buffers in host memory)
        from vllm.v1.worker.gpu.sample.logits_processor import build_custom_logits_processors
        from vllm.v1.worker.gpu.states import RequestState

        from cfgmask.vllm import CfgmaskLogitsProcessor

        self.vocab_size = vllm_config.model_config.get_vocab_size()
        self.rs = RequestState(max_reqs, 256, 1024, spec, self.vocab_size, torch.device("cpu"))
        procs = build_custom_logits_processors(vllm_config, self.rs, is_pooling_model=False)
        assert len(procs) == 1 and isinstance(procs[0], CfgmaskLogitsProcessor)  # by entry point
        self.proc = procs[0]
        self.rng = random.Random(seed)
        self.params: dict[str, Any] = {}
        self.outputs: dict[str, list[int]] = {}
        self.forced: dict[str, list[int]] = {}  # tokens committed whatever the logits (thinking)
        self.checked_rows = 0
        self.drafts_kept = self.drafts_rejected = 0

    # the runner's request bookkeeping

    def add(self, req_id: str, params: Any, prompt: list[int], output: list[int] | None = None) -> int:
        output = list(output or [])
        self.rs.add_request(req_id, len(prompt), prompt + output, 0, params.max_tokens)
        slot = self.rs.req_id_to_index[req_id]
        self.proc.add_request(slot, params)
        self.params[req_id] = params
        self.outputs[req_id] = output
        self._apply_writes()  # req_states.apply_staged_writes(), Triton's apply_write in Python
        self.proc.apply_staged_writes()
        return slot

    def remove(self, req_id: str) -> None:
        self.rs.remove_request(req_id)
        self.params.pop(req_id)

    def _apply_writes(self) -> None:
        for t in (self.rs.all_token_ids, self.rs.total_len):
            begin = 0
            for index, start, end in zip(
                t._staged_write_indices, t._staged_write_starts, t._staged_write_cu_lens, strict=True
            ):
                data = torch.tensor(t._staged_write_contents[begin:end], dtype=t.gpu.dtype)
                if t.gpu.dim() == 1:
                    t.gpu[index] = data[0]
                else:
                    t.gpu[index, start : start + len(data)] = data
                begin = end
            t.clear_staged_writes()
        self.rs.prompt_len.copy_to_uva()
        self.rs.prefill_len.copy_to_uva()

    def _commit(self, slot: int, tokens: list[int]) -> None:
        """post_update: the sampled tokens go after total_len, which grows."""
        total = int(self.rs.total_len.gpu[slot])
        self.rs.all_token_ids.gpu[slot, total : total + len(tokens)] = torch.tensor(tokens, dtype=torch.int32)
        self.rs.total_len.gpu[slot] = total + len(tokens)

    # one step

    def step(self, drafts: dict[str, list[int]] | None = None) -> None:
        """Every live request in a shuffled order, one logits row each plus one per draft."""
        from vllm.v1.worker.gpu.sample.logits_processor import LogitsContext

        drafts = drafts or {}
        order = list(self.params)
        self.rng.shuffle(order)
        slots = [self.rs.req_id_to_index[r] for r in order]
        row_slots, local, inputs, pos = [], [], [], []
        for r, s in zip(order, slots, strict=True):
            total = int(self.rs.total_len.gpu[s])
            last = int(self.rs.all_token_ids.gpu[s, total - 1])
            for j, tok in enumerate([last, *drafts.get(r, [])]):
                row_slots.append(s)
                local.append(j)
                inputs.append(tok)
                pos.append(total - 1 + j)
        n = len(row_slots)
        logits = torch.randn(
            n, self.vocab_size, generator=torch.Generator().manual_seed(self.rng.randrange(2**31))
        )
        before = logits.clone()
        idx = torch.tensor(slots, dtype=torch.int32)
        ctx = LogitsContext(
            expanded_idx_mapping=torch.tensor(row_slots, dtype=torch.int32),
            idx_mapping=idx,
            idx_mapping_np=np.array(slots, dtype=np.intp),
            expanded_local_pos=torch.tensor(local, dtype=torch.int32),
            input_ids=torch.tensor(inputs, dtype=torch.int64),
            pos=torch.tensor(pos, dtype=torch.int64),
            seq_lens_upper_bound_np=np.array([p + 1 for p in pos], dtype=np.int32)[: len(slots)],
        )
        out = self.proc.apply(logits, ctx)
        assert out is logits
        row = 0
        for r, s in zip(order, slots, strict=True):
            k = len(drafts.get(r, []))
            rows = logits[row : row + k + 1]
            self._check_and_commit(r, s, rows, before[row : row + k + 1], drafts.get(r, []))
            row += k + 1

    def _reference(self, req_id: str, extra: list[int]) -> tuple[Any, bool]:
        """A plain Matcher fed the request's output (after reasoning_end, if any) and ``extra``;
        the bool says whether the grammar has started."""
        from cfgmask.matcher import Matcher
        from cfgmask.vllm import grammar_request, request_stop_ids

        p = self.params[req_id]
        req = grammar_request(p)
        compiled = self.proc.cache.get(
            req.kind, req.source, self.proc.vocabs.get(request_stop_ids(p)), req.options
        )
        m = Matcher(compiled)
        tokens = self.outputs[req_id] + extra
        if req.reasoning_end:
            text = b"".join(compiled.vocab.tokens[t] for t in tokens)
            at = text.find(req.reasoning_end.encode())
            if at < 0:
                return m, False
            rest = text[at + len(req.reasoning_end) :]  # the token's bytes after the marker
            assert not rest or m.accept_bytes(rest)
            return m, True
        for t in tokens:
            assert m.accept_token(t), (req_id, t)
        return m, True

    def _check_and_commit(self, req_id: str, slot: int, rows: Any, before: Any, drafts: list[int]) -> None:
        p = self.params[req_id]
        forced = self.forced.get(req_id, [])
        if not p.extra_args:
            assert torch.equal(rows, before), "a free request's logits were changed"
            chosen = [int(torch.argmax(rows[0]))]
        else:
            accepted: list[int] = []
            for j in range(len(drafts) + 1):
                m, started = self._reference(req_id, drafts[:j])
                allowed = torch.isfinite(rows[j]).nonzero().flatten().tolist()
                if not started:
                    assert len(allowed) == self.vocab_size, "a row still reasoning must be free"
                else:
                    assert allowed == m.allowed_tokens().tolist(), (req_id, j)
                    assert torch.equal(rows[j][torch.isfinite(rows[j])], before[j][torch.isfinite(rows[j])])
                self.checked_rows += 1
                if j < len(drafts) and drafts[j] in allowed:  # the rejection sampler keeps it
                    accepted.append(drafts[j])
                    self.drafts_kept += 1
                    if drafts[j] != EOS:
                        continue  # else vLLM stops there and drops the rows after it
                else:
                    self.drafts_rejected += j < len(drafts)
                for later in range(j + 1, len(drafts) + 1):  # discarded rows stay finite somewhere
                    assert torch.isfinite(rows[later]).any()
                break
            bonus_row = rows[len(accepted)]
            chosen = [*accepted, int(torch.argmax(bonus_row))]
        if len(forced) > len(self.outputs[req_id]):
            chosen = [forced[len(self.outputs[req_id])]]
        if EOS in chosen:  # vLLM stops at the first stop token and drops what follows
            chosen = chosen[: chosen.index(EOS) + 1]
        self.outputs[req_id] += chosen
        self._commit(slot, chosen)

    def finished(self, req_id: str) -> bool:
        out = self.outputs[req_id]
        return bool(out) and out[-1] == EOS

    def text(self, req_id: str) -> str:
        tokens = self.proc.vocabs.get(frozenset({EOS})).tokens
        return b"".join(tokens[t] for t in self.outputs[req_id][:-1]).decode()

    def run_until_done(self, limit: int = 120, drafts: Any = None) -> None:
        for _ in range(limit):
            for r in [r for r in self.params if self.finished(r)]:
                self.remove(r)
            if not any(self.params[r].extra_args for r in self.params):
                return
            self.step(drafts(self) if drafts else None)
        raise AssertionError(f"not finished in {limit} steps: {self.outputs}")


def _validate(kind: str, text: str) -> None:
    if kind == "json_schema":
        jsonschema.validate(json.loads(text), PERSON)
    elif kind == "regex":
        assert re.fullmatch(ANSWER_RE, text), text
    else:
        assert text in ("The color is red.", "The color is green.", "The color is blue."), text


GRAMMARS = {"json_schema": json.dumps(PERSON), "regex": ANSWER_RE, "gbnf": COLOR_GBNF}


def test_v2_rows_match_a_plain_matcher_with_slots_recycled(vllm_config: Any) -> None:
    """Mixed free and grammar requests, rows shuffled every step; finished requests leave and
    new ones take their slots (a free request in a grammar's old slot stays free)."""
    run = Runner(vllm_config, max_reqs=4, seed=1)
    prompt = [1, 2, 3]
    kinds: dict[str, str] = {}
    queue = [("j0", "json_schema"), ("free0", ""), ("r0", "regex"), ("g0", "gbnf"), ("j1", "json_schema")]
    queue += [("free1", ""), ("r1", "regex"), ("g1", "gbnf")]
    used_slots: dict[int, list[str]] = {}
    steps = 0
    while queue or any(run.params[r].extra_args for r in run.params):
        for r in [
            r for r in run.params if run.finished(r) or (not run.params[r].extra_args and steps % 7 == 6)
        ]:
            run.remove(r)
        while queue and len(run.params) < 4:
            r, kind = queue.pop(0)
            xargs = {kind: GRAMMARS[kind]} if kind else None
            slot = run.add(r, _params(xargs), prompt)
            used_slots.setdefault(slot, []).append(r)
            kinds[r] = kind
        run.step()
        steps += 1
        assert steps < 400
    for r, kind in kinds.items():
        if kind:
            assert run.finished(r), r
            _validate(kind, run.text(r))
    assert any(len(v) > 1 for v in used_slots.values()), "no slot was recycled"
    assert run.checked_rows > 50


def test_v2_preempted_request_replays_its_output(vllm_config: Any) -> None:
    """A preempted request leaves its slot and comes back (maybe in another slot) with
    prefill_len > prompt_len: its partial output is replayed into a fresh matcher."""
    run = Runner(vllm_config, max_reqs=3, seed=2)
    run.add("a", _params({"json_schema": GRAMMARS["json_schema"]}), [5, 6, 7, 8])
    run.add("b", _params(None), [9])
    for _ in range(4):
        run.step()
    partial = run.outputs["a"]
    assert len(partial) == 4 and not run.finished("a")
    replays = run.proc.stats.replays
    slot_a = run.rs.req_id_to_index["a"]
    run.remove("a")
    assert run.add("d", _params(None), [4]) == slot_a  # a free request in a's old slot stays free
    run.step()
    run.remove("d")
    assert run.add("c", _params({"regex": ANSWER_RE}), [4]) == slot_a  # then a grammar, fresh
    run.step()
    run.add("a", _params({"json_schema": GRAMMARS["json_schema"]}), [5, 6, 7, 8], partial)
    assert run.proc.stats.replays == replays + 1
    run.run_until_done()
    _validate("json_schema", run.text("a"))
    _validate("regex", run.text("c"))


def test_v2_reasoning_end_then_grammar(vllm_config: Any) -> None:
    """Free rows until the committed output contains reasoning_end (here split over tokens and
    forced, as a reasoning model would write it), the grammar after it."""
    run = Runner(vllm_config, max_reqs=2, seed=3)
    tok = run.proc.vocabs.tokenizer
    thinking = tok.encode("Hmm, red or blue.</think>", add_special_tokens=False)
    run.add("t", _params({"gbnf": COLOR_GBNF, "reasoning_end": "</think>"}), [1])
    run.forced["t"] = thinking
    run.run_until_done()
    assert run.outputs["t"][: len(thinking)] == thinking
    _validate("gbnf", tok.decode(run.outputs["t"][len(thinking) : -1]))


def test_v2_speculative_draft_rows(vllm_config: Any) -> None:
    """Several rows per request: row j's mask is the grammar after the committed output and
    drafts 1..j.  Drafts are a mix of tokens the grammar allows and random ones."""
    from cfgmask.matcher import Matcher

    run = Runner(vllm_config, max_reqs=4, spec=3, seed=4)
    for r, kind in (("j", "json_schema"), ("r", "regex"), ("g", "gbnf")):
        run.add(r, _params({kind: GRAMMARS[kind]}), [1, 2])
    run.add("f", _params(None), [3])
    rng = random.Random(5)

    def drafts(run: Runner) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for r in run.params:
            if not run.params[r].extra_args:
                out[r] = [rng.randrange(run.vocab_size) for _ in range(rng.randrange(3))]
                continue
            m, _ = run._reference(r, [])
            seq: list[int] = []
            for _ in range(rng.randrange(4)):
                allowed = m.allowed_tokens()
                t = (
                    int(rng.choice(allowed))
                    if len(allowed) and rng.random() < 0.8
                    else rng.randrange(run.vocab_size)
                )
                seq.append(t)
                if not (isinstance(m, Matcher) and m.accept_token(t)):
                    break
            out[r] = seq
        return out

    run.run_until_done(drafts=drafts)
    for r, kind in (("j", "json_schema"), ("r", "regex"), ("g", "gbnf")):
        _validate(kind, run.text(r))
    assert run.drafts_kept > 5 and run.drafts_rejected > 2, (run.drafts_kept, run.drafts_rejected)
