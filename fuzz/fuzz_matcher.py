"""Fuzz the matcher against the reference: ``python fuzz/fuzz_matcher.py [-max_total_time=300]``.

A random small grammar (tests/strategies.py: recursion of every kind, UTF-8 edges,
big repetitions) and vocabulary, then a random interleaving of fill / accept_token
(allowed or not) / accept_bytes / rollback / fork / reset / jump_forward.  Every mask
must equal tests/reference.py's bit for bit, and every answer must agree with it.
The fuzzer's bytes drive hypothesis's choices (``fuzz_one_input``), so atheris
mutates decisions rather than text.
"""

from __future__ import annotations

from collections.abc import Iterator

import _harness as H  # type: ignore[import-not-found]  # noqa: I001
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cfgmask
from tests.reference import ReferenceMatcher
from tests.strategies import SMALL, grammar_alphabet, grammars, vocabularies

OPS = ("fill", "accept", "accept", "accept_bad", "bytes", "rollback", "fork", "jump", "reset")


class Shadow:
    """What the matcher should be: the bytes so far, per accepted step, and termination."""

    def __init__(self) -> None:
        self.steps: list[bytes] = []
        self.terminated = False

    @property
    def prefix(self) -> bytes:
        return b"".join(self.steps)


def _expected_mask(ref: ReferenceMatcher, sh: Shadow, v) -> list[bool]:  # type: ignore[no-untyped-def]
    if sh.terminated:
        return [t in v.stop_ids for t in range(len(v.tokens))]
    return ref.mask(sh.prefix, v.tokens, v.stop_ids, v.special_ids)


def _mask(m: cfgmask.Matcher, size: int) -> list[bool]:
    out = cfgmask.allocate_bitmask(1, size)
    m.fill_bitmask(out)
    return [bool(b) for b in np.unpackbits(out.view(np.uint8), bitorder="little")[:size]]


@settings(database=None, deadline=None, suppress_health_check=list(HealthCheck), max_examples=1)
@given(grammars(SMALL, max_rules=4), st.data())
def check_matcher(g, data) -> None:  # type: ignore[no-untyped-def]
    v = data.draw(vocabularies(grammar_alphabet(g) or [b"a"]))
    ref = ReferenceMatcher(g)
    vocab = cfgmask.Vocabulary.from_token_bytes(
        v.tokens, stop_token_ids=v.stop_ids, special_token_ids=v.special_ids
    )
    try:
        compiled = cfgmask.compile(g, vocab, limits=H.LIMITS)
    except cfgmask.LimitError:
        return
    except cfgmask.GrammarError:
        assert not ref.is_prefix(b""), "compile refused a grammar whose language is not empty"
        return
    assert ref.is_prefix(b""), "an empty language compiled"
    m, sh = cfgmask.Matcher(compiled), Shadow()
    for op in data.draw(st.lists(st.sampled_from(OPS), max_size=14)):
        want = _expected_mask(ref, sh, v)
        if op == "fill":
            assert _mask(m, vocab.size) == want, f"mask after {sh.prefix!r}"
        elif op in ("accept", "accept_bad"):
            pool = [t for t, ok in enumerate(want) if ok == (op == "accept")]
            if not pool:
                continue
            t = data.draw(st.sampled_from(pool))
            ok = want[t] and not sh.terminated  # after a stop token nothing is accepted
            assert m.accept_token(t) == ok, f"accept {v.tokens[t]!r} after {sh.prefix!r}"
            if ok:
                sh.steps.append(b"" if t in v.stop_ids else v.tokens[t] or b"")
                sh.terminated = sh.terminated or t in v.stop_ids
        elif op == "bytes":
            text = data.draw(st.sampled_from(grammar_alphabet(g) or [b"a"]))
            ok = not sh.terminated and ref.is_prefix(sh.prefix + text)
            assert m.accept_bytes(text) == ok, f"accept_bytes {text!r} after {sh.prefix!r}"
            if ok:
                sh.steps.append(text)
        elif op == "rollback":
            k = data.draw(st.integers(0, len(sh.steps)))
            m.rollback(k)
            del sh.steps[len(sh.steps) - k :]
            sh.terminated = sh.terminated and k == 0
        elif op == "fork":
            f = m.fork()
            if data.draw(st.booleans()):
                m = f  # go on with the fork; the original is dropped
            else:
                assert _mask(f, vocab.size) == want
        elif op == "jump":
            forced = m.jump_forward_bytes()
            if forced:
                assert not sh.terminated and not ref.accepts(sh.prefix)
                assert ref.is_prefix(sh.prefix + forced)
                # forced: no other first byte is viable
                alt = [bytes([b]) for b in range(256) if b != forced[0]]
                assert not any(ref.is_prefix(sh.prefix + b) for b in alt)
        elif op == "reset":
            m.reset()
            sh = Shadow()
        assert m.num_tokens == len(sh.steps)
        assert m.is_accepting() == (sh.terminated or ref.accepts(sh.prefix))
    assert _mask(m, vocab.size) == _expected_mask(ref, sh, v)


def test_one_input(data: bytes) -> None:
    check_matcher.hypothesis.fuzz_one_input(data)


def seeds() -> Iterator[bytes]:
    yield from (bytes(range(i, i + 64)) for i in range(0, 192, 16))


if __name__ == "__main__":
    H.main(test_one_input, seeds)
