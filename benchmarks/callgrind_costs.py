"""Instructions per compile and per mask on the cold path, counted by callgrind: deterministic
figures for A/B comparisons on a machine whose wall time is too noisy to resolve a few per cent.

The module runs itself under ``valgrind --tool=callgrind`` with instrumentation off until the
vocabulary is built, then counts only the regions it marks (client requests from a small C shim
compiled on first use) and dumps each one under its label:

* ``--what first-docs``: every JSONSchemaBench schema of ``--splits`` (default
  ``tests/corpora/jsonschemabench``) as MaskBench takes it: caches cleared, ``compile:ID``, then its
  first valid instance (compact JSON, Llama-3 tokens) on a fresh matcher: ``fill:ID:STEP`` for each
  mask, ``accept:ID:STEP`` for each token (the matcher's construction counts in the first accept);
* ``--what frontend``: the JSON Schema front end alone (``front:ID``: ``Grammar.from_json_schema``
  per schema of ``--splits``, caches cleared before each, as ``bench_frontend --cold``; with
  ``--warm-constants`` only ``clear_caches()``, which keeps the engine's constant tables -- the
  JSON spellings of classes, the formats, the unbounded numbers -- as a first document pays it);
* ``--what gbnf``: every grammar of bench_gbnf, compiled once uncounted (imports, as bench_gbnf's
  median has them), caches cleared, ``compile:G``, then one cold pass over its documents
  (``fill:G:DOC:STEP``, ``accept:G:DOC:STEP``).

``--profile FILE`` instead collects every marked region into one callgrind file (no per-region
dumps) for ``callgrind_annotate``.  Without it the labels' counts go to ``--out`` (JSON); sums by
kind and the largest regions are printed, and ``--compare A B`` sets two such files side by side.

``--only REGEX`` counts only the regions whose label matches (the others run uncounted): a
profile of a few fills, ``--only 'fill:.*/o6193:18$'``.

``--set NAME`` (first-docs): only the schemas of a named set of ``callgrind_sets.json`` -- ``mid``
(the 20 around the median time to first document), ``p90`` (its p84-p96), ``band`` (the 12 with
the largest first-use fills) -- picked once from a full run and kept, so that sessions compare
the same schemas.

``--compile-alone`` (first-docs): count ``cfgmask.compile`` only, after the front end,
``clear_caches()`` and ``gc.collect()``, and replay nothing (the compile glue's own figures:
``--only`` picks the schemas, ``--profile`` makes their profile).

``--name-sets-div N`` builds the vocabulary with ``_core.name_sets_div(N)`` (a first byte's name
tokens as a bit set from n_words / N of them; 1 is the rule before session 35).

``--cache-sim`` runs callgrind's cache simulation too and keeps, besides each region's
instructions, its data reads that miss the first-level cache (``D1mr``) and the last level
(``DLmr``); the JSON then maps each label to ``{"Ir": .., "D1mr": .., "DLmr": ..}`` and the summary
and ``--compare`` show each event in turn (``--compare`` reads either form; a file of instructions
alone compares on ``Ir``).  The simulated last level is ``--ll`` (size,associativity,line; default
one core's L2 of the machines these figures come from, 1 MiB 8-way: a 32 MiB L3 holds the whole
vocabulary, so its misses would be the first touches only, while the walks' stalls are L2 misses).

    python -m benchmarks.callgrind_costs --what first-docs --out /tmp/a.json
    python -m benchmarks.callgrind_costs --compare /tmp/a.json /tmp/b.json
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# Named sets of JSONSchemaBench schemas (ids) for ``--set``: the rows of issue 12's table in a few
# minutes of callgrind, picked once from a full run and kept here so every session measures the
# same schemas (how each was picked is the file's "how").
SETS_FILE = Path(__file__).resolve().parent / "callgrind_sets.json"
SETS: dict[str, list[str]] = {
    k: v for k, v in (json.loads(SETS_FILE.read_text()) if SETS_FILE.exists() else {}).items() if k != "how"
}


def set_ids(name: str | None) -> frozenset[str] | None:
    return None if name is None else frozenset(SETS[name])


_SHIM = r"""
#include <valgrind/callgrind.h>
void cg_on(void) { CALLGRIND_START_INSTRUMENTATION; }
void cg_toggle(void) { CALLGRIND_TOGGLE_COLLECT; }
void cg_dump(const char *label) { CALLGRIND_DUMP_STATS_AT(label); }
"""


def _shim() -> ctypes.CDLL:
    """The client-request shim, built once into the user's cache (needs valgrind's headers)."""
    folder = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "cfgmask-bench"
    folder.mkdir(parents=True, exist_ok=True)
    lib = folder / "cgshim.so"
    if not lib.exists():
        src = folder / "cgshim.c"
        src.write_text(_SHIM)
        subprocess.run(["cc", "-O1", "-shared", "-fPIC", "-o", str(lib), str(src)], check=True)
    return ctypes.CDLL(str(lib))


class Counter:
    """Marks regions: ``with counter("label"):`` collects the block, then dumps it under the label
    (or, profiling, keeps collecting into one total)."""

    def __init__(self, profile: bool, only: str | None = None) -> None:
        self.lib = _shim()
        self.profile = profile
        self.only = re.compile(only) if only else None
        self.lib.cg_on()

    def wanted(self, label: str) -> bool:
        """Whether ``label``'s region is counted."""
        return not self.only or bool(self.only.search(label))

    def region(self, label: str, fn: Callable[..., Any], *args: Any) -> Any:
        if not self.wanted(label):
            return fn(*args)  # run, not counted
        self.lib.cg_toggle()
        try:
            return fn(*args)
        finally:
            self.lib.cg_toggle()
            if not self.profile:
                self.lib.cg_dump(label.encode())


# ---- the workloads (run inside valgrind) -----------------------------------------------------


def _first_docs(
    cm: Any,
    vocab: Any,
    count: Counter,
    splits: Path,
    limit: int | None,
    alone: bool = False,
    ids: frozenset[str] | None = None,
) -> Iterator[str]:
    import gc

    from .bench_maskbench import job_of, load_corpus

    mask = cm.allocate_bitmask(1, vocab.size)
    for rec in load_corpus(splits, limit, sample=False):
        if ids is not None and rec["id"] not in ids:
            continue
        job = job_of(rec)
        if not job["valid"]:
            continue
        sid = job["id"]
        cm.clear_caches()
        try:
            if alone:
                if not count.wanted(f"compile:{sid}"):
                    continue
                g = cm.Grammar.from_json_schema(job["text"])
                cm.clear_caches()
                gc.collect()
                count.region(f"compile:{sid}", cm.compile, g, vocab)
                yield sid
                continue
            cg = count.region(f"compile:{sid}", _compile, cm.Grammar.from_json_schema, job["text"], vocab)
        except (cm.GrammarError, cm.LimitError, ValueError, NotImplementedError):
            continue
        yield from _replay(cm, cg, count, mask, sid, job["valid"][0])


def _gbnf(cm: Any, vocab: Any, count: Counter, names: Sequence[str]) -> Iterator[str]:
    import gc

    from .bench_gbnf import _grammar_path
    from .common import tokenize
    from .documents import DOCUMENTS

    mask = cm.allocate_bitmask(1, vocab.size)
    for name in names:
        raw = _grammar_path(name).read_text()
        front = cm.Grammar.from_lark if name.endswith(".lark") else cm.Grammar.from_gbnf
        # no deadline: under valgrind sql.lark's lookahead classes alone take longer than 30 s
        limits = cm.CompileLimits(deadline_ms=0)
        # One uncounted compile first, as bench_gbnf's median of cold compiles has: the first
        # compile of a front end pays its imports once a process (lark's ~1,230 M instructions
        # of sql.lark's 1,549 M, the GBNF reader's ~27 M of json's 32 M).
        _compile(front, raw, vocab, limits)
        cm.clear_caches()
        gc.collect()
        cg = count.region(f"compile:{name}", _compile, front, raw, vocab, limits)
        for i, text in enumerate(DOCUMENTS[name.removesuffix(".lark")]()):
            yield from _replay(cm, cg, count, mask, f"{name}:{i}", tokenize(text))


def _frontend(cm: Any, count: Counter, splits: Path, limit: int | None, warm: bool = False) -> Iterator[str]:
    """``front:ID``: ``Grammar.from_json_schema`` alone per schema, cold as ``bench_frontend
    --cold`` (``clear_caches()``, every memo table of the front end's modules cleared and
    ``gc.collect()`` before each), after one uncounted pass over the corpus (imports and first
    calls out of the figures).  ``warm``: ``clear_caches()`` and ``gc.collect()`` only, as
    MaskBench and ``--what first-docs`` run it (the constant tables stay: a process's later
    schemas, ~30 % below the cold figures at the median)."""
    import gc

    from .bench_frontend import front_end_caches, load_texts, run_once

    front, refused = cm.Grammar.from_json_schema, cm.GrammarError

    def one(text: str) -> None:  # run_once without its imports (~15 k instructions a call)
        try:
            front(text)
        except refused:
            pass

    texts = load_texts(splits, limit)
    for _, text in texts:
        run_once(text)
    caches = [] if warm else front_end_caches()
    for sid, text in texts:
        cm.clear_caches()
        for c in caches:
            c.cache_clear()
        gc.collect()
        count.region(f"front:{sid}", one, text)
        yield sid


def _compile(front: Callable[..., Any], text: str, vocab: Any, limits: Any = None) -> Any:
    import cfgmask as cm

    return cm.compile(front(text, limits=limits), vocab, limits=limits)


def _replay(cm: Any, cg: Any, count: Counter, mask: Any, key: str, tokens: Sequence[int]) -> Iterator[str]:
    m = count.region(f"accept:{key}:0", cm.Matcher, cg)  # the construction counts as accept 0
    for i in range(len(tokens) + 1):
        count.region(f"fill:{key}:{i}", m.fill_bitmask, mask, 0)
        if i == len(tokens):
            break
        ok = count.region(f"accept:{key}:{i + 1}", m.accept_token, tokens[i])
        if not ok:  # a valid instance outside the canonical form: MaskBench stops there too
            print(f"  {key}: token {i} rejected, replay stopped", file=sys.stderr)
            break
    yield key


def _import_modules() -> None:
    """Import every module of the engine before any region is counted.  A process pays an import
    once, but the front ends import some modules on first use (the ECMAScript regex parser, the
    Unicode property tables), so the first schema that needs one paid it inside its region: with
    ``PYTHONDONTWRITEBYTECODE`` set (as on the machines these figures come from) that included
    compiling the module's source, 45.7 M instructions in ``compile:Snowplow/sp_356_Normalized``
    of the ``mid`` set, half of that set's compile sum.  Optional dependencies (lark, torch) are
    still imported lazily by the modules that use them."""
    import importlib
    import pkgutil

    for pkg in map(importlib.import_module, ("cfgmask.frontends", "cfgmask.compile")):
        for mod in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + "."):
            try:
                importlib.import_module(mod.name)
            except ImportError:  # an optional extra this environment lacks
                pass


def inner(args: argparse.Namespace) -> None:
    """The part that runs under valgrind."""
    import cfgmask as cm

    from .common import llama3

    _import_modules()
    if args.what == "frontend":
        count = Counter(profile=bool(args.profile), only=args.only)
        for _ in _frontend(cm, count, args.splits, args.limit, args.warm_constants):
            pass
        return
    tokens = llama3()
    if args.name_sets_div is not None:  # read when the vocabulary's trie is built
        from cfgmask import _core

        _core.name_sets_div(args.name_sets_div)
    vocab = cm.Vocabulary.from_token_bytes(
        list(tokens.token_bytes), stop_token_ids=tokens.stops, special_token_ids=sorted(tokens.special)
    )
    vocab._handle()
    count = Counter(profile=bool(args.profile), only=args.only)
    work = (
        _first_docs(cm, vocab, count, args.splits, args.limit, args.compile_alone, set_ids(args.set))
        if args.what == "first-docs"
        else _gbnf(cm, vocab, count, args.grammars.split(","))
    )
    t0 = time.monotonic()
    for n, key in enumerate(work, 1):
        if n % 25 == 0:
            print(f"  {n} documents ({key}), {time.monotonic() - t0:.0f} s", file=sys.stderr, flush=True)


# ---- the driver ------------------------------------------------------------------------------

_LABEL = re.compile(r"^desc: Trigger: Client Request: (.*)$", re.M)
_TOTAL = re.compile(r"^(?:summary|totals): (\d+)", re.M)
_EVENTS = re.compile(r"^events: (.*)$", re.M)
_TOTALS = re.compile(r"^(?:summary|totals): ([\d ]+)$", re.M)
CACHE_EVENTS = ("Ir", "D1mr", "DLmr")


def _cache_counts(text: str) -> dict[str, int] | None:
    """A dump's totals of CACHE_EVENTS (None if it has no such line)."""
    events, totals = _EVENTS.search(text), _TOTALS.search(text)
    if not events or not totals:
        return None
    named = dict(zip(events.group(1).split(), (int(x) for x in totals.group(1).split()), strict=False))
    return {e: named.get(e, 0) for e in CACHE_EVENTS}


def run(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="cgcosts") as tmp:
        out = Path(args.profile) if args.profile else Path(tmp) / "cg.out"
        cmd = [
            "valgrind",
            "--tool=callgrind",
            "--instr-atstart=no",
            "--collect-atstart=no",
            f"--callgrind-out-file={out}",
            *(["--cache-sim=yes", f"--LL={args.ll}"] if args.cache_sim else []),
            sys.executable,
            "-m",
            "benchmarks.callgrind_costs",
            "--inner",
            "--what",
            args.what,
            "--splits",
            str(args.splits),
            "--grammars",
            args.grammars,
        ]
        if args.limit is not None:
            cmd += ["--limit", str(args.limit)]
        if args.profile:
            cmd += ["--profile", str(args.profile)]
        if args.name_sets_div is not None:
            cmd += ["--name-sets-div", str(args.name_sets_div)]
        if args.only:
            cmd += ["--only", args.only]
        if args.set:
            cmd += ["--set", args.set]
        if args.compile_alone:
            cmd += ["--compile-alone"]
        if args.warm_constants:
            cmd += ["--warm-constants"]
        env = dict(os.environ, PYTHONHASHSEED="0")
        subprocess.run(cmd, check=True, cwd=ROOT, env=env, stdout=sys.stderr)
        if args.profile:
            return {}
        if args.cache_sim:
            cache: dict[str, dict[str, int]] = {}
            for f in Path(tmp).iterdir():
                text = f.read_text(errors="replace")
                label, got = _LABEL.search(text), _cache_counts(text)
                if label and got:
                    into = cache.setdefault(label.group(1), dict.fromkeys(CACHE_EVENTS, 0))
                    for e, n in got.items():
                        into[e] += n
            return cache
        counts: dict[str, int] = {}
        for f in Path(tmp).iterdir():
            text = f.read_text(errors="replace")
            label, total = _LABEL.search(text), _TOTAL.search(text)
            if label and total:
                counts[label.group(1)] = counts.get(label.group(1), 0) + int(total.group(1))
        return counts


def event(counts: dict[str, Any], name: str) -> dict[str, int] | None:
    """One event's counts by label from either form of --out (instructions alone: Ir only)."""
    if all(isinstance(n, int) for n in counts.values()):
        return counts if name == "Ir" else None
    return {label: n[name] for label, n in counts.items()}


def summary(counts: dict[str, int], top: int) -> str:
    by_kind: dict[str, list[int]] = {}
    for label, n in counts.items():
        by_kind.setdefault(label.split(":", 1)[0], []).append(n)
    lines = [f"{'kind':8} {'regions':>8} {'sum M':>12} {'p50 K':>10} {'p99 K':>10} {'max K':>10}"]
    for kind, ns in sorted(by_kind.items()):
        ns.sort()
        p99 = ns[min(len(ns) - 1, int(0.99 * len(ns)))]
        lines.append(
            f"{kind:8} {len(ns):8} {sum(ns) / 1e6:12.2f} {statistics.median(ns) / 1e3:10.1f} "
            f"{p99 / 1e3:10.1f} {ns[-1] / 1e3:10.1f}"
        )
    lines.append(f"largest {top}:")
    for label, n in sorted(counts.items(), key=lambda kv: -kv[1])[:top]:
        lines.append(f"  {n / 1e6:9.2f} M  {label}")
    return "\n".join(lines)


def compare(a: dict[str, int], b: dict[str, int], top: int) -> str:
    both = sorted(set(a) & set(b))
    lines = [f"{len(both)} regions in both ({len(a)} / {len(b)})"]
    kinds = sorted({k.split(":", 1)[0] for k in both})
    for kind in kinds:
        keys = [k for k in both if k.startswith(kind + ":")]
        sa, sb = sum(a[k] for k in keys), sum(b[k] for k in keys)
        ratios = sorted(b[k] / a[k] for k in keys if a[k])
        change = f"{(sb / sa - 1) * 100:+.2f} %" if sa else "n/a"
        ratio = f"{statistics.median(ratios):.3f}" if ratios else "n/a"
        lines.append(
            f"{kind:8} {sa / 1e6:12.2f} -> {sb / 1e6:12.2f} M ({change}), median region ratio {ratio}"
        )
        for label in ("max", "p99"):
            xa = sorted(a[k] for k in keys)
            xb = sorted(b[k] for k in keys)
            q = len(xa) - 1 if label == "max" else min(len(xa) - 1, int(0.99 * len(xa)))
            lines.append(f"   {label}: {xa[q] / 1e3:.1f} -> {xb[q] / 1e3:.1f} K")
    lines.append(f"largest changes ({top}):")
    for k in sorted(both, key=lambda k: -abs(b[k] - a[k]))[:top]:
        lines.append(f"  {a[k] / 1e6:9.3f} -> {b[k] / 1e6:9.3f} M  {k}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--what", choices=("first-docs", "gbnf", "frontend"), default="first-docs")
    ap.add_argument("--splits", type=Path, default=ROOT / "tests" / "corpora" / "jsonschemabench")
    ap.add_argument("--limit", type=int, default=None, help="schemas a split")
    ap.add_argument("--grammars", default="json,arithmetic,c,sql,sql.lark")
    ap.add_argument("--set", choices=sorted(SETS), help="first-docs: only this named set of schemas")
    ap.add_argument("--only", help="count only the regions whose label matches this regular expression")
    ap.add_argument("--profile", help="one callgrind file of every region, for callgrind_annotate")
    ap.add_argument("--out", type=Path, help="the regions' counts (JSON)")
    ap.add_argument("--compare", nargs=2, type=Path, metavar=("A", "B"))
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--cache-sim", action="store_true", help="count D1 and LL read misses too")
    ap.add_argument("--ll", default="1048576,8,64", help="the simulated last level (size,assoc,line)")
    ap.add_argument("--compile-alone", action="store_true", help="first-docs: count cfgmask.compile alone")
    ap.add_argument(
        "--warm-constants", action="store_true", help="frontend: clear_caches() only (constant tables kept)"
    )
    ap.add_argument("--name-sets-div", type=int, help="name sets from n_words / N names (1: old rule)")
    ap.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.inner:
        inner(args)
        return 0
    if args.compare:
        a, b = (json.loads(p.read_text()) for p in args.compare)
        if all(isinstance(n, int) for n in (*a.values(), *b.values())):
            print(compare(a, b, args.top))
            return 0
        for name in CACHE_EVENTS:
            ea, eb = event(a, name), event(b, name)
            if ea is not None and eb is not None:
                print(f"== {name}")
                print(compare(ea, eb, args.top))
        return 0
    counts = run(args)
    if counts:
        if args.out:
            args.out.write_text(json.dumps(counts, indent=0, sort_keys=True))
        if args.cache_sim:
            for name in CACHE_EVENTS:
                print(f"== {name}")
                print(summary(event(counts, name) or {}, args.top))
        else:
            print(summary(counts, args.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
