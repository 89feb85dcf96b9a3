"""Fingerprints of what the compiler emits: a guard for refactors that promise no behaviour change.

``python -m benchmarks.fingerprint --out before.json`` compiles every shipped grammar, the
GBNF and Lark grammars of ``tests/corpora`` and the JSONSchemaBench schemas of
``tests/corpora/jsonschemabench`` (the first ``--schemas`` of each split), and records a
SHA-256 of each grammar's automaton tables (every array of ``CompiledGrammar.tables``, its
rule names and stats) and, with ``--masks``, of every mask along the benchmark documents
(Llama-3 vocabulary).  Run it before and after a change and compare the two files with
``--compare``: equal tables mean equal masks for the same C core; equal masks check the
C core too.  Inputs that fail to compile are recorded with their error type, so a change
in which inputs compile shows up as well.

``--instances`` hashes instead every mask along every valid instance of every JSONSchemaBench
schema of ``tests/corpora`` (compact JSON, Llama-3 tokens, a mask before each token and after
the last), with :func:`cfgmask.clear_caches` before each compile, as MaskBench replays them,
plus a few bounded strings (``minLength``/``maxLength`` pairs): the guard for changes to the
cold path (caches, shared walks, first entries), whose masks depend on what came before.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

import cfgmask

ROOT = Path(__file__).resolve().parent.parent
CORPORA = ROOT / "tests" / "corpora"


def _inputs(n_schemas: int) -> list[tuple[str, str, Any]]:
    out: list[tuple[str, str, Any]] = []
    for p in sorted((ROOT / "grammars").iterdir()):
        if p.suffix in (".gbnf", ".lark"):
            out.append((f"grammars/{p.name}", p.suffix[1:], p.read_text()))
    for p in sorted((CORPORA / "llama.cpp" / "grammars").glob("*.gbnf")):
        out.append((f"llama.cpp/{p.name}", "gbnf", p.read_text()))
    for d in ("lark/grammars", "syncode/grammars"):
        for p in sorted((CORPORA / d).glob("*.lark")):
            out.append((f"{d}/{p.name}", "lark", p.read_text()))
    for p in sorted((CORPORA / "jsonschemabench").glob("*.jsonl")):
        with p.open() as f:
            for i, line in enumerate(f):
                if i >= n_schemas:
                    break
                row = json.loads(line)
                out.append((f"{p.stem}/{row.get('id', i)}", "schema", row["schema"]))
    return out


def _grammar(kind: str, src: Any) -> cfgmask.Grammar:
    if kind == "gbnf":
        return cfgmask.Grammar.from_gbnf(src)
    if kind == "lark":
        return cfgmask.Grammar.from_lark(src)
    return cfgmask.Grammar.from_json_schema(src)


def _tables_hash(compiled: cfgmask.CompiledGrammar) -> str:
    h = hashlib.sha256()
    t = compiled.tables
    # its fields, not vars(t): tables straight from the compiler make their arrays when read
    for name in sorted(f.name for f in dataclasses.fields(t)):
        v = getattr(t, name)
        if name == "stats":
            continue  # counts that describe the build, not what it emits
        h.update(name.encode())
        if isinstance(v, np.ndarray):
            h.update(str(v.dtype).encode() + str(v.shape).encode())
            h.update(np.ascontiguousarray(v).tobytes())
        else:
            h.update(repr(v).encode())
    return h.hexdigest()


def _mask_hashes(vocab: cfgmask.Vocabulary) -> dict[str, str]:
    from benchmarks.documents import DOCUMENTS

    out = {}
    cases = [(f"{name}.gbnf", docs) for name, docs in DOCUMENTS.items()] + [("sql.lark", DOCUMENTS["sql"])]
    for name, docs in cases:
        path = ROOT / "grammars" / name
        g = _grammar(path.suffix[1:], path.read_text())
        compiled = cfgmask.compile(g, vocab)
        h = hashlib.sha256()
        mask = cfgmask.allocate_bitmask(1, vocab.size)
        for doc in docs():  # the mask at every byte of every document
            m = cfgmask.Matcher(compiled)
            for b in doc.encode():
                m.fill_bitmask(mask, 0)
                h.update(mask.tobytes())
                if not m.accept_bytes(bytes([b])):
                    h.update(b"rejected")
                    break
        out[f"masks:{name}"] = h.hexdigest()
    return out


# (minLength, maxLength) of the bounded strings --instances adds; each gets instances at both ends
_BOUNDED = [(0, 5), (1, 255), (3, 40), (10, 10), (0, 1024), (2, 3000)]


def _instance_hashes() -> dict[str, str]:
    from benchmarks.common import tokenize

    cases: list[tuple[str, Any, list[Any]]] = []
    for p in sorted((CORPORA / "jsonschemabench").glob("*.jsonl")):
        for i, line in enumerate(p.read_text().splitlines()):
            if line.strip():
                row = json.loads(line)
                valid = [t["data"] for t in row.get("tests", []) if t["valid"]]
                cases.append((f"instances:{p.stem}/{row.get('id', i)}", row["schema"], valid))
    for lo, hi in _BOUNDED:
        schema = {"type": "object", "properties": {"s": {"type": "string", "minLength": lo, "maxLength": hi}}}
        alphabet = 'ab9 \u00e9\\"\U0001f600xyz'
        docs = [{"s": (alphabet * (n // len(alphabet) + 1))[:n]} for n in sorted({lo, min(hi, 300)})]
        cases.append((f"instances:bounded/{lo}-{hi}", schema, docs))
    vocab = cfgmask.Vocabulary.llama3()
    mask = cfgmask.allocate_bitmask(1, vocab.size)
    out: dict[str, str] = {}
    start = time.perf_counter()
    for n, (name, schema, docs) in enumerate(cases):
        cfgmask.clear_caches()
        try:
            compiled = cfgmask.compile(cfgmask.Grammar.from_json_schema(json.dumps(schema)), vocab)
        except cfgmask.CfgmaskError as e:
            out[name] = f"error:{type(e).__name__}"
            continue
        h = hashlib.sha256()
        for doc in docs:
            m = cfgmask.Matcher(compiled)
            for t in tokenize(json.dumps(doc, separators=(",", ":"))):
                m.fill_bitmask(mask, 0)
                h.update(mask.tobytes())
                if not m.accept_token(t):
                    h.update(b"rejected")
                    break
            else:
                m.fill_bitmask(mask, 0)
                h.update(mask.tobytes() + (b"accepting" if m.is_accepting() else b"not accepting"))
        out[name] = h.hexdigest()
        if (n + 1) % 25 == 0:
            took = time.perf_counter() - start
            print(f"  {n + 1}/{len(cases)} schemas replayed ({took:.1f} s)", file=sys.stderr)
    return out


def run(n_schemas: int, masks: bool) -> dict[str, str]:
    vocab = cfgmask.Vocabulary.from_token_bytes([bytes([b]) for b in range(256)])
    out: dict[str, str] = {}
    inputs = _inputs(n_schemas)
    start = time.perf_counter()
    for i, (name, kind, src) in enumerate(inputs):
        try:
            out[name] = _tables_hash(cfgmask.compile(_grammar(kind, src), vocab))
        except cfgmask.CfgmaskError as e:
            out[name] = f"error:{type(e).__name__}"
        if (i + 1) % 25 == 0:
            print(f"  {i + 1}/{len(inputs)} compiled ({time.perf_counter() - start:.1f} s)", file=sys.stderr)
    if masks:
        out.update(_mask_hashes(cfgmask.Vocabulary.llama3()))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", help="write the fingerprints here (JSON)")
    ap.add_argument("--compare", nargs=2, metavar=("A", "B"), help="compare two fingerprint files")
    ap.add_argument("--schemas", type=int, default=40, help="schemas per JSONSchemaBench split")
    ap.add_argument("--masks", action="store_true", help="also hash masks along the benchmark documents")
    what = "instead: every mask along every JSONSchemaBench instance, cold start"
    ap.add_argument("--instances", action="store_true", help=what)
    args = ap.parse_args()
    if args.compare:
        a, b = (json.loads(Path(p).read_text()) for p in args.compare)
        diff = sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))
        same = len(a.keys() & b.keys()) - len([k for k in diff if k in a and k in b])
        print(f"{same} equal, {len(diff)} different")
        for k in diff:
            print(f"  {k}: {a.get(k)} -> {b.get(k)}")
        sys.exit(1 if diff else 0)
    fp = _instance_hashes() if args.instances else run(args.schemas, args.masks)
    errors = sum(v.startswith("error:") for v in fp.values())
    print(f"{len(fp)} fingerprints ({errors} inputs rejected)")
    if args.out:
        Path(args.out).write_text(json.dumps(fp, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
