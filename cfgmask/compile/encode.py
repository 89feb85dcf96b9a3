"""Pass 0: the IR as a hash-consed DAG, and its encoding for the C automaton builder.

Front ends share subtrees (one JSON string body for every string property), and passes
that walk the IR as a tree pay for every use.  Each distinct subtree gets an id (exact: a
node's key is its kind, its data and its children's ids) and the facts the passes need are
computed once per id.  A :class:`Session` is one compile's view of the DAG: ids by object,
and the encoded IR (csrc/cfgmask.h, ``CM_IR_*``) that C builds automata from.
"""

from __future__ import annotations

import functools
import threading
from array import array
from collections.abc import Callable, Sequence
from typing import Any

from .. import deadline, ir
from ..errors import GrammarError
from . import _dag
from ._dag import Deep as _Deep
from ._dag import TooBig

_LIT, _BYTES, _UTF8, _SEQ, _ALT, _REPEAT, _REF = 1, 2, 3, 4, 5, 6, 7  # CM_IR_* of csrc/cfgmask.h


_TOKEN = 9  # interned kind only: emitted as _REF to its label
_LOOKAHEAD = 10  # interned kind only: emitted as _REF to its marker rule
_WORDS = 11  # interned kind of ir.LiteralSet: emitted as CM_IR_WORDS
_CM_WORDS, _CM_WORDS_JSON = 9, 1  # CM_IR_WORDS and its flag CM_WORDS_JSON


_INF = 0xFFFFFFFF


# Names of the labels the compiler makes up.  A token terminal and a lookahead are IR nodes
# (ir.Token, ir.Lookahead); in the automata they are edges to a label, which C numbers by name
# (labels in name order), and a lookahead is a rule the parser calls (rule_la says which).  The
# names only order and tell the labels apart: what they stand for is kept beside them in the
# Session (token_sets, markers), never parsed back.  A token label sorts before every rule name.


def token_label(t: ir.Token) -> str:
    """The label of a token terminal (``<[1,2]>``, ``!<[3]>``)."""
    if not t.ids and not t.negated:
        raise GrammarError("a token terminal needs at least one token id")
    return "\x00tok:" + ("!" if t.negated else "") + ",".join(str(i) for i in sorted(set(t.ids)))


def marker_name(forbidden: tuple[tuple[int, int], ...]) -> str:
    """The name of the marker rule of ``ir.Lookahead(forbidden)``."""
    return "<lookahead " + ",".join(f"{lo:x}-{hi:x}" for lo, hi in forbidden) + ">"


class Interner:
    """Ids of IR subtrees and per-id facts: tree size (a shared subtree counted per
    use), height, longest literal, rules referenced, references per rule (capped at 2)."""

    MAX_NODES = 1 << 18  # then a new generation (the ids are kept alive, and the GC walks them)

    def __init__(self, gen: int) -> None:
        self.gen = gen
        self.ids: dict[tuple, int] = {}  # type: ignore[type-arg]
        self.keys: list[tuple] = []  # type: ignore[type-arg]
        # per id: rules referenced and references per rule, None until first read through
        # ``refs`` and ``uses`` (made then: most nodes' are never read, docs/design.md §7)
        self._refs: list[frozenset[str] | None] = []
        self._uses: list[dict[str, int] | None] = []
        self.size0: dict[int, int] = {}  # size_estimate of reference-free subtrees
        self.lock = threading.RLock()  # a compiled walk holds it while its nodes call add
        self.facts = _dag.Facts(self, marker_name)  # the lists above, bound for the compiled walks
        # per id, read-only views of the facts kept in C (``_dag.Facts``): tree size, height,
        # longest literal, largest product of repetition bounds on a path down, no repetition
        self.count: Sequence[int] = _dag.Column(self.facts, 0)
        self.height: Sequence[int] = _dag.Column(self.facts, 1)
        self.maxlit: Sequence[int] = _dag.Column(self.facts, 2)
        self.maxprod: Sequence[int] = _dag.Column(self.facts, 3)
        self.plain: Sequence[bool] = _dag.Column(self.facts, 4)
        self.refs: Sequence[frozenset[str]] = _dag.Lazy(self.facts, False)
        self.uses: Sequence[dict[str, int]] = _dag.Lazy(self.facts, True)
        self.sizes = _dag.Sizes(self)  # repeats.dag_size over these ids, kept in size0
        # node ids by object id that every session of this generation looks up after its memo
        # (``Session.seed``, read only): the prelude's IR objects (kept alive by it) where the
        # prelude is installed (``cache._Prelude.install``), so the front end's constant bodies
        # (a JSON string's character, whitespace) are not walked again by every compile
        self.seed: dict[int, int] = {}

    def add(self, key: tuple) -> int:  # type: ignore[type-arg]
        """The id of the node ``key`` (its kind, its data and its children's ids), registered
        with its facts if new (compiled: ``_dag.Facts.add``; tests/reference_encode.py has the
        Python it follows)."""
        return self.facts.add(key)


@functools.lru_cache(maxsize=4096)
def _utf8_code(ranges: tuple[tuple[int, int], ...]) -> tuple[int, ...]:
    """The code of a character class: its ranges, then its UTF-8 byte sequences
    (``utf8.byte_sequences``, compiled: the Python construction cost 20 us for a JSON
    string's character class, a few of them in every cold compile)."""
    return _dag.utf8_code(ranges)


def _words_code(words: tuple[bytes, ...], json: bool) -> array[int]:
    """CM_IR_WORDS [op, flags, n_words, n_bytes, lengths, the bytes packed 4 a uint32]."""
    blob = b"".join(words)
    if json:
        try:
            blob.decode("utf-8")  # strict: no surrogates either
        except UnicodeDecodeError:
            raise GrammarError("a JSON literal set holds a word that is not UTF-8 text") from None
    if len(blob) >= _INF:
        raise GrammarError(f"a literal set of {len(blob)} bytes is too big")
    code = array("I", (_CM_WORDS, _CM_WORDS_JSON if json else 0, len(words), len(blob)))
    code.extend(array("I", map(len, words)))
    code.frombytes(blob + bytes(-len(blob) % 4))
    return code


class Session:
    """One compile's view of the DAG: node ids by object, and the encoded IR the C
    builder reads (nodes emitted on first use, names numbered on first use).

    A session opened by an :class:`~.cache.AutomatonCache` shares that cache's interner
    (its node ids are the cache's keys) and its automata; ``Session()`` has an interner of
    its own and builds everything."""

    def __init__(self, interner: Interner | None = None, cache: Any = None) -> None:
        self.interner = interner if interner is not None else Interner(-1)
        self.cache = cache
        self.gen = self.interner.gen
        # node ids by object id; ``keep`` holds the objects, so no id is reused meanwhile
        self.memo: dict[int, int] = {}
        # the prelude's objects' ids (``Interner.seed``), read through, never written: every
        # lookup of ``memo`` that misses asks it next, where a copy a session cost a cold
        # compile ~10 K instructions and the cache lines of ~200 entries (docs/design.md §7)
        self.seed: dict[int, int] = self.interner.seed
        self.keep: list[ir.Expr] = []
        self._next_check = 1024
        self.code = array("I")
        self.offsets = _dag.Offsets()  # node id -> its offset in ``code``
        self.names: list[str] = []
        self.name_idx: dict[str, int] = {}
        self._rank: array[int] | None = None
        self._sorted: list[str] = []
        self.roots: dict[str, int] = {}  # rule -> id, the grammar given to prepare()
        self.tokens: set[tuple[tuple[int, ...], bool]] = set()  # token terminals seen
        self.token_sets: dict[str, tuple[bool, list[int]]] = {}  # label -> (negated, sorted ids)
        self.markers: dict[str, tuple[tuple[int, int], ...]] = {}  # marker rule -> forbidden chars
        self.literal_sets = False  # an ir.LiteralSet was seen (components.outline_sets)

    # -- ids

    def cid(self, root: ir.Expr, max_nodes: int | None = None) -> int:
        """The id of ``root`` (interned with its subtree if new).  Raises TooBig past
        ``max_nodes`` nodes visited in this session."""
        got = self.known(root)
        if got is not None:
            return got
        self.max_nodes = max_nodes
        try:
            return _dag.intern(self, root)
        except _Deep:  # the rest without recursion (what is done is memoized)
            return self._cid_iter(root, max_nodes)

    max_nodes: int | None = None

    def known(self, e: ir.Expr) -> int | None:
        """The id of ``e`` if this session or the prelude (``seed``) has met it, else None."""
        got = self.memo.get(id(e))
        return self.seed.get(id(e)) if got is None else got

    def cids(self, rules: dict[str, ir.Expr], max_nodes: int | None = None) -> dict[str, int]:
        """``cid`` of every rule body, by rule name."""
        self.max_nodes = max_nodes
        return _dag.intern_all(self, rules)

    def _cid_iter(self, root: ir.Expr, max_nodes: int | None) -> int:
        memo = self.memo
        got = self.known(root)
        if got is not None:
            return got
        seed = self.seed

        def look(x: object) -> int | None:  # ``known``, its dicts bound once
            g = memo.get(id(x))
            return seed.get(id(x)) if g is None else g

        interner = self.interner
        ids = interner.ids
        stack = [root]
        while stack:
            e = stack[-1]
            got = look(e)
            if got is not None:
                stack.pop()
                continue
            t = type(e)
            key: tuple  # type: ignore[type-arg]
            if t is ir.Seq or t is ir.Alt or (t is not ir.Repeat and isinstance(e, (ir.Seq, ir.Alt))):
                kids = []
                missing = False
                for x in e.items:  # type: ignore[attr-defined]
                    g = look(x)
                    if g is None:
                        stack.append(x)
                        missing = True
                    else:
                        kids.append(g)
                if missing:
                    continue
                key = (_SEQ if isinstance(e, ir.Seq) else _ALT, tuple(kids))
            elif isinstance(e, ir.Repeat):
                g = look(e.item)
                if g is None:
                    stack.append(e.item)
                    continue
                key = (_REPEAT, g, e.lo, e.hi)
            elif isinstance(e, ir.Literal):
                key = (_LIT, e.data)
            elif isinstance(e, ir.Ref):
                key = (_REF, e.name)
            elif isinstance(e, ir.CharClass):
                key = (_UTF8, e.ranges)
            elif isinstance(e, ir.ByteClass):
                key = (_BYTES, e.ranges)
            elif isinstance(e, ir.Token):
                key = (_TOKEN, e.ids, e.negated)
                self.tokens.add((e.ids, e.negated))
            elif isinstance(e, ir.Lookahead):
                key = (_LOOKAHEAD, e.forbidden)
                self.markers[marker_name(e.forbidden)] = e.forbidden
            elif isinstance(e, ir.LiteralSet):
                key = (_WORDS, e.words, e.json)
                self.literal_sets = True
            elif isinstance(e, ir.TokenText):
                shown = e.text.decode("utf-8", "replace")
                raise GrammarError(
                    f"token {shown!r} is named by its text: compile the grammar for a vocabulary"
                )
            else:
                raise TypeError(f"not an IR expression: {e!r}")
            stack.pop()
            i = ids.get(key)
            if i is None:
                i = interner.add(key)
            memo[id(e)] = i
            self.keep.append(e)
            if max_nodes is not None and len(self.keep) > max_nodes:
                raise TooBig
            if not len(self.keep) & 1023:
                deadline.check("IR walk")
        return memo[id(root)]

    def refs(self, cid: int) -> frozenset[str]:
        return self.interner.refs[cid]

    # -- the encoded IR

    def name(self, n: str) -> int:
        i = self.name_idx.get(n)
        if i is None:
            i = self.name_idx[n] = len(self.names)
            self.names.append(n)
            self._rank = None
        return i

    def rank(self) -> tuple[array[int], list[str]]:
        """Label value of each name (its position in name order) and the names in order."""
        if self._rank is None:
            self._rank, self._sorted = _dag.ranks(self.names, self.name_idx)  # the loop compiled
        return self._rank, self._sorted

    def emit(self, root: int) -> int:
        """Offset of node ``root`` in ``code`` (emitted with its subtree if new)."""
        got = self.offsets.get(root)
        if got is not None:
            return got
        return _dag.Emitting(self).emit(root)

    def emitter(self) -> Callable[[int], int]:
        """``emit``, for many roots in a row (the compiled walk set up once)."""
        return _dag.Emitting(self).emit

    def _emit_iter(self, root: int) -> int:
        offsets = self.offsets
        keys = self.interner.keys
        code = self.code
        stack = [root]
        while stack:
            cid = stack[-1]
            if cid in offsets:
                stack.pop()
                continue
            key = keys[cid]
            kind = key[0]
            if kind == _SEQ or kind == _ALT:
                missing = [k for k in key[1] if k not in offsets]
                if missing:
                    stack.extend(missing)
                    continue
                body: Any = (kind, len(key[1]), *[offsets[k] for k in key[1]])
            elif kind == _REPEAT:
                if key[1] not in offsets:
                    stack.append(key[1])
                    continue
                body = self._repeat_code(key, offsets[key[1]])
            else:
                body = self._leaf_code(key)
            stack.pop()
            offsets[cid] = len(code)
            code.extend(body)
        return offsets[root]

    @staticmethod
    def _repeat_code(key: tuple, item: int) -> tuple[int, ...]:  # type: ignore[type-arg]
        _, _, lo, hi = key
        if 0 <= lo < _INF and (hi is None or lo <= hi < _INF):
            return (_REPEAT, lo, _INF if hi is None else hi, item)
        raise GrammarError(f"repetition bounds {{{lo},{'' if hi is None else hi}}} are out of range")

    def _leaf_code(self, key: tuple) -> Any:  # type: ignore[type-arg]
        kind = key[0]
        if kind == _LIT:
            return (_LIT, len(key[1]), *key[1])
        if kind == _BYTES:
            body = [_BYTES, len(key[1])]
            for lo, hi in key[1]:
                if not 0 <= lo <= hi <= 255:
                    raise GrammarError(f"byte class range {lo}-{hi} is not within 0-255")
                body += (lo, hi)
            return body
        if kind == _UTF8:
            return _utf8_code(key[1])
        if kind == _REF:
            return (_REF, self.name(key[1]))
        if kind == _LOOKAHEAD:
            return (_REF, self.name(marker_name(key[1])))
        if kind == _WORDS:
            return _words_code(key[1], key[2])
        return (_REF, self.token_name(key[1], key[2]))  # _TOKEN

    def token_name(self, ids: tuple[int, ...], negated: bool) -> int:
        """The name index of a token terminal's label, kept with what it stands for."""
        label = token_label(ir.Token(ids, negated))
        self.token_sets[label] = (negated, sorted(set(ids)))
        return self.name(label)
