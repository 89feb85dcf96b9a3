"""Prefetch in the decoding loops: ``generate_stream`` (``cfgmask generate``) and the
transformers processor with its ``prefetcher`` stopping criterion.  The masks, and so the
outputs and the processed scores, must be the same with prefetch as without, under greedy
search, seeded sampling with a batch and several return sequences, and beam search."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import cfgmask  # noqa: E402
from cfgmask.generation import generate_stream  # noqa: E402
from cfgmask.transformers import GrammarLogitsProcessor  # noqa: E402

from .tiny_llama import tiny_llama  # noqa: E402

JSON_GBNF = (Path(__file__).parent.parent / "grammars" / "json.gbnf").read_text()
MULTI = [b'{"', b'": ', b'", "', b"true", b"null", b", ", b'"name"', b"12", b"\n  ", b"}]", b"\xc3", b"\xa9"]
EOS, PAD = 256 + len(MULTI), 256 + len(MULTI) + 1
TOKENS: list[bytes | None] = [bytes([b]) for b in range(256)] + MULTI + [None, None]


@pytest.fixture(scope="module")
def compiled() -> cfgmask.CompiledGrammar:
    vocab = cfgmask.Vocabulary.from_token_bytes(TOKENS, stop_token_ids=[EOS], special_token_ids=[PAD])
    return cfgmask.compile(cfgmask.Grammar.from_gbnf(JSON_GBNF), vocab)


@pytest.fixture(scope="module")
def model():
    return tiny_llama(len(TOKENS) + 5, seed=3, eos=EOS, pad=PAD, bos=ord("<"))


def encode(text: str) -> list[int]:
    """Greedy longest match over TOKENS: a stand-in tokenizer for jump-forward."""
    by_bytes = {t: i for i, t in enumerate(TOKENS) if t}
    data, out, i = text.encode(), [], 0
    while i < len(data):
        n = next(n for n in range(min(6, len(data) - i), 0, -1) if data[i : i + n] in by_bytes)
        out.append(by_bytes[data[i : i + n]])
        i += n
    return out


# --------------------------------------------------------------------------- generate_stream


@pytest.mark.parametrize("jump", [False, True], ids=["no-jump", "jump-forward"])
@pytest.mark.parametrize(("temperature", "seed"), [(0.0, None), (1.0, 1), (1.5, 2)])
def test_generate_stream_same_output_with_prefetch(model, compiled, jump, temperature, seed) -> None:
    runs = {}
    for prefetch in (False, True):
        runs[prefetch] = generate_stream(
            model,
            compiled,
            list(b"JSON: "),
            max_tokens=40,
            temperature=temperature,
            seed=seed,
            encode=encode if jump else None,
            prefetch=prefetch,
        )
    (off, s_off), (on, s_on) = runs[False], runs[True]
    assert on == off
    assert (s_on.tokens, s_on.sampled, s_on.jump_tokens, s_on.mask_steps, s_on.stop) == (
        s_off.tokens,
        s_off.sampled,
        s_off.jump_tokens,
        s_off.mask_steps,
        s_off.stop,
    )
    assert s_off.prefetch_started == s_off.prefetched == 0
    assert s_off.mask_wait_seconds == pytest.approx(s_off.mask_seconds)
    # every sampled step's mask was started before the forward pass that precedes it; how many
    # a worker computed (rather than the fill cancelling it and filling in line, when no worker
    # had started it yet) depends on the scheduler
    assert s_on.prefetch_started == s_on.mask_steps
    assert 0 <= s_on.prefetched <= s_on.mask_steps
    assert len(s_on.mask_wait_step_seconds) == len(s_on.mask_step_seconds) == s_on.mask_steps
    overlap = f"{s_on.prefetched} of {s_on.mask_steps} masks prefetched during the forward pass"
    assert overlap in s_on.summary()
    assert "prefetched" not in s_off.summary()


def test_summary_reports_the_overlap_apart() -> None:
    from cfgmask.generation import GenerationStats

    s = GenerationStats(tokens=3, sampled=3, forward_passes=3, forward_seconds=0.3, mask_steps=3)
    s.mask_seconds, s.mask_step_seconds = 0.0031, [0.001, 0.0001, 0.002]
    s.prefetch_started = 3
    s.prefetched, s.mask_wait_seconds, s.mask_wait_step_seconds = 3, 0.0003, [0.0001, 0.00005, 0.00015]
    s.stop, s.accepting = "stop token", True
    line = s.summary()
    assert "mask 1033 µs/token (median 1000 µs); 3 of 3 masks prefetched during the forward pass, " in line
    assert "the sampler waited 100 µs/token for them (median 100 µs); stopped at stop token" in line


# --------------------------------------------------------------------------- the processor


def _prompts() -> tuple[torch.Tensor, torch.Tensor]:
    a, b = list(b"Give JSON: "), list(b"JSON?")
    width = max(len(a), len(b))
    ids = [[PAD] * (width - len(p)) + p for p in (a, b)]
    mask = [[0] * (width - len(p)) + [1] * len(p) for p in (a, b)]
    return torch.tensor(ids), torch.tensor(mask)


def _generate(model, compiled, prefetch: bool, seed: int, **kwargs):
    ids, attn = _prompts()
    proc = GrammarLogitsProcessor(compiled)
    criteria = transformers.StoppingCriteriaList([proc.prefetcher] if prefetch else [])
    torch.manual_seed(seed)
    out = model.generate(
        input_ids=ids,
        attention_mask=attn,
        logits_processor=transformers.LogitsProcessorList([proc]),
        stopping_criteria=criteria,
        max_new_tokens=20,
        output_scores=True,
        return_dict_in_generate=True,
        **kwargs,
    )
    return out, proc


def _same(a, b) -> None:
    assert torch.equal(a.sequences, b.sequences)
    assert len(a.scores) == len(b.scores)
    for x, y in zip(a.scores, b.scores, strict=True):  # the masked scores, -inf where blocked
        assert torch.equal(torch.isneginf(x), torch.isneginf(y))
        assert torch.equal(x, y)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"do_sample": False},
        {"do_sample": True, "temperature": 1.3, "top_k": 0, "num_return_sequences": 2},
        {"do_sample": True, "temperature": 0.8, "top_p": 0.9},
    ],
    ids=["greedy", "sample-x2", "top-p"],
)
@pytest.mark.parametrize("seed", [0, 1])
def test_processor_same_masks_with_the_prefetcher(model, compiled, kwargs, seed) -> None:
    plain, p_plain = _generate(model, compiled, False, seed, **kwargs)
    ahead, p_ahead = _generate(model, compiled, True, seed, **kwargs)
    _same(plain, ahead)
    assert p_plain.stats.prefetched_steps == 0
    assert 0 < p_ahead.stats.prefetched_steps <= p_ahead.stats.steps
    assert p_ahead.stats.steps == p_plain.stats.steps


def test_beam_search_with_the_prefetcher_is_unchanged(model, compiled) -> None:
    """Beam search calls the criteria on candidate rows it then reorders: no early advance."""
    plain, _ = _generate(model, compiled, False, 0, num_beams=3, num_return_sequences=2, do_sample=False)
    ahead, proc = _generate(model, compiled, True, 0, num_beams=3, num_return_sequences=2, do_sample=False)
    assert torch.equal(plain.sequences, ahead.sequences)
    assert proc.stats.prefetched_steps == 0


def _step_ids(prompt: list[int], *tokens: int) -> torch.Tensor:
    return torch.tensor([prompt + list(tokens)])


def test_a_step_other_than_the_prefetched_one_is_undone(compiled) -> None:
    """The prefetcher advanced to ``{"``; the processor is then called for ``[``: the masks are
    those of a processor that never saw the prefetcher."""
    prompt = list(b"go: ")
    open_obj, open_arr = TOKENS.index(b'{"'), ord("[")
    proc, plain = GrammarLogitsProcessor(compiled), GrammarLogitsProcessor(compiled)
    for p in (proc, plain):
        p(_step_ids(prompt), torch.zeros(1, len(TOKENS) + 5))
    proc.prefetcher(_step_ids(prompt, open_obj), torch.zeros(1, 1))
    assert proc.stats.prefetched_steps == 1
    got, want = torch.zeros(1, len(TOKENS) + 5), torch.zeros(1, len(TOKENS) + 5)
    proc(_step_ids(prompt, open_arr), got)
    plain(_step_ids(prompt, open_arr), want)
    assert torch.equal(got, want)
    assert proc.matchers[0].num_tokens == 1


def test_an_off_grammar_token_is_reported_by_the_processor_not_the_prefetcher(compiled) -> None:
    prompt = list(b"go: ")
    proc = GrammarLogitsProcessor(compiled)
    proc(_step_ids(prompt), torch.zeros(1, len(TOKENS) + 5))
    done = proc.prefetcher(_step_ids(prompt, ord("x")), torch.zeros(1, 1))  # no JSON starts with x
    assert not done.any() and proc.stats.prefetched_steps == 0
    assert proc.matchers[0].num_tokens == 0  # nothing accepted early
    with pytest.raises(cfgmask.MatcherError, match="forced off the grammar"):
        proc(_step_ids(prompt, ord("x")), torch.zeros(1, len(TOKENS) + 5))
