"""``GrammarCache``: compiled grammars kept by (kind, source, options, vocabulary), in memory
with an LRU bound and optionally in a directory that several processes share.

```python
cache = cfgmask.GrammarCache(max_entries=128, directory="~/.cache/cfgmask/grammars")
compiled = cache.get("json_schema", schema_text, vocab, {"whitespace": "compact"})
```

A serving process sees the same few schemas over and over; a restarted or scaled-out one sees
the ones its peers already compiled.  ``get`` answers from memory (no work), else from the
directory (the automaton tables are read back and bound to the vocabulary, skipping the
automaton build), else it compiles and writes the tables there.

What is on disk is the automaton tables of ``compile`` (numpy arrays; never pickles), in one
file per key, ``<directory>/v<FORMAT>/<key>.cfgm``:

    magic "CFGMASK-TABLES\\0", u32 format, u32 header length, header (JSON: the key's fields,
    the array names, dtypes and shapes), the arrays' bytes, sha256 of everything before it

The key hashes the grammar's kind, source and options, the vocabulary's fingerprint and this
cfgmask's build (its version and the hash of its compiled core), so a new cfgmask never reads
what an old one wrote, even at the same format number.  A file is written to a temporary name
in the same directory and renamed into place (atomic on POSIX and Windows), so a reader in
another process sees a whole file or none; two processes compiling the same grammar at once
both write, and the last rename wins with equal content.  A file that fails any check (magic,
format, header, sizes, checksum) is ignored and rewritten; the C core checks the tables' shapes
and ranges again when it binds them, so nothing read back is trusted.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
import tempfile
import threading
from collections import OrderedDict
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np

from .compile import CompiledGrammar, CompileLimits, MatcherLimits, Tables
from .compile import compile as compile_grammar
from .errors import GrammarError
from .grammar import Grammar
from .vocab import Vocabulary

__all__ = ["FORMAT_VERSION", "KINDS", "CacheStats", "GrammarCache", "parse_grammar"]

FORMAT_VERSION = 1
_MAGIC = b"CFGMASK-TABLES\0"
_HEAD = struct.Struct("<II")

# kind -> the options its front end takes (name -> type)
KINDS: dict[str, dict[str, type]] = {
    "json_schema": {"whitespace": str, "canonical": bool, "strict": bool},
    "json": {"whitespace": str},
    "gbnf": {"start": str},
    "lark": {"start": str},
    "regex": {"flavor": str},
    "ebnf": {"start": str},
    "structural_tag": {"whitespace": str, "canonical": bool, "strict": bool},
}


def parse_grammar(kind: str, source: Any, options: dict[str, Any] | None = None) -> Grammar:
    """The front end of ``kind`` on ``source`` (text; a JSON Schema or structural tag may also
    be an object).  Raises :class:`GrammarError` for an unknown kind or option, or a bad source."""
    opts = _check_options(kind, options or {})
    if kind == "json_schema":
        return Grammar.from_json_schema(source, **opts)
    if kind == "json":
        from .frontends.json_schema import builtin_json

        return Grammar(builtin_json(opts.get("whitespace", "default")))
    if not isinstance(source, str) and kind != "structural_tag":
        raise GrammarError(f"a {kind} grammar must be text, not {type(source).__name__}")
    if kind == "gbnf":
        return Grammar.from_gbnf(source, **opts)
    if kind == "lark":
        return Grammar.from_lark(source, **opts)
    if kind == "regex":
        return Grammar.from_regex(source, **opts)
    if kind == "ebnf":
        return Grammar.from_ebnf(source, root=opts.get("start", "root"))
    return Grammar.structural_tag(source, **opts)


def _check_options(kind: str, options: dict[str, Any]) -> dict[str, Any]:
    if kind not in KINDS:
        raise GrammarError(f"unknown grammar kind {kind!r}; expected one of {', '.join(KINDS)}")
    allowed = KINDS[kind]
    for name, value in options.items():
        if name not in allowed:
            known = ", ".join(allowed) or "none"
            raise GrammarError(f"option {name!r} does not apply to {kind} grammars (options: {known})")
        if not isinstance(value, allowed[name]):
            raise GrammarError(
                f"option {name!r} must be {allowed[name].__name__}, not {type(value).__name__} ({value!r})"
            )
    return dict(options)


def source_text(kind: str, source: Any) -> str:
    """The source as the text the key hashes: a JSON object is dumped with its key order kept
    (canonical schemas generate properties in that order)."""
    if isinstance(source, str):
        return source
    if kind in ("json_schema", "structural_tag"):
        return json.dumps(source, ensure_ascii=False, separators=(",", ":"))
    if kind == "json":
        return ""
    raise GrammarError(f"a {kind} grammar must be text, not {type(source).__name__}")


@dataclass
class CacheStats:
    """``hits`` from memory, ``disk_hits`` read back, ``misses`` compiled, ``disk_writes``,
    ``disk_rejects`` files that failed a check (ignored and rewritten)."""

    hits: int = 0
    disk_hits: int = 0
    misses: int = 0
    disk_writes: int = 0
    disk_rejects: int = 0


class GrammarCache:
    """Compiled grammars by (kind, source, options, vocabulary fingerprint).

    ``max_entries``: compiled grammars kept in memory, least recently used dropped first.
    ``directory``: where tables are shared across processes and restarts (None: memory only).
    ``limits`` / ``matcher_limits``: as for :func:`cfgmask.compile`; a grammar that does not
    compile under them raises the same errors here, and nothing is cached for it.
    Thread-safe; a compile runs outside the lock.
    """

    def __init__(
        self,
        max_entries: int = 128,
        directory: str | os.PathLike[str] | None = None,
        *,
        limits: CompileLimits | None = None,
        matcher_limits: MatcherLimits | None = None,
    ) -> None:
        if max_entries < 1:
            raise ValueError(f"max_entries must be >= 1, got {max_entries}")
        self.max_entries = max_entries
        self.directory = None if directory is None else Path(directory).expanduser() / f"v{FORMAT_VERSION}"
        self.limits = limits or CompileLimits()
        self.matcher_limits = matcher_limits or MatcherLimits()
        self.stats = CacheStats()
        self._lru: OrderedDict[str, CompiledGrammar] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._lru)

    def key(self, kind: str, source: Any, vocab: Vocabulary, options: dict[str, Any] | None = None) -> str:
        """The hex key of an entry (also its file name)."""
        fields_ = [
            FORMAT_VERSION,
            build_id(),
            kind,
            source_text(kind, source),
            sorted((options or {}).items()),
            vocab.fingerprint(),
            repr(self.limits),
            repr(self.matcher_limits),
        ]
        return hashlib.sha256(
            json.dumps(fields_, ensure_ascii=False).encode("utf-8", "surrogatepass")
        ).hexdigest()

    def get(
        self, kind: str, source: Any, vocab: Vocabulary, options: dict[str, Any] | None = None
    ) -> CompiledGrammar:
        """The compiled grammar, from memory, from the directory, or compiled now."""
        key = self.key(kind, source, vocab, options)
        with self._lock:
            hit = self._lru.get(key)
            if hit is not None:
                self._lru.move_to_end(key)
                self.stats.hits += 1
                return hit
        grammar = parse_grammar(kind, source, options)
        compiled = self._read(key, grammar, vocab)
        if compiled is None:
            compiled = compile_grammar(grammar, vocab, limits=self.limits, matcher_limits=self.matcher_limits)
            with self._lock:
                self.stats.misses += 1
            self._write(key, compiled.tables)
        with self._lock:
            self._lru[key] = compiled
            self._lru.move_to_end(key)
            while len(self._lru) > self.max_entries:
                self._lru.popitem(last=False)
        return compiled

    def clear(self) -> None:
        """Forget what is in memory (the directory stays)."""
        with self._lock:
            self._lru.clear()

    # ---- disk --------------------------------------------------------------------------

    def path(self, key: str) -> Path | None:
        return None if self.directory is None else self.directory / f"{key}.cfgm"

    def _read(self, key: str, grammar: Grammar, vocab: Vocabulary) -> CompiledGrammar | None:
        path = self.path(key)
        if path is None:
            return None
        try:
            data = path.read_bytes()
        except OSError:
            return None
        try:
            tables = decode_tables(data, key)
            if tables.max_token_id >= vocab.size:
                raise ValueError("a token id out of range")
            compiled = CompiledGrammar(grammar, vocab, tables, self.matcher_limits)
        except (ValueError, KeyError, TypeError, struct.error, json.JSONDecodeError, UnicodeDecodeError):
            with self._lock:
                self.stats.disk_rejects += 1
            return None  # a corrupt or foreign file: compile and overwrite it
        with self._lock:
            self.stats.disk_hits += 1
        return compiled

    def _write(self, key: str, tables: Tables) -> None:
        path = self.path(key)
        if path is None:
            return
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{key[:16]}.", suffix=".tmp", dir=path.parent)
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(encode_tables(tables, key))
                os.replace(tmp, path)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
        except OSError:
            return  # a read-only or full disk: the cache is an optimisation, serve anyway
        with self._lock:
            self.stats.disk_writes += 1


_ARRAYS = [f.name for f in fields(Tables) if f.name not in ("rule_names", "start_rule", "stats")]


def encode_tables(tables: Tables, key: str) -> bytes:
    """The file format of the module docstring."""
    arrays = [np.ascontiguousarray(getattr(tables, name)) for name in _ARRAYS]
    header = {
        "key": key,
        "rule_names": list(tables.rule_names),
        "start_rule": int(tables.start_rule),
        "stats": {k: int(v) for k, v in tables.stats.items()},
        "arrays": [[n, a.dtype.str, list(a.shape)] for n, a in zip(_ARRAYS, arrays, strict=True)],
    }
    head = json.dumps(header).encode()
    body = b"".join([_MAGIC, _HEAD.pack(FORMAT_VERSION, len(head)), head, *(a.tobytes() for a in arrays)])
    return body + hashlib.sha256(body).digest()


def decode_tables(data: bytes, key: str) -> Tables:
    """Tables from :func:`encode_tables`' bytes; ValueError if anything does not check out."""
    if len(data) < len(_MAGIC) + _HEAD.size + 32 or not data.startswith(_MAGIC):
        raise ValueError("not a cfgmask tables file")
    body, digest = data[:-32], data[-32:]
    if hashlib.sha256(body).digest() != digest:
        raise ValueError("checksum mismatch")
    version, n_head = _HEAD.unpack_from(body, len(_MAGIC))
    if version != FORMAT_VERSION:
        raise ValueError(f"format {version}, expected {FORMAT_VERSION}")
    at = len(_MAGIC) + _HEAD.size
    header = json.loads(body[at : at + n_head])
    if header.get("key") != key:
        raise ValueError("the file belongs to another key")
    at += n_head
    names = [a[0] for a in header["arrays"]]
    if names != _ARRAYS:
        raise ValueError("unexpected arrays")
    values: dict[str, Any] = {}
    for name, dtype, shape in header["arrays"]:
        dt = np.dtype(dtype)
        if dt.kind not in "iu" or not all(isinstance(s, int) and s >= 0 for s in shape):
            raise ValueError(f"bad array {name}")
        n = dt.itemsize * int(np.prod(shape, dtype=np.int64))
        if at + n > len(body):
            raise ValueError("truncated")
        values[name] = np.frombuffer(body, dtype=dt, count=n // dt.itemsize, offset=at).reshape(shape).copy()
        at += n
    if at != len(body):
        raise ValueError("trailing bytes")
    names_ = header["rule_names"]
    if not isinstance(names_, list) or not all(isinstance(s, str) for s in names_):
        raise ValueError("bad rule names")
    return Tables(
        rule_names=names_,
        start_rule=int(header["start_rule"]),
        stats={str(k): int(v) for k, v in header["stats"].items()},
        **values,
    )


_BUILD_ID: str | None = None


def build_id() -> str:
    """This cfgmask's version and a hash of its compiled core and Python sources: tables made
    by another build are never read back."""
    global _BUILD_ID
    if _BUILD_ID is None:
        from . import __version__, _core

        h = hashlib.sha256(__version__.encode())
        pkg = Path(__file__).parent
        for p in sorted([Path(_core.__file__ or ""), *pkg.rglob("*.py")]):
            try:
                h.update(p.read_bytes())
            except OSError:
                h.update(str(p).encode())
        _BUILD_ID = h.hexdigest()[:16]
    return _BUILD_ID
