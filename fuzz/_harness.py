"""What every fuzz target shares: the allowed outcomes, a probe of a compiled grammar,
seed corpora from tests/corpora, a dependency-free mutator for smoke runs, and the
atheris entry point.

A target is a module with ``test_one_input(data: bytes) -> None`` and ``seeds()``.
An input may end in a result or a typed error (``CfgmaskError``: GrammarError,
LimitError, ...); anything else -- another exception, a wrong mask, a crash of the
process -- is a finding.
"""

from __future__ import annotations

import random
import sys
import tempfile
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORPORA = ROOT / "tests" / "corpora"
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import cfgmask  # noqa: E402
from cfgmask import CompileLimits  # noqa: E402

# Tight limits: a fuzz input must be cheap, and hitting a limit is an allowed outcome.
LIMITS = CompileLimits(
    deadline_ms=2000, max_dfa_states=4000, max_total_states=40_000, max_grammar_bytes=1 << 16
)
TOKENS = [bytes([i]) for i in range(256)] + [b"ab", "é".encode(), b'{"', b'":', b"\xc3", b"\xa9a", None]
STOP = len(TOKENS) - 1
VOCAB = cfgmask.Vocabulary.from_token_bytes(TOKENS, stop_token_ids=[STOP])
EXPECTED = (cfgmask.CfgmaskError,)  # GrammarError, LimitError, VocabularyError, MatcherError


def probe(grammar: cfgmask.Grammar, data: bytes, steps: int = 6) -> None:
    """Compile and walk a few allowed tokens, checking the mask's promises on the way.

    With every single byte a token, a viable state always allows some token (a byte
    that continues, or the stop token where the text is complete): an empty mask is a
    dead end, a bug.  Every allowed token must be accepted."""
    try:
        compiled = cfgmask.compile(grammar, VOCAB, limits=LIMITS)
    except EXPECTED:
        return
    m = cfgmask.Matcher(compiled)
    rng = random.Random(data)
    for _ in range(steps):
        allowed = [int(t) for t in m.allowed_tokens()]
        assert allowed, "dead end: no token allowed, not even the stop token"
        assert (STOP in allowed) == m.is_accepting(), "stop token allowed iff accepting"
        t = rng.choice(allowed)
        if t == STOP:
            assert m.accept_token(t) and m.is_terminated()
            return
        assert m.accept_token(t), f"allowed token {TOKENS[t]!r} was rejected"
    if m.num_tokens:
        m.rollback(1)
        assert m.allowed_tokens().size


def front_end(parse: Callable[[], cfgmask.Grammar], data: bytes) -> None:
    """Parse (typed errors allowed), then probe."""
    try:
        grammar = parse()
    except EXPECTED:
        return
    probe(grammar, data)


def text_of(data: bytes) -> str:
    """Bytes as text; invalid UTF-8 survives as lone surrogates (surrogateescape)."""
    return data.decode("utf-8", "surrogateescape")


def files(*patterns: str, max_bytes: int = 1 << 16) -> Iterator[bytes]:
    for pattern in patterns:
        for p in sorted(ROOT.glob(pattern)):
            if p.is_file() and p.stat().st_size <= max_bytes:
                yield p.read_bytes()


# ---- smoke runs without atheris -----------------------------------------------------

_SPICE = [b"(", b")", b"|", b"*", b"+", b"?", b"{", b"}", b"[", b"]", b"^", b"-", b"\\", b'"', b"::=",
          b"{0,99999}", b"\xff", b"\xc3", b"\x00", b"\n", b":", b",", b"$ref", b"#/", b"0" * 12]  # fmt: skip


def mutate(data: bytes, rng: random.Random) -> bytes:
    """A small random edit: flip, insert, delete, duplicate a slice, or splice syntax in."""
    b = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(5)
        i = rng.randint(0, len(b))
        if op == 0 and b:
            b[min(i, len(b) - 1)] = rng.randrange(256)
        elif op == 1:
            b[i:i] = rng.choice(_SPICE)
        elif op == 2 and b:
            del b[i : i + rng.randint(1, 8)]
        elif op == 3 and b:
            j = rng.randint(0, len(b))
            b[i:i] = b[min(i, j) : max(i, j)][:64]
        else:
            b[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 4)))
    return bytes(b)


def smoke(
    target: Callable[[bytes], None], seeds: list[bytes], n: int, seed: int = 0, max_seed_bytes: int = 4096
) -> int:
    """Run ``n`` inputs: the small seeds, then mutations of them.  Returns the count run."""
    rng = random.Random(seed)
    pool = [s for s in seeds if len(s) <= max_seed_bytes] or [b""]
    done = 0
    for s in pool[: n // 4]:
        target(s)
        done += 1
    while done < n:
        target(mutate(rng.choice(pool), rng))
        done += 1
    return done


# ---- atheris -------------------------------------------------------------------------


def main(target: Callable[[bytes], None], seeds: Callable[[], Iterator[bytes]]) -> None:
    """``python fuzz/fuzz_X.py [libFuzzer flags] [corpus dir]``: coverage-guided fuzzing with
    atheris (Python coverage; the C core is not instrumented for coverage, but a crash in
    it kills the run and the input is saved).  Without a corpus directory, one is made
    from the seeds."""
    import atheris

    args = list(sys.argv)
    if not any(not a.startswith("-") for a in args[1:]):
        corpus = Path(tempfile.mkdtemp(prefix="cfgmask-fuzz-"))
        for i, s in enumerate(seeds()):
            (corpus / f"seed{i:05d}").write_bytes(s)
        args.append(str(corpus))
        print(f"seed corpus: {corpus}", file=sys.stderr)
    warnings.simplefilter("ignore", FutureWarning)  # re's "possible nested set" on mutated patterns
    atheris.instrument_all()  # Python coverage of everything loaded: cfgmask, its front ends, lark
    atheris.Setup(args, target)
    atheris.Fuzz()
