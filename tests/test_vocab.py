"""Vocabulary: validation, tokenizer normalisation to bytes, pickling, fingerprints.  Offline."""

from __future__ import annotations

import pickle
from typing import Any

import pytest

from cfgmask.errors import VocabularyError
from cfgmask.vocab import BYTE_TO_CHAR, CHAR_TO_BYTE, Vocabulary

# ---- from_token_bytes ----------------------------------------------------------------------

INVALID: list[tuple[dict[str, Any], str]] = [
    ({"tokens": []}, "empty vocabulary"),
    ({"tokens": [], "size": 0}, "empty vocabulary"),
    ({"tokens": [b"a", "b"]}, "token 1: expected bytes or None, got str (encode"),
    ({"tokens": [b"a", 7]}, "token 1: expected bytes or None, got int"),
    ({"tokens": [b"a", b"b"], "size": 1}, "size 1 is smaller than the 2 tokens given"),
    ({"tokens": [b"a"], "size": "2"}, "size must be an integer"),
    (
        {"tokens": [b"a", b"b"], "stop_token_ids": [2]},
        "stop token id 2 is out of range for a vocabulary of 2",
    ),
    ({"tokens": [b"a", b"b"], "stop_token_ids": [-1]}, "stop token id -1 is out of range"),
    ({"tokens": [b"a", b"b"], "special_token_ids": [5]}, "special token id 5 is out of range"),
    ({"tokens": [b"a", b"b"], "special_token_ids": ["1"]}, "special token id '1' is not an integer"),
    ({"tokens": [b"a", b"b"], "stop_token_ids": [1.0]}, "stop token id 1.0 is not an integer"),
]


@pytest.mark.parametrize(("kwargs", "message"), INVALID)
def test_invalid(kwargs: dict[str, Any], message: str) -> None:
    tokens = kwargs.pop("tokens")
    with pytest.raises(VocabularyError, match="^" + message.replace("(", r"\(")) as info:
        Vocabulary.from_token_bytes(tokens, **kwargs)
    assert isinstance(info.value, ValueError)


def test_from_token_bytes() -> None:
    v = Vocabulary.from_token_bytes(
        [b"a", None, b"", bytearray(b"\xc3"), b"a", b"<eos>", b"\xff\xfe"],
        stop_token_ids=[5, 5],
        special_token_ids=[6],
        size=9,
    )
    assert len(v) == v.size == 9
    assert v.tokens == (b"a", b"", b"", b"\xc3", b"a", b"<eos>", b"\xff\xfe", b"", b"")
    assert v.stop_ids == (5,)  # deduplicated, and stop ids are special
    assert v.special_ids == {1, 2, 5, 6, 7, 8}  # no-text ids and padding are special
    assert list(v.iter_text_tokens()) == [(0, b"a"), (3, b"\xc3"), (4, b"a")]
    assert v.token_id("a") == 0 and v.token_id(b"\xc3") == 3 and v.token_id("<eos>") == 5
    with pytest.raises(KeyError):
        v.token_id(b"")
    assert v.decode([3, 0, 5]) == b"\xc3a<eos>"
    with pytest.raises(VocabularyError, match="token id 9 is out of range"):
        v.decode([9])
    assert v.is_special(8) and not v.is_special(0)
    assert repr(v) == "Vocabulary(size=9, text_tokens=3, special=6, stop_ids=(5,), scheme='bytes')"


def test_token_id_prefers_text_tokens() -> None:
    v = Vocabulary.from_token_bytes([b"x", b"x", b"y", b"y"], special_token_ids=[0, 2, 3])
    assert v.token_id("x") == 1  # the lowest non-special id
    assert v.token_id("y") == 2  # only special ones: the lowest


def test_pickle_round_trip() -> None:
    v = Vocabulary.from_token_bytes([b"a", b"\xe2\x82", b"", b"</s>"], stop_token_ids=[3], size=6)
    v.token_id("a")  # fill the lazy caches: they must not travel
    w = pickle.loads(pickle.dumps(v))
    assert w == v and hash(w) == hash(v)
    assert (w.tokens, w.special_ids, w.stop_ids, w.size, w.scheme) == (
        v.tokens,
        v.special_ids,
        v.stop_ids,
        v.size,
        v.scheme,
    )
    assert w.fingerprint() == v.fingerprint() and w.token_id(b"\xe2\x82") == 1
    assert "_index" not in v.__getstate__()


def test_fingerprint() -> None:
    def fp(tokens: list[bytes], **kw: Any) -> str:
        return Vocabulary.from_token_bytes(tokens, **kw).fingerprint()

    base = fp([b"a", b"b", b"</s>"], stop_token_ids=[2])
    assert base == fp([b"a", b"b", b"</s>"], stop_token_ids=[2])  # stable
    # Pinned: changing the hash layout invalidates every grammar cache, so do it on purpose.
    assert base == "8dca6f03fc257c5c80c9d4b097a77b685c62e378de37d14c1733240ae177903e"
    others = {
        fp([b"a", b"b", b"</s>"]),  # not a stop token
        fp([b"a", b"b", b"</s>"], special_token_ids=[2]),  # special, not stop
        fp([b"a", b"c", b"</s>"], stop_token_ids=[2]),
        fp([b"ab", b"", b"</s>"], stop_token_ids=[2]),  # same concatenation, other split
        fp([b"a", b"b", b"</s>"], stop_token_ids=[2], size=4),
        fp([b"a", b"b", b"</s>"], stop_token_ids=[2], special_token_ids=[0]),
    }
    assert base not in others and len(others) == 6


# ---- from_huggingface (tokenizers objects built in code, nothing downloaded) ------------------


def test_byte_to_unicode_table() -> None:
    assert len(BYTE_TO_CHAR) == 256 and len(CHAR_TO_BYTE) == 256
    assert BYTE_TO_CHAR[ord(" ")] == "Ġ" and BYTE_TO_CHAR[ord("\n")] == "Ċ" and BYTE_TO_CHAR[0] == "Ā"
    assert BYTE_TO_CHAR[ord("a")] == "a" and BYTE_TO_CHAR[0xE9] == "é" and BYTE_TO_CHAR[0xAD] == "Ń"
    tk = pytest.importorskip("tokenizers")
    assert set(tk.pre_tokenizers.ByteLevel.alphabet()) == set(CHAR_TO_BYTE)
    # every byte that occurs in UTF-8, checked against tokenizers' own ByteLevel pre-tokenizer
    text = (
        "".join(map(chr, range(1, 0x800))) + "".join(chr(c << 12 | 0x41) for c in range(16)) + "😀\U00100000"
    )
    pre = tk.pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    assert pre.pre_tokenize_str(text)[0][0] == "".join(BYTE_TO_CHAR[b] for b in text.encode())


def byte_level_tokenizer() -> Any:
    tk = pytest.importorskip("tokenizers")
    alphabet = [BYTE_TO_CHAR[b] for b in range(256)]
    extra = ["ab", "Ġab", "Ã©", "ðŁ", "ðŁĺ", "ðŁĺĢ"]  # é, and a split 😀 (F0 9F 98 80)
    vocab = {p: i for i, p in enumerate(alphabet + extra)}
    merges = [("a", "b"), ("Ġ", "ab"), ("Ã", "©"), ("ð", "Ł"), ("ðŁ", "ĺ"), ("ðŁĺ", "Ģ")]
    tok = tk.Tokenizer(tk.models.BPE(vocab, merges))
    tok.pre_tokenizer = tk.pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = tk.decoders.ByteLevel()
    tok.add_special_tokens(["<|endoftext|>", "<|im_end|>", "<pad>"])
    tok.add_tokens([tk.AddedToken("é!", special=False)])
    return tok


def test_huggingface_byte_level() -> None:
    tok = byte_level_tokenizer()
    v = Vocabulary.from_huggingface(tok, size=270)
    assert v.scheme == "byte_level" and v.size == 270
    assert v.tokens[:256] == tuple(bytes([b]) for b in range(256))
    assert v.tokens[256:262] == (
        b"ab",
        b" ab",
        b"\xc3\xa9",
        b"\xf0\x9f",
        b"\xf0\x9f\x98",
        b"\xf0\x9f\x98\x80",
    )
    assert v.tokens[262:266] == (b"<|endoftext|>", b"<|im_end|>", b"<pad>", "é!".encode())
    assert v.special_ids == {262, 263, 264, *range(266, 270)}
    assert v.stop_ids == (262, 263)
    assert v.tokens[0xC3] == b"\xc3"  # the first half of "é" on its own
    for text in ["ab ab", "é", "say 😀!\n\t", "é! x", "\x00\x7f ÿ"]:
        assert v.decode(tok.encode(text).ids) == text.encode()
    assert Vocabulary.from_huggingface(tok, stop_token_ids=[264]).stop_ids == (264,)


def test_huggingface_sentencepiece_byte_fallback() -> None:
    tk = pytest.importorskip("tokenizers")
    pieces = ["<unk>", "<s>", "</s>", *(f"<0x{b:02X}>" for b in range(256))]
    pieces += ["▁", "a", "b", "ab", "▁a", "▁ab", "é"]
    vocab = {p: i for i, p in enumerate(pieces)}
    model = tk.models.BPE(vocab, [("a", "b"), ("▁", "a"), ("▁a", "b")], byte_fallback=True, unk_token="<unk>")
    tok = tk.Tokenizer(model)
    tok.pre_tokenizer = tk.pre_tokenizers.Metaspace()
    tok.decoder = tk.decoders.Sequence(
        [tk.decoders.Replace("▁", " "), tk.decoders.ByteFallback(), tk.decoders.Fuse()]
    )
    tok.add_special_tokens(["<unk>", "<s>", "</s>"])
    v = Vocabulary.from_huggingface(tok)
    assert v.scheme == "sentencepiece" and v.size == len(pieces)
    assert v.tokens[3 + 0xE2] == b"\xe2" and v.tokens[3 + ord("A")] == b"A"  # byte fallback
    assert v.tokens[259:] == (b" ", b"a", b"b", b"ab", b" a", b" ab", "é".encode())
    assert v.special_ids == {0, 1, 2} and v.stop_ids == (2,)
    enc = tok.encode("ab aé€")
    assert "<0xE2>" in enc.tokens  # € is not in the vocabulary: three byte pieces
    assert v.decode(enc.ids) == " ab aé€".encode()  # Metaspace prepends the space


def test_huggingface_plain_needs_stop_ids() -> None:
    tk = pytest.importorskip("tokenizers")
    tok = tk.Tokenizer(tk.models.WordLevel({"[UNK]": 0, "hi": 1, "there": 2}, unk_token="[UNK]"))
    tok.add_special_tokens(["[SEP]"])
    with pytest.raises(VocabularyError, match="stop_token_ids"):
        Vocabulary.from_huggingface(tok)
    v = Vocabulary.from_huggingface(tok, stop_token_ids=[3])
    assert v.scheme == "plain" and v.tokens == (b"[UNK]", b"hi", b"there", b"[SEP]")
    assert v.special_ids == {0, 3} and v.stop_ids == (3,)


class _Added:
    def __init__(self, content: str, special: bool) -> None:
        self.content, self.special = content, special


class _SlowGPT2:
    """The parts of a slow transformers GPT2Tokenizer that from_huggingface reads."""

    def __init__(self) -> None:
        self.byte_encoder = BYTE_TO_CHAR
        self.pieces = ["a", "Ġa", "Ã", "<|endoftext|>", " extra"]
        self.added_tokens_decoder = {3: _Added("<|endoftext|>", True), 4: _Added(" extra", False)}
        self.all_special_ids = [3]
        self.eos_token_id = 3

    def __len__(self) -> int:
        return len(self.pieces)

    def convert_ids_to_tokens(self, ids: list[int]) -> list[str]:
        return [self.pieces[i] for i in ids]


def test_huggingface_slow_tokenizer() -> None:
    v = Vocabulary.from_huggingface(_SlowGPT2(), size=8)
    assert v.scheme == "byte_level"
    assert v.tokens == (b"a", b" a", b"\xc3", b"<|endoftext|>", b" extra", b"", b"", b"")
    assert v.special_ids == {3, 5, 6, 7} and v.stop_ids == (3,)


# ---- from_tiktoken on the bundled Llama-3 vocabulary ------------------------------------------


@pytest.fixture(scope="module")
def llama3() -> tuple[Vocabulary, Any]:
    quicktok = pytest.importorskip("quicktok")
    return Vocabulary.llama3(), quicktok.get_encoding("llama3")


def test_llama3(llama3: tuple[Vocabulary, Any]) -> None:
    v, enc = llama3
    assert v.size == 128256 and v.stop_ids == (128001, 128009)
    assert v.special_ids == set(range(128000, 128256))
    assert all(v.tokens)  # every id has bytes (special ones: their names)
    assert v.tokens[128009] == b"<|eot_id|>" and v.token_id("<|begin_of_text|>") == 128000
    assert v.tokens[:3] == (b"!", b'"', b"#") and v.token_id(" the") == 279
    for text in ["Hello, world!", "naïve café 😀 日本語", '{"a": [1, 2.5e-3]}\n', "  \t\n"]:
        ids = enc.encode(text)
        assert v.decode(ids) == text.encode()
        assert [v.tokens[i] for i in ids] == [enc.decode_single_token_bytes(i) for i in ids]
    # tokens that are only part of a UTF-8 sequence exist and are ordinary text tokens
    broken = [i for i, t in v.iter_text_tokens() if not _is_utf8(t)]
    assert len(broken) == 1352 and v.tokens[broken[0]] == b"\xa1"
    assert v.fingerprint() == pickle.loads(pickle.dumps(v)).fingerprint()


def test_llama3_padded() -> None:
    pytest.importorskip("quicktok")
    v = Vocabulary.from_quicktok("llama3", size=128512)
    assert v.size == 128512 and v.tokens[128300] == b"" and 128511 in v.special_ids
    assert v.fingerprint() != Vocabulary.llama3().fingerprint()


def test_tiktoken_holes() -> None:
    pytest.importorskip("quicktok")
    v = Vocabulary.from_quicktok("cl100k_base")  # ids 100256 and 100261-100275 have no bytes
    assert v.size == 100277 and v.stop_ids == (100257,)
    assert v.tokens[100256] == b"" and 100256 in v.special_ids and 100270 in v.special_ids
    assert len(v.special_ids) == 16 + 5


def _is_utf8(b: bytes) -> bool:
    try:
        b.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


class _FastWrapper:
    """The parts of a transformers PreTrainedTokenizerFast that from_huggingface reads."""

    def __init__(self, backend: Any) -> None:
        self.backend_tokenizer = backend
        self.added_tokens_decoder = backend.get_added_tokens_decoder()
        self.all_special_ids = [262, 263, 264]
        self.eos_token_id = 264  # any id the tokenizer names as EOS is a stop token
        self._len: int = backend.get_vocab_size(with_added_tokens=True)

    def __len__(self) -> int:
        return self._len


def test_huggingface_fast_wrapper() -> None:
    v = Vocabulary.from_huggingface(_FastWrapper(byte_level_tokenizer()))
    assert v.size == 266 and v.scheme == "byte_level" and v.stop_ids == (262, 263, 264)
    assert v.tokens[265] == "é!".encode() and 265 not in v.special_ids
