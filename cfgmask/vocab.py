"""``Vocabulary``: the byte string of every token id, and which ids are special or stop tokens.

Grammars constrain bytes, so a vocabulary is normalised once to the bytes each token
stands for when a model emits it, whatever the tokenizer's own spelling:

* byte-level BPE (GPT-2, Llama-3, Qwen, SmolLM2): each character of a piece is one byte
  through GPT-2's 256-entry ``bytes_to_unicode`` table (``Ġ`` is the space byte);
* SentencePiece (Llama-2, Mistral, Gemma): ``▁`` is a space, and with byte fallback a
  ``<0xNN>`` piece is the single byte NN;
* tiktoken-style encodings hold the bytes already.

A token may be half of a UTF-8 sequence (``b"\\xc3"``); duplicates are allowed.

Invariants, relied on by the compiler and the C core:

* ``tokens[i]`` is the byte string of id ``i``; ``len(tokens) == size``.
* Every id whose bytes are empty is in ``special_ids``: an empty token would let the model
  stall forever, so no text grammar allows one.  Special tokens keep their text (``<|eot_id|>``)
  for display and :meth:`token_id`, but a text grammar never allows them.
* ``stop_ids`` (sorted, distinct) is a subset of ``special_ids``: a stop token ends
  generation and is allowed exactly in accepting states, never as the text it spells.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import operator
import re
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from .errors import CfgmaskError, VocabularyError

__all__ = ["BYTE_TO_CHAR", "CHAR_TO_BYTE", "Vocabulary"]

# Special tokens that end generation, by name.  Stop ids default to the tokenizer's EOS plus
# every one of these that the vocabulary has as a special token; pass ``stop_token_ids`` to
# choose them yourself (e.g. from the model's ``generation_config.eos_token_id``).
END_OF_TEXT_NAMES = ("<|end_of_text|>", "<|endoftext|>", "</s>", "<eos>", "<|eos|>")
END_OF_TURN_NAMES = ("<|eot_id|>", "<|eom_id|>", "<|im_end|>", "<end_of_turn>")


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte -> character table: printable Latin-1 bytes are themselves, the
    other 68 bytes map in order to U+0100 upwards (so 0x20 is ``Ġ``, 0x0A is ``Ċ``)."""
    table = {b: chr(b) for b in [*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)]}
    shifted = 0
    for b in range(256):
        if b not in table:
            table[b] = chr(0x100 + shifted)
            shifted += 1
    return table


BYTE_TO_CHAR: dict[int, str] = _bytes_to_unicode()
CHAR_TO_BYTE: dict[str, int] = {c: b for b, c in BYTE_TO_CHAR.items()}
_BYTE_PIECE = re.compile(r"<0x([0-9A-Fa-f]{2})>")


def _byte_level(piece: str) -> bytes:
    try:
        return bytes(CHAR_TO_BYTE[c] for c in piece)
    except KeyError:  # a character outside the table: raw UTF-8, as tokenizers' decoder does
        return piece.encode()


def _piece_decoder(scheme: str, byte_fallback: bool) -> Callable[[str], bytes]:
    """The function from a tokenizer piece to the bytes it stands for."""
    if scheme == "byte_level":
        return _byte_level

    def decode(piece: str) -> bytes:
        if byte_fallback and (m := _BYTE_PIECE.fullmatch(piece)):
            return bytes([int(m.group(1), 16)])
        return piece.replace("▁", " ").encode() if scheme == "sentencepiece" else piece.encode()

    return decode


def _check_ids(ids: Iterable[Any], size: int, kind: str) -> set[int]:
    out = set()
    for x in ids:
        try:
            i = operator.index(x)
        except TypeError:
            raise VocabularyError(f"{kind} token id {x!r} is not an integer") from None
        if not 0 <= i < size:
            raise VocabularyError(f"{kind} token id {i} is out of range for a vocabulary of {size} ids")
        out.add(i)
    return out


def _default_stops(named: Mapping[str, int], eos: Iterable[int | None]) -> list[int]:
    stops = [i for i in eos if i is not None]
    stops += [named[s] for s in (*END_OF_TEXT_NAMES, *END_OF_TURN_NAMES) if s in named]
    if not stops:
        raise VocabularyError(
            "cannot tell which token ends generation (no EOS and no known end token); "
            "pass stop_token_ids=[...]"
        )
    return stops


# Every vocabulary's C trie that is alive, so that clear_caches() can drop their loop walks.
_LIVE_HANDLES: weakref.WeakSet[Any] = weakref.WeakSet()


# Values whose every byte's mask pins the loop walks of a string format (Vocabulary._pin_json_walks).
FORMAT_SAMPLES = {
    "uri": b'"https://user@a.example:8080/b/c?d=e#f"',
    "uri-reference": b'"../b/c?d=e#f"',
    "email": b'"a.b@c.example"',
}

# Vocabularies this large pin the walks of JSON's string loops when their trie is built; below,
# a walk is cheap and the priming would cost more than it saves.
PIN_WALKS_MIN_TOKENS = 10_000


def clear_walks() -> None:
    """Drop the loop walks every live vocabulary keeps (built on a grammar's first masks), all
    but those pinned as part of the vocabulary (:meth:`Vocabulary._pin_json_walks`)."""
    for h in list(_LIVE_HANDLES):
        h.clear_walks()


class Vocabulary:
    """The token ids of a model and the bytes each one stands for.  Immutable; picklable.

    Build one with :meth:`from_token_bytes`, :meth:`from_huggingface`, :meth:`from_tiktoken`
    or :meth:`llama3`.  ``scheme`` records how pieces were turned into bytes: ``"bytes"``
    (given as bytes), ``"byte_level"``, ``"sentencepiece"`` or ``"plain"`` (UTF-8 of the piece).
    """

    size: int
    tokens: tuple[bytes, ...]
    special_ids: frozenset[int]
    stop_ids: tuple[int, ...]
    scheme: str

    def __init__(
        self,
        tokens: Sequence[bytes | bytearray | None],
        *,
        stop_token_ids: Iterable[int] = (),
        special_token_ids: Iterable[int] = (),
        size: int | None = None,
        scheme: str = "bytes",
    ) -> None:
        """See :meth:`from_token_bytes`."""
        given = list(tokens)
        if size is None:
            size = len(given)
        elif not isinstance(size, int) or isinstance(size, bool):
            raise VocabularyError(f"size must be an integer, not {type(size).__name__}")
        if size < len(given):
            raise VocabularyError(f"size {size} is smaller than the {len(given)} tokens given")
        if size <= 0:
            raise VocabularyError("empty vocabulary: there are no token ids")
        out: list[bytes] = []
        for i, t in enumerate(given):
            if t is None:
                t = b""
            elif isinstance(t, bytearray | memoryview):
                t = bytes(t)
            elif not isinstance(t, bytes):
                hint = " (encode text tokens to bytes first)" if isinstance(t, str) else ""
                raise VocabularyError(f"token {i}: expected bytes or None, got {type(t).__name__}{hint}")
            out.append(t)
        out += [b""] * (size - len(given))
        special = _check_ids(special_token_ids, size, "special")
        stops = _check_ids(stop_token_ids, size, "stop")
        special |= stops
        special.update(i for i, t in enumerate(out) if not t)
        self._set(tuple(out), frozenset(special), tuple(sorted(stops)), scheme)

    def _set(
        self, tokens: tuple[bytes, ...], special: frozenset[int], stops: tuple[int, ...], scheme: str
    ) -> None:
        self.size = len(tokens)
        self.tokens = tokens
        self.special_ids = special
        self.stop_ids = stops
        self.scheme = scheme
        self._fingerprint: str | None = None
        self._index: dict[bytes, int] | None = None
        self._c_handle: Any = None  # owned by the C side, see below; never pickled
        # Built now, not by the first compile: the trie (and a large vocabulary's pinned walks)
        # is work once a vocabulary, and a process's first grammar should not pay it.
        self._handle()

    # ---- constructors ------------------------------------------------------------------

    @classmethod
    def from_token_bytes(
        cls,
        tokens: Sequence[bytes | bytearray | None],
        *,
        stop_token_ids: Iterable[int] = (),
        special_token_ids: Iterable[int] = (),
        size: int | None = None,
    ) -> Vocabulary:
        """A vocabulary from the bytes of each id (``None`` or ``b""``: no text, so special).

        ``size`` (default ``len(tokens)``) may exceed ``len(tokens)`` when the model's logits
        are padded: the extra ids are special, with no text.  Stop ids are made special.
        Raises :class:`VocabularyError` for ids out of range, non-bytes entries, an empty
        vocabulary, or ``size < len(tokens)``.
        """
        return cls(tokens, stop_token_ids=stop_token_ids, special_token_ids=special_token_ids, size=size)

    @classmethod
    def from_tiktoken(
        cls, encoding: Any, *, stop_token_ids: Iterable[int] | None = None, size: int | None = None
    ) -> Vocabulary:
        """From a ``tiktoken.Encoding`` or a ``quicktok.Tokenizer``.

        Ids with no bytes (holes, as in cl100k) are special; so is every special token.
        Stop ids default to ``eot_token`` plus the special tokens named in ``END_OF_TEXT_NAMES``
        and ``END_OF_TURN_NAMES`` (so Llama-3 stops at ``<|end_of_text|>`` and ``<|eot_id|>``).
        """
        tokens: list[bytes | None] = []
        for i in range(encoding.n_vocab):
            try:
                tokens.append(encoding.decode_single_token_bytes(i))
            except KeyError:
                tokens.append(None)
        names = getattr(encoding, "special_tokens_set", None)
        if names is not None:
            named = {s: encoding.encode_single_token(s) for s in names}
        else:
            named = dict(getattr(encoding, "_special_tokens", {}))
        if stop_token_ids is None:
            try:
                eot = encoding.eot_token
            except (AttributeError, KeyError):  # tiktoken raises KeyError without <|endoftext|>
                eot = None
            stop_token_ids = _default_stops(named, [eot])
        return cls(tokens, stop_token_ids=stop_token_ids, special_token_ids=named.values(), size=size)

    @classmethod
    def from_quicktok(cls, name: str, *, size: int | None = None) -> Vocabulary:
        """A vocabulary bundled with ``quicktok-v1`` (``llama3``, ``qwen3``, ``cl100k_base``...)."""
        quicktok = importlib.import_module("quicktok")
        return cls.from_tiktoken(quicktok.get_encoding(name), size=size)

    @classmethod
    def llama3(cls) -> Vocabulary:
        """Llama-3's 128,256 ids; stops ``<|end_of_text|>`` (128001) and ``<|eot_id|>`` (128009)."""
        return cls.from_quicktok("llama3")

    @classmethod
    def from_huggingface(
        cls, tokenizer: Any, *, stop_token_ids: Iterable[int] | None = None, size: int | None = None
    ) -> Vocabulary:
        """From a ``tokenizers.Tokenizer`` or a ``transformers`` tokenizer (fast or slow).

        The piece -> bytes scheme comes from the tokenizer's metadata (its decoder,
        pre-tokenizer and normaliser), not from the pieces.  Added tokens stand for their
        content as UTF-8; those marked special, ``all_special_ids`` and the unknown token are
        special.  Stop ids default to ``eos_token_id`` plus the special tokens named in
        ``END_OF_TEXT_NAMES`` / ``END_OF_TURN_NAMES``; the model's ``generation_config`` is
        not visible here, so pass ``stop_token_ids`` when it says otherwise.  ``size`` pads to
        the model's logit width (extra ids are special, with no text).

        SentencePiece decoders drop the space of the first piece (``▁Hello`` -> ``Hello``);
        here that token is ``b" Hello"`` everywhere, as the grammar sees it mid-output.
        """
        backend = getattr(tokenizer, "backend_tokenizer", None)
        if backend is None and hasattr(tokenizer, "to_str"):
            backend = tokenizer  # a bare tokenizers.Tokenizer
        if backend is not None:
            by_id, special, scheme = _read_tokenizers_json(backend)
        else:
            by_id, special, scheme = _read_slow_tokenizer(tokenizer)
        # transformers: added tokens are matched on the input text, so they stand for their content
        for i, added in (getattr(tokenizer, "added_tokens_decoder", None) or {}).items():
            by_id[i] = added.content.encode()
            if getattr(added, "special", False):
                special.add(i)
        special |= set(getattr(tokenizer, "all_special_ids", None) or ())
        n = max([*by_id, *special], default=-1) + 1
        if backend is not tokenizer:
            n = max(n, len(tokenizer))
        tokens = [by_id.get(i) for i in range(n)]
        if stop_token_ids is None:
            named = {t.decode("utf-8", "replace"): i for i in special if (t := by_id.get(i))}
            stop_token_ids = _default_stops(named, [getattr(tokenizer, "eos_token_id", None)])
        return cls(tokens, stop_token_ids=stop_token_ids, special_token_ids=special, size=size, scheme=scheme)

    # ---- queries -----------------------------------------------------------------------

    def __len__(self) -> int:
        return self.size

    def is_special(self, token_id: int) -> bool:
        return token_id in self.special_ids

    def iter_text_tokens(self) -> Iterator[tuple[int, bytes]]:
        """``(id, bytes)`` of every id a text grammar may allow: not special, bytes non-empty."""
        special = self.special_ids
        return ((i, t) for i, t in enumerate(self.tokens) if i not in special)

    def token_id(self, token: str | bytes) -> int:
        """The id whose bytes are exactly ``token`` (text is UTF-8 encoded): the lowest such
        non-special id, else the lowest special one.  Raises ``KeyError`` when there is none."""
        key = token.encode() if isinstance(token, str) else bytes(token)
        if self._index is None:
            index: dict[bytes, int] = {}
            for i, t in enumerate(self.tokens):
                j = index.get(t)
                if t and (j is None or (j in self.special_ids and i not in self.special_ids)):
                    index[t] = i
            self._index = index
        return self._index[key]

    def decode(self, ids: Iterable[int]) -> bytes:
        """The bytes of a sequence of ids (special tokens included, as their text)."""
        out = []
        for i in ids:
            if not 0 <= i < self.size:
                raise VocabularyError(f"token id {i} is out of range for a vocabulary of {self.size} ids")
            out.append(self.tokens[i])
        return b"".join(out)

    def fingerprint(self) -> str:
        """A stable hex digest of (tokens, special ids, stop ids), for grammar caches."""
        if self._fingerprint is None:
            h = hashlib.sha256(b"cfgmask-vocabulary-v1\0")
            h.update(self.size.to_bytes(8, "little"))
            for t in self.tokens:
                h.update(len(t).to_bytes(4, "little"))
                h.update(t)
            for ids in (sorted(self.special_ids), self.stop_ids):
                h.update(len(ids).to_bytes(8, "little"))
                h.update(b"".join(i.to_bytes(4, "little") for i in ids))
            self._fingerprint = h.hexdigest()
        return self._fingerprint

    # ---- C side ------------------------------------------------------------------------
    def _handle(self) -> Any:
        """The C token trie, built once: special and empty ids are left out, and stop
        ids are passed to each compiled grammar separately."""
        if self._c_handle is None:
            import numpy as np

            from ._core import VocabHandle

            lengths = np.fromiter((len(t) for t in self.tokens), dtype=np.uint64, count=self.size)
            offsets = np.zeros(self.size + 1, dtype=np.uint64)
            np.cumsum(lengths, out=offsets[1:])
            in_trie = np.ones(self.size, dtype=np.uint8)
            if self.special_ids:
                in_trie[np.fromiter(self.special_ids, dtype=np.int64)] = 0
            self._c_handle = VocabHandle(b"".join(self.tokens), offsets, in_trie)
            _LIVE_HANDLES.add(self._c_handle)
            if self.size >= PIN_WALKS_MIN_TOKENS:
                self._pin_json_walks()
        return self._c_handle

    def _pin_json_walks(self) -> None:
        """Walk the loop every JSON grammar has, the inside of a string (canonical, and with
        every escape), once with the vocabulary, and pin the walks: the first string value of
        any schema then copies a walk (~40 µs at 128k tokens) instead of walking the whole trie
        (~1.5 ms).  Like the trie they are part of the vocabulary: ``clear_caches()`` keeps
        them.  About 10 ms, once per vocabulary (llguidance precomputes such token classes
        per tokenizer too); the chains of bounded strings and of numbers' digits (csrc/chains.c)
        add a few walks more, and the loops of the URI and e-mail formats (``FORMAT_SAMPLES``)
        ~9 ms.  The automata every JSON Schema grammar may share (any JSON value: the
        prelude, :mod:`cfgmask.compile.prelude`) are pinned first, once a process (~5 ms)."""
        from .compile import compile as compile_grammar
        from .compile.prelude import pin as pin_prelude
        from .grammar import Grammar
        from .matcher import Matcher, allocate_bitmask

        mask = allocate_bitmask(1, self.size)
        try:
            pin_prelude()
            long = {"type": "string", "maxLength": 1000}
            shared = {"type": "object", "properties": {"a": long, "b": {**long, "type": ["string", "null"]}}}
            bound = {"type": "string", "maxLength": 128}
            for canonical in (True, False):
                # the loop of a string, and the chains of one with a maxLength, a minLength (short,
                # and long: a whole chain under CompileLimits.unroll_whole, whose walk differs), and
                # one long enough to be cut into blocks (one walk serves every position of every
                # such string: csrc/chains.c); and a long string's rule shared by two values,
                # whose positions may each end it (its walk is the chain's from a character in)
                bounded = (
                    ({"type": "string", "maxLength": 8}, b'"'),
                    ({"type": "string", "minLength": 1, "maxLength": 8}, b'"'),
                    ({"type": "string", "minLength": 1, "maxLength": 255}, b'"'),
                    # with no minimum, longer than a token (max_len bytes): its first rows serve the
                    # first positions of every string whose bound is (csrc/chains.c, prefix memos)
                    ({"type": "string", "maxLength": 255}, b'"'),
                    # and one copied into its only caller (a count past CompileLimits.inline_max_states
                    # is a rule of its own, whose positions may end it): its rows, from a later
                    # position on, are those of every shorter such string
                    (
                        {
                            "type": "object",
                            "properties": {"a": {"type": "string", "maxLength": 140}},
                            "required": ["a"],
                        },
                        b'{"a":"',
                    ),
                    (long, b'"'),
                    (shared, b'{"a":"x'),
                    # and that rule's first position (its first block's call left out, the tail
                    # that may end the rule at once): a nullable such string's start in a big
                    # object (Snowplow's maxLength 1024+ strings) is analysed otherwise
                    (shared, b'{"a":"'),
                    # a string's value rule shared by two properties, quotes and all (a bound
                    # common in Snowplow's schemas): its chain, and from a later position on those
                    # of every shorter such string (else analysed and walked at their first mask)
                    ({"type": "object", "properties": {"a": bound, "b": bound}}, b'{"a":"'),
                    # a long string's start before a property whose value is an array (the state
                    # after its closing quote is not solo, unlike every pinned one's): its inline
                    # tail's chain (o9813's description, Snowplow's url before a list)
                    (
                        {
                            "type": "object",
                            "properties": {
                                "a": long,
                                "b": {
                                    "type": "array",
                                    "items": {"type": "object", "properties": {"c": {"type": "string"}}},
                                },
                            },
                        },
                        b'{"a":"',
                    ),
                )
                # the digits of a number and of an integer (counts that bound the int64 range and
                # the precision: each a chain) from a first digit, a point, a fraction's second
                # position (where it may end) and an exponent; once: they have no escapes
                kinds = ("number", "integer") if canonical else ()
                numbers = tuple(({"type": k}, p) for k in kinds for p in (b"1", b"1.", b"1.5", b"1e", b"1e5"))
                pins: list[tuple[dict[str, Any], bytes]] = [({"type": "string"}, b'"'), *bounded, *numbers]
                for schema, prefix in pins:
                    g = Grammar.from_json_schema(schema, canonical=canonical)
                    m = Matcher(compile_grammar(g, self))
                    if m.accept_bytes(prefix):
                        m.fill_bitmask(mask, 0)
            # the formats whose strings are loops of their own (a URI's scheme, authority, path,
            # query and fragment; an e-mail address): a schema's first such
            # string walks the whole trie through each part's automaton (~0.5 ms a part).  A mask
            # at every byte of a typical value walks the parts a value goes through.
            for fmt, value in FORMAT_SAMPLES.items():
                m = Matcher(
                    compile_grammar(Grammar.from_json_schema({"type": "string", "format": fmt}), self)
                )
                for i in range(len(value)):
                    if not m.accept_bytes(value[i : i + 1]):
                        break
                    m.fill_bitmask(mask, 0)
        except CfgmaskError:  # an enclosing compile's deadline: the walks are only a speed-up
            return
        assert self._c_handle is not None
        self._c_handle.pin_walks()

    # ---- protocol ----------------------------------------------------------------------

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Vocabulary):
            return NotImplemented
        same = self.tokens == other.tokens and self.special_ids == other.special_ids
        return same and self.stop_ids == other.stop_ids

    def __hash__(self) -> int:
        return hash(self.fingerprint())

    def __getstate__(self) -> dict[str, Any]:
        return {
            "version": 1,
            "tokens": self.tokens,
            "special_ids": sorted(self.special_ids),
            "stop_ids": self.stop_ids,
            "scheme": self.scheme,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        if state.get("version") != 1:
            raise VocabularyError(f"unknown pickled Vocabulary version {state.get('version')!r}")
        self._set(
            tuple(state["tokens"]), frozenset(state["special_ids"]), tuple(state["stop_ids"]), state["scheme"]
        )

    def __repr__(self) -> str:
        n_text = self.size - len(self.special_ids)
        return (
            f"Vocabulary(size={self.size}, text_tokens={n_text}, special={len(self.special_ids)}, "
            f"stop_ids={self.stop_ids}, scheme={self.scheme!r})"
        )


def _flatten(node: Any) -> list[dict[str, Any]]:
    """A decoder / pre-tokenizer / normaliser config with its Sequence members inlined."""
    if not isinstance(node, dict):
        return []
    out = [node]
    for key in ("decoders", "pretokenizers", "normalizers"):
        for sub in node.get(key) or ():
            out += _flatten(sub)
    return out


def _read_tokenizers_json(backend: Any) -> tuple[dict[int, bytes], set[int], str]:
    """Bytes by id, special ids and scheme of a ``tokenizers.Tokenizer``, from its JSON."""
    cfg = json.loads(backend.to_str())
    model = cfg.get("model") or {}
    decoder, pre, norm = (_flatten(cfg.get(k)) for k in ("decoder", "pre_tokenizer", "normalizer"))
    dec_types = {d.get("type") for d in decoder}
    byte_fallback = bool(model.get("byte_fallback")) or "ByteFallback" in dec_types
    if "ByteLevel" in dec_types or (not decoder and any(p.get("type") == "ByteLevel" for p in pre)):
        scheme = "byte_level"
    elif any(
        c.get("type") == "Metaspace" or (c.get("type") in ("Replace", "Prepend") and "▁" in str(c))
        for c in decoder + pre + norm
    ):
        scheme = "sentencepiece"
    else:  # WordPiece and other word-level schemes: the piece's UTF-8, as is
        scheme = "plain"
    decode = _piece_decoder(scheme, byte_fallback)
    vocab: dict[str, int] = backend.get_vocab(with_added_tokens=False)
    by_id = {i: decode(p) for p, i in vocab.items()}
    special: set[int] = set()
    unk = model.get("unk_token")
    if isinstance(unk, str) and unk in vocab:
        special.add(vocab[unk])
    if isinstance(model.get("unk_id"), int):  # Unigram
        special.add(model["unk_id"])
    for added in cfg.get("added_tokens") or ():  # matched on the input text: they are their content
        by_id[int(added["id"])] = added["content"].encode()
        if added.get("special"):
            special.add(int(added["id"]))
    return by_id, special, scheme


def _read_slow_tokenizer(tokenizer: Any) -> tuple[dict[int, bytes], set[int], str]:
    """Bytes by id, special ids and scheme of a slow (pure Python) transformers tokenizer."""
    if hasattr(tokenizer, "sp_model"):
        scheme = "sentencepiece"
    else:
        scheme = "byte_level" if hasattr(tokenizer, "byte_encoder") else "plain"
    decode = _piece_decoder(scheme, scheme == "sentencepiece")
    pieces = tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))
    return {i: decode(p) for i, p in enumerate(pieces) if p is not None}, set(), scheme
