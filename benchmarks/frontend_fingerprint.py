"""A digest of what the JSON Schema front end makes of each schema of a corpus, to check that a
change to the front end (a speed-up) leaves its output unchanged.

For each schema and each mode (canonical / whole language x strict / lenient; the 240-schema
sample also with the ``compact`` and ``any`` whitespace policies), the digest covers the IR (rule
names in order, each body's ``repr``, the start rule, ``meta``) and the report (every entry in
order), or the error's class, message and pointer.  Run it on two checkouts and compare:

    python -m benchmarks.frontend_fingerprint --out /tmp/new.jsonl
    PYTHONPATH=/path/to/other/checkout python -m benchmarks.frontend_fingerprint --out /tmp/old.jsonl
    python -m benchmarks.frontend_fingerprint --compare /tmp/old.jsonl /tmp/new.jsonl

Corpora: ``tests/corpora/jsonschemabench``, every file of ``tests/corpora/json-schema-test-suite``
(with its remotes as ``resources``) and, with ``--shared``, ``/work/shared/corpora/jsonschemabench``.
Nothing is committed of the output: it is a comparison of two checkouts run on one machine.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "tests" / "corpora" / "jsonschemabench"
SUITE = ROOT / "tests" / "corpora" / "json-schema-test-suite"
SHARED = Path("/work/shared/corpora/jsonschemabench")
MODES = [(c, s, "default") for c in (True, False) for s in (True, False)]
WS_MODES = [(True, True, "compact"), (True, False, "any"), (False, False, "compact")]


def cases(shared: bool) -> Iterator[tuple[str, Any, dict[str, Any] | None, list[tuple[bool, bool, str]]]]:
    """(id, schema, resources, modes) for every schema of the corpora."""
    for path in sorted(BENCH.glob("*.jsonl")):
        for line in path.read_text().split("\n"):
            if line.strip():
                r = json.loads(line)
                yield f"bench/{r['id']}", r["schema"], None, MODES + WS_MODES
    root = SUITE / "remotes"
    served = "http://localhost:1234/"
    remotes = {f"{served}{p.relative_to(root)}": json.loads(p.read_text()) for p in root.rglob("*.json")}
    for path in sorted((SUITE / "tests").rglob("*.json")):
        for i, group in enumerate(json.loads(path.read_text())):
            yield f"suite/{path.relative_to(SUITE)}#{i}", group["schema"], remotes, MODES
    if shared:
        for path in sorted(SHARED.glob("*.jsonl")):
            for line in path.read_text().split("\n"):
                if line.strip():
                    r = json.loads(line)
                    yield f"shared/{path.stem}/{r['id']}", r["schema"], None, MODES


def dump(schema: Any, resources: dict[str, Any] | None, canonical: bool, strict: bool, ws: str) -> str:
    """The front end's output for one schema in one mode, as text."""
    from cfgmask import Grammar
    from cfgmask.errors import CfgmaskError

    try:
        g = Grammar.from_json_schema(
            schema, canonical=canonical, strict=strict, whitespace=ws, resources=resources
        )
    except CfgmaskError as e:
        return f"error {type(e).__name__} {e!s} {getattr(e, 'pointer', None)!r}"
    rules = "\n".join(f"{name} = {body!r}" for name, body in g.ir.rules.items())
    report = "\n".join(repr((e.path, e.keyword, e.status, e.reason)) for e in g.schema_report)
    return f"start {g.ir.start}\nmeta {g.ir.meta!r}\n{rules}\nreport\n{report}"


def fingerprint(out: Path, shared: bool) -> None:
    with out.open("w") as f:
        for ident, schema, resources, modes in cases(shared):
            for canonical, strict, ws in modes:
                text = dump(schema, resources, canonical, strict, ws)
                digest = hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()
                f.write(json.dumps([ident, canonical, strict, ws, digest]) + "\n")


def compare(old: Path, new: Path) -> int:
    def load(p: Path) -> dict[tuple[Any, ...], str]:
        rows = [json.loads(line) for line in p.read_text().split("\n") if line]
        return {tuple(r[:4]): r[4] for r in rows}

    a, b = load(old), load(new)
    differ = [k for k in a if k in b and a[k] != b[k]]
    missing = [k for k in a if k not in b] + [k for k in b if k not in a]
    for k in differ[:50]:
        print("differs:", *k)
    print(f"{len(a)} vs {len(b)} outputs; {len(differ)} differ; {len(missing)} in one file only")
    return 1 if differ or missing else 0


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--shared", action="store_true", help=f"also {SHARED}")
    ap.add_argument("--compare", nargs=2, type=Path, metavar=("OLD", "NEW"))
    ap.add_argument("--show", nargs=4, metavar=("ID", "CANONICAL", "STRICT", "WS"), help="print one dump")
    args = ap.parse_args(argv)
    if args.compare:
        sys.exit(compare(*args.compare))
    if args.show:
        ident, c, s, ws = args.show
        for i, schema, res, _ in cases(ident.startswith("shared/")):
            if i == ident:
                print(dump(schema, res, c == "True", s == "True", ws))
        return
    if args.out is None:
        ap.error("--out, --compare or --show")
    fingerprint(args.out, args.shared)


if __name__ == "__main__":
    main()
