"""Which JSONSchemaBench schemas the JSON Schema front end refuses in strict mode, by reason.

    python -m benchmarks.schema_refusals [--canonical both|on|off] [--splits DIR] [--out F.json]

Front end only (no automata): each schema of every split is converted with
``schema_to_grammar(schema, strict=True, canonical=...)`` (deep ones on a big stack, as
``Grammar.from_json_schema`` does); a ``GrammarError`` is a refusal,
grouped by the keyword it names and its reason (numbers, names and pointers stripped).  A
``LimitError`` or any other exception is counted apart.  Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from cfgmask.deep import call_deep
from cfgmask.errors import GrammarError, LimitError
from cfgmask.frontends.json_schema import schema_to_grammar

HERE = Path(__file__).resolve().parent.parent
DEFAULT_SPLITS = [
    HERE.parent / "shared" / "corpora" / "jsonschemabench",  # the whole visible splits
    HERE / "tests" / "corpora" / "jsonschemabench",  # the 40-a-split sample shipped with the tests
]


def reason_of(message: str) -> str:
    m = re.match(r"JSON Schema keyword '([^']*)' at \S+ cannot be enforced exactly: (.*)", message)
    if m:
        why = re.sub(r"\(strict=False.*", "", m.group(2)).strip()
        return f"{m.group(1)}: {re.sub(r'[0-9]+', 'N', why)}"
    return re.sub(r"'[^']*'|\"[^\"]*\"|/\S*|[0-9]+", "_", message)[:100]


def run(splits: Path, canonical: bool) -> dict[str, Any]:
    refused: Counter[str] = Counter()
    per_split: dict[str, list[int]] = {}
    files = sorted(splits.glob("*.jsonl"))
    t0 = time.monotonic()
    for f in files:
        lines = [x for x in f.read_text(encoding="utf-8").split("\n") if x.strip()]
        ok = 0
        for i, line in enumerate(lines):
            schema = json.loads(line)["schema"]
            try:
                call_deep(lambda s=schema: schema_to_grammar(s, strict=True, canonical=canonical), "schema")
                ok += 1
            except LimitError as e:
                refused[f"LimitError {e.limit}"] += 1
            except GrammarError as e:
                refused[reason_of(e.message)] += 1
            except RecursionError:
                refused["RecursionError"] += 1
            if i % 200 == 0:
                took = time.monotonic() - t0
                print(f"  {f.stem} {i}/{len(lines)} {took:.0f}s", file=sys.stderr, flush=True)
        per_split[f.stem] = [ok, len(lines)]
    return {"canonical": canonical, "splits": per_split, "refused": dict(refused.most_common())}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--canonical", choices=("both", "on", "off"), default="both")
    ap.add_argument("--splits", type=Path, help="a directory of JSONSchemaBench .jsonl splits")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    splits = args.splits or next(p for p in DEFAULT_SPLITS if any(p.glob("*.jsonl")))
    modes = {"both": [True, False], "on": [True], "off": [False]}[args.canonical]
    results = [run(splits, c) for c in modes]
    for r in results:
        total = sum(n for _, n in r["splits"].values())
        ok = sum(k for k, _ in r["splits"].values())
        print(f"canonical={r['canonical']}: {ok}/{total} compile in strict mode; refusals by reason:")
        for why, n in r["refused"].items():
            print(f"  {n:5d}  {why}")
    if args.out:
        args.out.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
