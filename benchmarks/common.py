"""Shared pieces of the benchmarks: one Llama-3 vocabulary for every engine, the engines
behind one small interface, timing statistics and JSON output.

Every engine is built from the same token bytes (quicktok ``decode_single_token_bytes``
for ids 0..128255) with the same stop tokens (128001 ``<|end_of_text|>``, 128009
``<|eot_id|>``).  The 256 special ids (128000..128255) are text-free for every engine, each
in that engine's own convention: cfgmask marks them special, xgrammar gets ``b""`` for them
(its marker for a token without text; given their bytes it would let ``<|eot_id|>`` appear
inside a JSON string), llguidance gets them with its ``\\xff`` prefix for special tokens.

Importing the package (benchmarks/__init__.py) sets every thread knob we know of to one thread,
before numpy loads; call :func:`single_thread` again before importing a peer.
"""

from __future__ import annotations

import json
import os
import platform
import re
import statistics
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from . import THREAD_VARS

LLAMA3_SIZE = 128_256
LLAMA3_STOPS = (128001, 128009)
LLAMA3_SPECIAL = range(128_000, 128_256)
RESULTS_DIR = Path(__file__).resolve().parent / "results"
GRAMMARS_DIR = Path(__file__).resolve().parent.parent / "grammars"


def single_thread() -> None:
    """One thread for everything that has a knob (set before the peers are imported; importing
    the package did it already, before numpy loaded)."""
    for var in THREAD_VARS:
        os.environ[var] = "1"


# ---- vocabulary -------------------------------------------------------------------------


@lru_cache(maxsize=1)
def _encoding() -> Any:
    import quicktok

    return quicktok.get_encoding("llama3")


@lru_cache(maxsize=1)
def llama3_token_bytes() -> tuple[bytes, ...]:
    """The bytes of every Llama-3 id, special tokens included (``b"<|eot_id|>"``)."""
    enc = _encoding()
    return tuple(enc.decode_single_token_bytes(i) for i in range(LLAMA3_SIZE))


def tokenize(text: str) -> list[int]:
    """Llama-3 BPE tokens of ``text`` (special-token text is encoded as plain text)."""
    return list(_encoding().encode_ordinary(text))


def token_repr(t: int) -> str:
    return repr(llama3_token_bytes()[t])


@dataclass(frozen=True)
class TokenSet:
    """A vocabulary as every engine is given it: the bytes of each id (``b""`` for an id
    without text), the stop ids, the special ids (text-free in every engine, each in its own
    convention) and the tokenizer that turns a document into ids."""

    name: str
    token_bytes: tuple[bytes, ...]
    stops: tuple[int, ...]
    special: frozenset[int]
    encode: Callable[[str], list[int]]

    @property
    def size(self) -> int:
        return len(self.token_bytes)


@lru_cache(maxsize=1)
def llama3() -> TokenSet:
    """The vocabulary every benchmark uses unless it says otherwise."""
    return TokenSet("llama3", llama3_token_bytes(), LLAMA3_STOPS, frozenset(LLAMA3_SPECIAL), tokenize)


# ---- grammar text adaptations --------------------------------------------------------------
# Each peer gets the same GBNF, except for spellings its reader does not take; a rewrite never
# changes the language, and the rewrites applied are recorded in the results.

_GBNF_TOKEN = re.compile(
    r"""(?P<comment>\#[^\n]*)|(?P<lit>"(?:\\.|[^"\\])*")|(?P<cls>\[(?:\\.|[^\]\\])*\])"""
    r"""|(?P<name>[a-zA-Z0-9_-]+)|(?P<nl>\r?\n)|(?P<sp>[ \t]+)|(?P<op>::=|.)""",
    re.S,
)
_RULE_START = re.compile(r"[ \t]*[a-zA-Z0-9_-]+[ \t]*::=")


def _gbnf_tokens(text: str) -> list[tuple[str, str]]:
    """(kind, text) pieces of a GBNF text, comments dropped; joined they give the grammar back."""
    out = []
    for m in _GBNF_TOKEN.finditer(text):
        if m.lastgroup != "comment":
            out.append((m.lastgroup or "op", m.group()))
    return out


def gbnf_for_xgrammar(text: str) -> tuple[str, list[str]]:
    """xgrammar's EBNF reader rejects an empty alternative (``ws ::= | " "``, as in llama.cpp's
    own json.gbnf, or ``( | x)``): spell it ``""``."""
    toks = _gbnf_tokens(text)
    out: list[str] = []
    changed = False
    for i, (kind, s) in enumerate(toks):
        out.append(s)
        if kind == "op" and s in ("::=", "|", "("):
            nxt = _next_solid(toks, i)
            if nxt[0] == "op" and nxt[1] in ("|", ")"):
                out.append(' ""')
                changed = True
    return "".join(out), (['empty alternative spelled ""'] if changed else [])


def lark_for_llguidance(text: str) -> tuple[str, list[str]]:
    """llguidance's Lark reader (regexes by the Rust ``regex`` syntax) rejects look-around, so the
    keyword terminals' ``(?!\\w)`` is dropped; this changes the language (llguidance's lexer is
    not longest-match across lexemes: it then takes ``SELECTa FROM b`` as ``SELECT a FROM b``).
    It honours only one ``%ignore``, so the two are joined into one alternation (same language)."""
    notes = []
    out, n = re.subn(r"\(\?!\\w\)/", "/", text)
    if n:
        notes.append(f"lookahead (?!\\w) dropped from {n} keyword terminals (changes the language)")
    ignores = re.findall(r"^%ignore /(.*)/\s*$", out, flags=re.M)
    if len(ignores) > 1:
        out = re.sub(r"^%ignore .*\n?", "", out, flags=re.M)
        out += "%ignore /" + "|".join(f"(?:{x})" for x in ignores) + "/\n"
        notes.append(f"{len(ignores)} %ignore lines joined into one")
    return out, notes


def gbnf_for_llguidance(text: str) -> tuple[str, list[str]]:
    """Two spellings that llguidance's GBNF-to-Lark converter does not take:

    * outside parentheses a newline ends a rule (as in llama.cpp), so a rule continued on an
      indented line that starts with ``|`` (which cfgmask and xgrammar read) is joined onto one
      line;
    * it folds names to one case (``limit`` and ``LIMIT`` collide), so colliding names are
      renamed."""
    notes: list[str] = []
    toks = _gbnf_tokens(text)
    rules = [s for i, (k, s) in enumerate(toks) if k == "name" and _next_solid(toks, i)[1] == "::="]
    renames: dict[str, str] = {}
    seen: dict[str, str] = {}
    for name in rules:
        key = _lark_key(name)
        if key in seen and seen[key] != name:
            n = 2
            while _lark_key(f"{name}-{n}") in seen:
                n += 1
            renames[name] = f"{name}-{n}"
            key = _lark_key(renames[name])
        seen[key] = name
    if renames:
        notes.append("renamed (case clash): " + ", ".join(f"{a}->{b}" for a, b in renames.items()))
    body = "".join(renames.get(s, s) if k == "name" else s for k, s in toks)
    lines: list[str] = []
    joined = False
    for line in body.splitlines():
        cont = line[:1] in (" ", "\t") and line.strip() and not _RULE_START.match(line)
        if cont and lines and lines[-1].strip():
            lines[-1] = lines[-1].rstrip() + " " + line.strip()
            joined = True
        else:
            lines.append(line.rstrip())
    if joined:
        notes.append("indented continuation lines joined")
    return "\n".join(lines) + "\n", notes


def _next_solid(toks: list[tuple[str, str]], i: int) -> tuple[str, str]:
    """The first piece after ``toks[i]`` that is not white space (no copy of the rest: a grammar
    of 10,000 rules has 300,000 pieces)."""
    for j in range(i + 1, len(toks)):
        if toks[j][0] not in ("sp", "nl"):
            return toks[j]
    return ("", "")


def _lark_key(name: str) -> str:
    """The name llguidance's converter gives a rule, up to case."""
    return re.sub(r"([a-z])([A-Z])", r"\1_\2", name.replace("-", "_")).lower()


# ---- engines ------------------------------------------------------------------------------


class LarkText(str):
    """Grammar text in Lark's syntax (bench_gbnf's ``sql.lark``): each engine compiles it as
    Lark, not as GBNF, or says it cannot."""


class Engine:
    """One engine behind the calls the benchmark makes.  ``setup_s`` is the one-off cost of
    building its vocabulary / tokenizer object (not part of any grammar's compile time)."""

    name = ""
    version = ""
    setup_s = 0.0

    def adapt(self, gbnf: str) -> tuple[str, list[str]]:
        return gbnf, []

    def compile(self, gbnf: str) -> Any:  # text already adapted; returns a compiled grammar
        raise NotImplementedError

    def clear_caches(self) -> None:
        """Forget whatever a later compile of the same grammar could reuse."""

    def matcher(self, compiled: Any) -> Any:
        raise NotImplementedError

    def new_mask(self) -> Any:
        raise NotImplementedError

    def fill(self, m: Any, mask: Any) -> None:
        raise NotImplementedError

    def accept(self, m: Any, token: int) -> bool:
        raise NotImplementedError

    def is_accepting(self, m: Any) -> bool:
        raise NotImplementedError

    def mask_words(self, mask: Any) -> np.ndarray:
        """The int32 words of row 0 (a view where possible)."""
        return np.asarray(mask)[0]


class CfgmaskMatcherOps:
    """What every cfgmask engine of the benchmarks does with a ``cfgmask.Matcher``."""

    def fill(self, m: Any, mask: Any) -> None:
        m.fill_bitmask(mask, 0)

    def accept(self, m: Any, token: int) -> bool:
        return bool(m.accept_token(token))

    def is_accepting(self, m: Any) -> bool:
        return bool(m.is_accepting())


class CfgmaskEngine(CfgmaskMatcherOps, Engine):
    name = "cfgmask"

    def __init__(self, tokens: TokenSet | None = None) -> None:
        import cfgmask

        self._cm = cfgmask
        self.tokens = tokens = tokens or llama3()
        self.version = cfgmask.__version__
        t0 = time.perf_counter()
        self.vocab = cfgmask.Vocabulary.from_token_bytes(
            list(tokens.token_bytes), stop_token_ids=tokens.stops, special_token_ids=sorted(tokens.special)
        )
        self.vocab._handle()  # the token trie: built once per vocabulary, like the peers' tokenizers
        self.setup_s = time.perf_counter() - t0

    def compile(self, gbnf: str, warm: bool = False) -> Any:
        front = self._cm.Grammar.from_lark if isinstance(gbnf, LarkText) else self._cm.Grammar.from_gbnf
        return self._cm.compile(front(gbnf), self.vocab, warm=warm)

    def clear_caches(self) -> None:
        """A cold start: no tables, no automaton fragments, no loop walks kept by the vocabulary."""
        self._cm.clear_caches()

    def matcher(self, compiled: Any) -> Any:
        return self._cm.Matcher(compiled)

    def new_mask(self) -> Any:
        return self._cm.allocate_bitmask(1, self.tokens.size)


class XGrammarEngine(Engine):
    name = "xgrammar"

    def __init__(self, tokens: TokenSet | None = None) -> None:
        import torch
        import xgrammar as xgr

        torch.set_num_threads(1)
        self._xgr = xgr
        self.tokens = tokens = tokens or llama3()
        self.version = _dist_version("xgrammar")
        toks = [b"" if i in tokens.special else t for i, t in enumerate(tokens.token_bytes)]
        t0 = time.perf_counter()
        self.info = xgr.TokenizerInfo(toks, xgr.VocabType.RAW, stop_token_ids=list(tokens.stops))
        self.compiler = xgr.GrammarCompiler(self.info, max_threads=1, cache_enabled=False)
        self.setup_s = time.perf_counter() - t0

    def adapt(self, gbnf: str) -> tuple[str, list[str]]:
        return (gbnf, []) if isinstance(gbnf, LarkText) else gbnf_for_xgrammar(gbnf)

    def compile(self, gbnf: str) -> Any:
        if isinstance(gbnf, LarkText):
            raise NotImplementedError("xgrammar reads EBNF, not Lark grammars")
        return self.compiler.compile_grammar(self._xgr.Grammar.from_ebnf(gbnf))

    def clear_caches(self) -> None:
        self.compiler.clear_cache()

    def matcher(self, compiled: Any) -> Any:
        return self._xgr.GrammarMatcher(compiled)

    def new_mask(self) -> Any:
        return self._xgr.allocate_token_bitmask(1, self.tokens.size)

    def fill(self, m: Any, mask: Any) -> None:
        m.fill_next_token_bitmask(mask, 0)

    def accept(self, m: Any, token: int) -> bool:
        return bool(m.accept_token(token))

    def is_accepting(self, m: Any) -> bool:
        return bool(m.is_completed())

    def mask_words(self, mask: Any) -> np.ndarray:
        return mask.numpy()[0]


class _QuicktokForLlguidance:
    """What ``llguidance.TokenizerWrapper`` reads: token bytes, EOS/BOS ids and an encoder."""

    def __init__(self, tokens: TokenSet) -> None:
        self.eos_token_id = tokens.stops[-1]
        self.bos_token_id = 128000 if tokens.name == "llama3" else None
        self.special_token_ids = sorted(tokens.special)
        self.tokens = [b"\xff" + t if i in tokens.special else t for i, t in enumerate(tokens.token_bytes)]
        self._encode = tokens.encode

    def __call__(self, text: str) -> list[int]:
        if not isinstance(text, str):
            raise TypeError("str only")  # TokenizerWrapper then passes str
        return self._encode(text)


class LlguidanceMatcherOps:
    """What every llguidance engine of the benchmarks does with a matcher (``self._llnp``:
    ``llguidance.numpy``); the "compiled grammar" is a ready matcher, handed out as copies."""

    _llnp: Any

    def matcher(self, compiled: Any) -> Any:
        return compiled.deep_copy()

    def fill(self, m: Any, mask: Any) -> None:
        self._llnp.fill_next_token_bitmask(m, mask, 0)

    def accept(self, m: Any, token: int) -> bool:
        return bool(m.consume_token(token))

    def is_accepting(self, m: Any) -> bool:
        return bool(m.is_accepting())

    def error(self, m: Any) -> str:
        return str(m.get_error()) if m.is_error() else ""


class LlguidanceEngine(LlguidanceMatcherOps, Engine):
    name = "llguidance"

    def __init__(self, tokens: TokenSet | None = None) -> None:
        import llguidance
        import llguidance.numpy as llnp

        self._llg, self._llnp = llguidance, llnp
        self.tokens = tokens = tokens or llama3()
        self.version = llguidance.__version__
        t0 = time.perf_counter()
        self.tokenizer = llguidance.LLTokenizer(
            llguidance.TokenizerWrapper(_QuicktokForLlguidance(tokens)), eos_token=list(tokens.stops)
        )
        self.setup_s = time.perf_counter() - t0

    def adapt(self, gbnf: str) -> tuple[str, list[str]]:
        if isinstance(gbnf, LarkText):
            text, notes = lark_for_llguidance(gbnf)
            return LarkText(text), notes
        return gbnf_for_llguidance(gbnf)

    def compile(self, gbnf: str) -> Any:
        """llguidance compiles when a matcher is made: the "compiled grammar" is a ready
        matcher, and :meth:`matcher` hands out copies of it.  Lark text goes to its Lark
        front end (its own dialect: terminals are lexemes of one lexer)."""
        kind = "lark" if isinstance(gbnf, LarkText) else "gbnf"
        m = self._llg.LLMatcher(self.tokenizer, self._llg.grammar_from(kind, gbnf), log_level=0)
        if m.is_error():
            raise RuntimeError(m.get_error())
        return m

    def new_mask(self) -> Any:
        return self._llnp.allocate_token_bitmask(1, self.tokens.size)


ENGINE_CLASSES: dict[str, type[Engine]] = {
    "cfgmask": CfgmaskEngine,
    "xgrammar": XGrammarEngine,
    "llguidance": LlguidanceEngine,
}


def _dist_version(name: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return "?"


def load_engines(names: Iterable[str]) -> tuple[list[Engine], dict[str, str]]:
    """The engines that load; the others with the reason (a peer may not be installed)."""
    engines: list[Engine] = []
    missing: dict[str, str] = {}
    for name in names:
        try:
            engines.append(ENGINE_CLASSES[name]())
        except ImportError as e:
            missing[name] = f"not installed ({e})"
    return engines, missing


# ---- masks --------------------------------------------------------------------------------


def allowed_ids(words: np.ndarray) -> np.ndarray:
    """The token ids whose bit is set in one row of int32 words."""
    bits = np.unpackbits(np.ascontiguousarray(words).view(np.uint8), bitorder="little")
    return np.flatnonzero(bits[:LLAMA3_SIZE])


# ---- statistics ---------------------------------------------------------------------------


@dataclass
class Stats:
    """Microseconds."""

    n: int
    mean: float
    p50: float
    p99: float
    max: float

    @classmethod
    def of_ns(cls, samples_ns: Sequence[int] | np.ndarray) -> Stats | None:
        if len(samples_ns) == 0:
            return None
        a = np.asarray(samples_ns, dtype=np.float64) / 1e3
        return cls(
            n=int(a.size),
            mean=float(a.mean()),
            p50=float(np.percentile(a, 50)),
            p99=float(np.percentile(a, 99)),
            max=float(a.max()),
        )


def median_ms(seconds: Sequence[float]) -> float:
    return statistics.median(seconds) * 1e3


def fmt(x: float | None, width: int = 9) -> str:
    if x is None:
        return "-".rjust(width)
    if x >= 1000:
        return f"{x:,.0f}".rjust(width)
    if x >= 10:
        return f"{x:.1f}".rjust(width)
    return f"{x:.2f}".rjust(width)


# ---- output -------------------------------------------------------------------------------


def environment(engines: Sequence[Engine]) -> dict[str, Any]:
    return {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "processor": _cpu_model(),
        "cpus": os.cpu_count(),
        "engines": {e.name: {"version": e.version, "vocab_setup_s": round(e.setup_s, 3)} for e in engines},
        "threads": {v: os.environ.get(v) for v in THREAD_VARS},
        "cfgmask_commit": _git_commit(),
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


def _git_commit() -> str | None:
    """HEAD of the checkout being measured, with "+dirty" when it has uncommitted changes."""
    import subprocess

    root = GRAMMARS_DIR.parent
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return head + ("+dirty" if dirty else "")


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def write_results(name: str, payload: dict[str, Any]) -> Path:
    RESULTS_DIR.mkdir(exist_ok=True)
    path = RESULTS_DIR / f"{name}.json"
    path.write_text(json.dumps(payload, indent=1, default=_jsonable) + "\n")
    return path


def _jsonable(o: Any) -> Any:
    if isinstance(o, Stats):
        return asdict(o)
    if isinstance(o, np.integer | np.floating):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    raise TypeError(type(o).__name__)
