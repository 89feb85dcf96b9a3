"""The decoding loop behind ``cfgmask generate``: masks, stop tokens, max tokens, and
jump-forward, on a tiny random Llama and a byte-level vocabulary built offline."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import cfgmask  # noqa: E402
from cfgmask.generation import _Jumper, _prefix_end, _utf8_prefix, generate_stream  # noqa: E402

from .reference import ReferenceMatcher  # noqa: E402
from .tiny_llama import tiny_llama  # noqa: E402

MULTI = [b'{"', b'": "', b'", "', b"name", b'ok": ', b"true", b"false", b"}", b' "', b'"n']
EOS = 256 + len(MULTI)
V = EOS + 1
TOKENS = [bytes([b]) for b in range(256)] + MULTI + [None]

GRAMMAR = r"""
root ::= "{\"name\": \"" [a-z]{1,8} "\", \"ok\": " ("true" | "false") "}"
"""


def encode(text: str) -> list[int]:
    """Greedy longest match over the vocabulary: a stand-in for a real tokenizer."""
    data, out, i = text.encode(), [], 0
    by_bytes = {t: i for i, t in enumerate(TOKENS) if t}
    while i < len(data):
        for n in range(min(8, len(data) - i), 0, -1):
            if data[i : i + n] in by_bytes:
                out.append(by_bytes[data[i : i + n]])
                i += n
                break
    return out


@pytest.fixture(scope="module")
def vocab():
    return cfgmask.Vocabulary.from_token_bytes(TOKENS, stop_token_ids=[EOS])


@pytest.fixture(scope="module")
def grammar():
    return cfgmask.Grammar.from_gbnf(GRAMMAR)


@pytest.fixture(scope="module")
def compiled(grammar, vocab):
    return cfgmask.compile(grammar, vocab)


@pytest.fixture(scope="module")
def model():
    return tiny_llama(V + 3, seed=1, eos=EOS)


def _check(text: bytes, stats, grammar):
    ref = ReferenceMatcher(grammar.ir)
    if stats.stop == "stop token":
        assert stats.accepting and ref.accepts(text), text
    else:
        assert not stats.accepting and ref.is_prefix(text), text
    assert stats.tokens == stats.sampled + stats.jump_tokens


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_jump_forward_output_is_valid(model, compiled, grammar, seed):
    pieces: list[bytes] = []
    text, stats = generate_stream(
        model,
        compiled,
        list(b"go: "),
        max_tokens=60,
        temperature=1.0,
        seed=seed,
        encode=encode,
        on_bytes=pieces.append,
    )
    assert b"".join(pieces) == text
    _check(text, stats, grammar)
    assert stats.stop == "stop token"
    # {"  name  ": "  are forced at the start; the last forced token is sampled if a longer one could follow
    assert text.startswith(b'{"name": "')
    assert stats.jump_tokens >= 2 and stats.jumps >= 1
    assert stats.forward_passes == stats.sampled + stats.jumps
    assert stats.forward_passes_saved == stats.jump_tokens - stats.jumps
    assert "jump-forward" in stats.summary()


def test_same_seed_same_output_and_no_jump_without_encoder(model, compiled, grammar):
    a = generate_stream(model, compiled, list(b"go: "), max_tokens=60, temperature=1.0, seed=5, encode=encode)
    b = generate_stream(model, compiled, list(b"go: "), max_tokens=60, temperature=1.0, seed=5, encode=encode)
    assert a[0] == b[0]
    text, stats = generate_stream(model, compiled, list(b"go: "), max_tokens=60, temperature=0.0)
    _check(text, stats, grammar)
    assert stats.jump_tokens == 0 and stats.sampled == stats.tokens


def test_max_tokens_leaves_a_prefix(model, compiled, grammar):
    text, stats = generate_stream(model, compiled, list(b"go: "), max_tokens=3, encode=encode)
    assert stats.stop == "max tokens" and stats.tokens == 3
    _check(text, stats, grammar)
    assert "incomplete" in stats.summary()


def test_jumper_leaves_an_extendable_last_token(compiled, vocab):
    jumper = _Jumper(vocab, encode)
    m = cfgmask.Matcher(compiled)
    # forced: {"name": "   tokenized {" name ": "   -- ": " could be followed by letters
    # but no token starts with ": " and is longer, so all three are taken
    got = jumper.tokens(m, 100)
    assert vocab.decode(got) == b'{"name": "'
    assert m.num_tokens == 3
    m.accept_bytes(b"ab")
    assert jumper.tokens(m, 100) == []  # a choice: more letters or the closing quote
    m.accept_bytes(b'"')
    # forced: , "ok":   tokenized , ' "' ok":   ->  ' "' is taken, the last token too
    got = jumper.tokens(m, 100)
    assert vocab.decode(got) == b', "ok": '
    # the budget caps the tokens taken
    m2 = cfgmask.Matcher(compiled)
    assert len(jumper.tokens(m2, 1)) == 1


def test_jumper_keeps_last_token_when_a_longer_one_is_allowed():
    tokens = [bytes([b]) for b in range(256)] + [b"ab", b"abc", None]
    vocab = cfgmask.Vocabulary.from_token_bytes(tokens, stop_token_ids=[258])
    compiled = cfgmask.compile(cfgmask.Grammar.from_gbnf('root ::= "xab" [a-z]+'), vocab)

    def enc(text: str) -> list[int]:
        return [ord("x"), 256] if text == "xab" else list(text.encode())

    m = cfgmask.Matcher(compiled)
    # forced "xab": tokens x + ab; "abc" is allowed and longer, so "ab" is left to the model
    assert vocab.decode(_Jumper(vocab, enc).tokens(m, 10)) == b"x"
    assert m.num_tokens == 1


def test_jumper_rejects_bad_tokenizations(compiled, vocab):
    m = cfgmask.Matcher(compiled)
    assert _Jumper(vocab, lambda s: [ord("z")]).tokens(m, 10) == []  # does not spell the bytes
    assert _Jumper(vocab, lambda s: [EOS]).tokens(m, 10) == []  # special token
    assert _Jumper(vocab, lambda s: []).tokens(m, 10) == []
    assert m.num_tokens == 0


def test_helpers():
    assert _prefix_end(b"ab") == b"ac"
    assert _prefix_end(b"a\xff") == b"b"
    assert _prefix_end(b"\xff\xff") == b""
    assert _utf8_prefix("é!".encode()) == "é!"
    assert _utf8_prefix("aé".encode()[:-1]) == "a"
    assert _utf8_prefix(b"\xff") == ""


def test_timings_of_the_summary(model, compiled):
    text, stats = generate_stream(model, compiled, list(b"go: "), max_tokens=60, encode=encode)
    assert stats.tokens > 1
    assert stats.prefill_seconds <= stats.first_token_seconds <= stats.total_seconds
    after = stats.total_seconds - stats.first_token_seconds
    assert stats.tokens_per_second == pytest.approx((stats.tokens - 1) / after)
    assert len(stats.mask_step_seconds) == stats.mask_steps
    assert sum(stats.mask_step_seconds) == pytest.approx(stats.mask_seconds)
    assert f"time to first token {stats.first_token_seconds:.2f} s" in stats.summary()
