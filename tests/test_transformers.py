"""GrammarLogitsProcessor inside transformers' generate, on a tiny random Llama built offline.

Every output must be a JSON document when it stopped at EOS, else a viable prefix of one
(checked with the reference matcher), under sampling with a batch and several return
sequences, and under beam search (which reorders rows between steps).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import cfgmask  # noqa: E402
from cfgmask.transformers import GrammarLogitsProcessor  # noqa: E402

from .reference import ReferenceMatcher  # noqa: E402
from .tiny_llama import tiny_llama  # noqa: E402

JSON_GBNF = (Path(__file__).parent.parent / "grammars" / "json.gbnf").read_text()
MULTI = [
    b'{"',
    b'": ',
    b'", "',
    b"true",
    b"false",
    b"null",
    b", ",
    b'"name"',
    b"123",
    b"\n  ",
    b"}]",
    b"\xc3",
    b"\xa9",
]
EOS, PAD = 256 + len(MULTI), 256 + len(MULTI) + 1
V = PAD + 1
MODEL_V = V + 7  # a padded logit width, as real checkpoints have


@pytest.fixture(scope="module")
def vocab() -> cfgmask.Vocabulary:
    return cfgmask.Vocabulary.from_token_bytes(
        [bytes([b]) for b in range(256)] + MULTI + [None, None], stop_token_ids=[EOS], special_token_ids=[PAD]
    )


@pytest.fixture(scope="module")
def grammar() -> cfgmask.Grammar:
    return cfgmask.Grammar.from_gbnf(JSON_GBNF)


@pytest.fixture(scope="module")
def compiled(grammar, vocab) -> cfgmask.CompiledGrammar:
    return cfgmask.compile(grammar, vocab)


@pytest.fixture(scope="module")
def model():
    return tiny_llama(MODEL_V, seed=0, eos=EOS, pad=PAD, bos=ord("<"), positions=512)


class EosBias(transformers.LogitsProcessor):
    """Makes stopping likely wherever the grammar allows it (after the mask: -inf stays -inf)."""

    def __call__(self, input_ids, scores):
        scores[:, EOS] += 6.0
        return scores


def _prompts() -> tuple[torch.Tensor, torch.Tensor]:
    """Two prompts of different lengths, left-padded."""
    a, b = list(b"Give JSON: "), list(b"JSON?")
    width = max(len(a), len(b))
    ids = [[PAD] * (width - len(p)) + p for p in (a, b)]
    mask = [[0] * (width - len(p)) + [1] * len(p) for p in (a, b)]
    return torch.tensor(ids), torch.tensor(mask)


def _check_outputs(out: torch.Tensor, prompt_len: int, vocab, grammar) -> tuple[int, int]:
    ref = ReferenceMatcher(grammar.ir)
    complete = partial = 0
    for row in out[:, prompt_len:].tolist():
        stopped = EOS in row
        body = row[: row.index(EOS)] if stopped else row
        assert all(t < vocab.size and t not in vocab.special_ids for t in body), row
        text = vocab.decode(body)
        if stopped:
            json.loads(text.decode("utf-8"))
            assert ref.accepts(text), text
            assert all(t in (EOS, PAD) for t in row[row.index(EOS) :]), row
            complete += 1
        else:
            assert ref.is_prefix(text), text
            partial += 1
    return complete, partial


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_sampling_batch_and_return_sequences(model, compiled, grammar, vocab, seed):
    ids, attn = _prompts()
    proc = GrammarLogitsProcessor(compiled, batch_size=4)
    torch.manual_seed(seed)
    out = model.generate(
        input_ids=ids,
        attention_mask=attn,
        logits_processor=transformers.LogitsProcessorList([proc, EosBias()]),
        do_sample=True,
        temperature=1.3,
        top_k=0,
        num_return_sequences=2,
        max_new_tokens=24,
    )
    assert out.shape[0] == 4
    complete, partial = _check_outputs(out, ids.shape[1], vocab, grammar)
    assert complete + partial == 4
    assert proc.stats.steps > 0 and proc.stats.mask_seconds > 0


def test_sampling_reaches_complete_documents(model, compiled, grammar, vocab):
    """Across seeds some rows stop at EOS (the json.loads path is exercised, not only prefixes)."""
    ids, attn = _prompts()
    total = 0
    for seed in range(4):
        torch.manual_seed(100 + seed)
        out = model.generate(
            input_ids=ids,
            attention_mask=attn,
            logits_processor=transformers.LogitsProcessorList([GrammarLogitsProcessor(compiled), EosBias()]),
            do_sample=True,
            num_return_sequences=2,
            max_new_tokens=30,
        )
        total += _check_outputs(out, ids.shape[1], vocab, grammar)[0]
    assert total >= 1


@pytest.mark.parametrize("eos_bias", [False, True])
def test_beam_search(model, compiled, grammar, vocab, eos_bias):
    ids, attn = _prompts()
    procs = [GrammarLogitsProcessor(compiled, batch_size=4)] + ([EosBias()] if eos_bias else [])
    out = model.generate(
        input_ids=ids,
        attention_mask=attn,
        logits_processor=transformers.LogitsProcessorList(procs),
        do_sample=False,
        num_beams=2,
        num_return_sequences=2,
        max_new_tokens=16,
    )
    assert out.shape[0] == 4
    _check_outputs(out, ids.shape[1], vocab, grammar)


def test_greedy_single_row(model, compiled, grammar, vocab):
    ids = torch.tensor([list(b"JSON: ")])
    out = model.generate(
        input_ids=ids,
        attention_mask=torch.ones_like(ids),
        logits_processor=transformers.LogitsProcessorList([GrammarLogitsProcessor(compiled)]),
        do_sample=False,
        max_new_tokens=20,
    )
    _check_outputs(out, ids.shape[1], vocab, grammar)


# ---- the processor called directly ------------------------------------------------------


def _fresh_mask(compiled, tokens: list[int]) -> np.ndarray:
    m = cfgmask.Matcher(compiled)
    for t in tokens:
        if m.is_terminated():
            break
        assert m.accept_token(t)
    mask = cfgmask.allocate_bitmask(1, compiled.vocab.size)
    if m.is_terminated():
        mask[0, EOS // 32] = np.uint32(1 << (EOS % 32)).view(np.int32)
    else:
        m.fill_bitmask(mask)
    return mask[0]


def _allowed(scores_row: torch.Tensor) -> np.ndarray:
    return np.flatnonzero(torch.isfinite(scores_row[:V]).numpy())


def _expected_allowed(compiled, tokens) -> np.ndarray:
    bits = np.unpackbits(_fresh_mask(compiled, tokens).view(np.uint8), bitorder="little")[:V]
    return np.flatnonzero(bits)


def test_rows_reordered_like_beam_search(compiled, vocab):
    """Each step's rows are an arbitrary reordering (with duplicates) of the last step's rows
    extended by one token; the masks must equal those of matchers rebuilt from scratch."""
    rng = np.random.default_rng(7)
    prompt = [ord("x")] * 3
    proc = GrammarLogitsProcessor(compiled)
    rows = [[] for _ in range(4)]
    for _step in range(12):
        ids = torch.tensor([prompt + r for r in rows])
        scores = torch.randn(len(rows), MODEL_V)
        proc(ids, scores)
        assert torch.isneginf(scores[:, V:]).all()
        for i, r in enumerate(rows):
            assert np.array_equal(_allowed(scores[i]), _expected_allowed(compiled, r)), (i, r)
        # next rows: pick parents (with repeats), append an allowed token
        parents = rng.integers(0, len(rows), len(rows))
        new_rows = []
        for p in parents:
            allowed = _allowed(scores[p])
            new_rows.append(rows[p] + [int(rng.choice(allowed))])
        rows = new_rows


def test_terminated_rows_only_allow_stop(compiled):
    proc = GrammarLogitsProcessor(compiled)
    prompt = [ord("x")]
    proc(torch.tensor([prompt]), torch.zeros(1, MODEL_V))
    proc(torch.tensor([prompt + [ord("7")]]), torch.zeros(1, MODEL_V))
    proc(torch.tensor([prompt + [ord("7"), EOS]]), s := torch.zeros(1, MODEL_V))
    assert _allowed(s[0]).tolist() == [EOS]
    proc(torch.tensor([prompt + [ord("7"), EOS, PAD]]), s := torch.zeros(1, MODEL_V))  # padding is ignored
    assert _allowed(s[0]).tolist() == [EOS]


def test_forced_off_grammar_raises(compiled):
    proc = GrammarLogitsProcessor(compiled)
    prompt = [ord("x")] * 2
    proc(torch.tensor([prompt, prompt]), torch.zeros(2, MODEL_V))
    with pytest.raises(cfgmask.MatcherError, match=r"row 1: the model was forced off the grammar: token 97"):
        proc(torch.tensor([prompt + [ord("{")], prompt + [ord("a")]]), torch.zeros(2, MODEL_V))


def test_stop_before_accepting_raises(compiled):
    proc = GrammarLogitsProcessor(compiled)
    proc(torch.tensor([[1]]), torch.zeros(1, MODEL_V))
    with pytest.raises(cfgmask.MatcherError, match="forced off the grammar"):
        proc(torch.tensor([[1, EOS]]), torch.zeros(1, MODEL_V))


def test_no_token_left_raises(compiled):
    proc = GrammarLogitsProcessor(compiled)
    proc(torch.tensor([[1]]), torch.zeros(1, MODEL_V))
    scores = torch.zeros(1, MODEL_V)
    scores[0, :] = float("-inf")
    with pytest.raises(cfgmask.MatcherError, match="no token is left"):
        proc(torch.tensor([[1, ord("1")]]), scores)


def test_batch_size_is_checked(compiled):
    proc = GrammarLogitsProcessor(compiled, batch_size=2)
    with pytest.raises(ValueError, match="batch_size=2"):
        proc(torch.tensor([[1]]), torch.zeros(1, MODEL_V))


def test_new_generation_restarts(compiled):
    proc = GrammarLogitsProcessor(compiled)
    proc(torch.tensor([[1, 2]]), torch.zeros(1, MODEL_V))
    proc(torch.tensor([[1, 2, ord("[")]]), torch.zeros(1, MODEL_V))
    s = torch.zeros(1, MODEL_V)
    proc(torch.tensor([[5, 6, 7]]), s)  # a different prompt: starts over at the grammar's start
    assert np.array_equal(_allowed(s[0]), _expected_allowed(compiled, []))
