"""MaskBench's method on JSONSchemaBench: a schema never seen before, from its compile to the end
of its first documents, per engine.

For every schema of the visible JSONSchemaBench splits (``/work/shared/corpora/jsonschemabench``
when it exists, 6,598 schemas; else ``tests/corpora/jsonschemabench``, 240) and every engine, in
one worker process per engine (engines one after another, never at the same time), on one thread:
clear the engine's caches (cfgmask: ``clear_caches()``), compile the schema, then replay each
valid instance (compact JSON, Llama-3 BPE) on a fresh matcher: a mask before every token and after
the last, every token accepted.  The masks of the first instance, replayed right after the
compile, are the **first-use** masks; **all masks** are those of every instance.  **Time to first
document** = compile + the first instance's matcher, masks and accepts.  A schema past
``--timeout`` is killed with its worker (counted); a refusal is counted; a valid instance an
engine rejects is counted and listed.  Untimed, after each schema: the invalid instances (one an
engine accepts is a finding) and, for cfgmask, whether its whole language (``canonical=False``)
accepts a valid instance the canonical form rejected.  See benchmarks/README.md.

    python -m benchmarks.bench_maskbench --quick      # smoke: 10 schemas a split, every engine
    python -m benchmarks.bench_maskbench --splits tests/corpora/jsonschemabench --xgrammar-sample 40
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import random
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .bench_schemas import jsonschema_verdict
from .common import RESULTS_DIR, environment, llama3_token_bytes, tokenize
from .maskbench_worker import serve

ROOT = Path(__file__).resolve().parent.parent
SHARED_CORPUS = Path("/work/shared/corpora/jsonschemabench")
TEST_CORPUS = ROOT / "tests" / "corpora" / "jsonschemabench"
ENGINES = ("cfgmask", "llguidance", "xgrammar")
MAX_LISTED = 20  # findings of each kind printed per engine (all are in the JSON)


# ---- input ----------------------------------------------------------------------------------


def load_corpus(folder: Path, limit: int | None, sample: bool) -> list[dict[str, Any]]:
    """Every split's schemas, in file order; ``limit`` a split: the first ones, or with ``sample``
    a subsample drawn with the split's name as seed (the same on every run)."""
    out = []
    for path in sorted(folder.glob("*.jsonl")):
        rows = [json.loads(line) for line in path.read_text().split("\n") if line.strip()]
        if limit is not None and limit < len(rows):
            keep = (
                sorted(random.Random(path.stem).sample(range(len(rows)), limit)) if sample else range(limit)
            )
            rows = [rows[i] for i in keep]
        for r in rows:
            r["split"] = path.stem
        out += rows
    return out


def job_of(record: dict[str, Any]) -> dict[str, Any]:
    """What a worker gets: the schema as JSON text (every engine parses it inside its compile, as a
    server would) and the tokens of its instances, compact JSON."""
    valid, invalid = [], []
    for test in record.get("tests", []):
        text = json.dumps(test["data"], separators=(",", ":"))
        (valid if test["valid"] else invalid).append(tokenize(text))
    return {"id": record["id"], "text": json.dumps(record["schema"]), "valid": valid, "invalid": invalid}


def xgrammar_ids(records: list[dict[str, Any]], n: int) -> set[str]:
    """The schemas xgrammar gets: ``n`` drawn with a fixed seed across the selection."""
    if n >= len(records):
        return {r["id"] for r in records}
    return {records[i]["id"] for i in random.Random(0).sample(range(len(records)), n)}


# ---- the parent's side of a worker ------------------------------------------------------------


class Worker:
    """One engine in a spawned child process, restarted after a timeout or a crash."""

    def __init__(self, name: str, args: argparse.Namespace) -> None:
        self.name, self.args = name, args
        self.restarts = -1
        self.info: dict[str, Any] = {}
        self._start()

    def _start(self) -> None:
        ctx = mp.get_context("spawn")
        self.conn, child = ctx.Pipe()
        keep = "steady" if self.args.steady else "vocab-walks" if self.args.keep_vocab_walks else "none"
        target_args = (self.name, keep, self.args.mem_gb, child)
        self.proc = ctx.Process(target=serve, args=target_args, daemon=True)
        self.proc.start()
        child.close()
        if not self.conn.poll(300):
            raise RuntimeError(f"{self.name} worker did not start")
        kind, self.info = self.conn.recv()
        if kind == "missing":
            self.proc.join()
            raise ImportError(self.info)
        self.restarts += 1

    def close(self) -> None:
        try:
            self.conn.send(None)
            self.proc.join(10)
        except OSError:
            pass
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join()

    def run(self, job: dict[str, Any], timeout: float) -> dict[str, Any]:
        """Every stage the worker reached within ``timeout`` (compile, measured, checked)."""
        self.conn.send(job)
        out: dict[str, Any] = {}
        deadline = time.monotonic() + timeout
        while True:
            try:
                msg = self.conn.recv() if self.conn.poll(max(deadline - time.monotonic(), 0)) else None
            except (EOFError, OSError):
                msg = "died"
            if isinstance(msg, tuple) and msg[0] == "end":
                return out
            if isinstance(msg, tuple):
                out.update(msg[1])
                out.setdefault("stages", []).append(msg[0])
                continue
            self.proc.kill()
            self.proc.join()
            self.conn.close()
            self._start()
            out["stopped"] = "timeout" if msg is None else "crash"
            if "compile_s" not in out:
                out["status"] = out["stopped"]
            return out


def run_engine(name: str, jobs: list[dict[str, Any]], args: argparse.Namespace) -> dict[str, Any] | None:
    try:
        w = Worker(name, args)
    except ImportError as ex:
        _log(f"{name}: not installed ({ex})")
        return None
    results: dict[str, Any] = {}
    t0 = last = time.monotonic()
    for i, job in enumerate(jobs):
        results[job["id"]] = w.run(job, args.timeout)
        if time.monotonic() - last > 10 or i + 1 == len(jobs):
            last = time.monotonic()
            bad = sum(r.get("status") != "ok" for r in results.values())
            _log(f"{name}: {i + 1}/{len(jobs)} schemas, {bad} not compiled, {last - t0:.0f} s")
    w.close()
    return {"info": w.info, "restarts": w.restarts, "wall_s": time.monotonic() - t0, "results": results}


# ---- statistics -----------------------------------------------------------------------------------


def _pct(values: Sequence[float] | np.ndarray, *qs: float) -> list[float | None]:
    a = np.asarray(values, dtype=np.float64)
    return [float(np.percentile(a, q)) if a.size else None for q in qs]


def stats(results: dict[str, Any], ids: set[str] | None = None) -> dict[str, Any]:
    """Percentiles over the schemas in ``ids`` (default: all): compile and time to first document
    in ms, masks in µs."""
    rows = [r for k, r in results.items() if ids is None or k in ids]
    compiled = [r for r in rows if r.get("status") == "ok"]
    comp = [r["compile_s"] * 1e3 for r in compiled]
    ttfd = [r["ttfd_s"] * 1e3 for r in compiled if "ttfd_s" in r]
    ttfm = [r["ttfm_s"] * 1e3 for r in compiled if "ttfm_s" in r]
    first = [m for r in compiled for m in (r["runs"][0]["masks"] if r.get("runs") else [])]
    every = [m for r in compiled for run in r.get("runs", []) for m in run["masks"]]
    later = [m for r in compiled for run in r.get("runs", [])[1:] for m in run["masks"]]
    first_us, every_us, later_us = (np.asarray(x) / 1e3 for x in (first, every, later))
    return {
        "schemas": len(rows),
        "compiled": len(compiled),
        "compile_ms": dict(zip(("p50", "p90", "p99", "max"), _pct(comp, 50, 90, 99, 100), strict=True)),
        "first_use_mask_us": dict(zip(("p50", "p99", "max"), _pct(first_us, 50, 99, 100), strict=True)),
        "all_mask_us": dict(zip(("p50", "p99", "max"), _pct(every_us, 50, 99, 100), strict=True)),
        "later_mask_us": dict(zip(("p50", "p99", "max"), _pct(later_us, 50, 99, 100), strict=True)),
        "ttfd_ms": dict(zip(("p50", "p90", "max"), _pct(ttfd, 50, 90, 100), strict=True)),
        "ttfm_ms": dict(zip(("p50", "p90"), _pct(ttfm, 50, 90), strict=True)),
        "n_first_use_masks": len(first),
        "n_masks": len(every),
        "n_later_masks": len(later),
        "n_ttfd": len(ttfd),
    }


def counts(results: dict[str, Any], jobs: dict[str, dict[str, Any]], name: str) -> dict[str, Any]:
    """Schemas by outcome; valid instances accepted / rejected; invalid instances accepted, with
    each rejected valid or accepted invalid instance listed (``jsonschema``'s verdict beside it)."""
    out: dict[str, Any] = {"status": {}, "valid": 0, "valid_accepted": 0, "invalid": 0}
    found: dict[str, list[Any]] = {"rejected": [], "invalid_accepted": [], "stopped": [], "refused": []}
    full_ok = full_no = 0
    toks = llama3_token_bytes()
    for sid, r in results.items():
        st = r.get("status", "?")
        out["status"][st] = out["status"].get(st, 0) + 1
        if st != "ok":
            found["refused"].append([sid, st, r.get("error", "")[:160]])
            continue
        if "stopped" in r:
            found["stopped"].append([sid, r["stopped"], r.get("stages", [])])
        job = jobs[sid]
        runs = r.get("runs", [])
        full = r.get("full_language", {})
        out["valid"] += len(runs)
        for k, run in enumerate(runs):
            if run["status"] == "ok":
                out["valid_accepted"] += 1
                continue
            doc = b"".join(toks[t] for t in job["valid"][k]).decode("utf-8", "replace")
            at = run["at"] or 0
            before = b"".join(toks[t] for t in job["valid"][k][:at]).decode("utf-8", "replace")
            item: dict[str, Any] = {
                "id": sid,
                "instance": k,
                "status": run["status"],
                "where": before[-60:],
                "text": doc,
            }
            if name == "cfgmask":
                accepted = k in full.get("accepted", [])
                item["full_language"] = "accepts" if accepted else full.get("error", "rejects")
                full_ok += accepted
                full_no += not accepted
            if name != "cfgmask" or not item["full_language"] == "accepts":
                item["jsonschema"] = jsonschema_verdict(json.loads(job["text"]), doc)
            found["rejected"].append(item)
        if "invalid_accepted" in r:
            out["invalid"] += len(job["invalid"])
            for k in r["invalid_accepted"]:
                doc = b"".join(toks[t] for t in job["invalid"][k]).decode("utf-8", "replace")
                verdict = jsonschema_verdict(json.loads(job["text"]), doc)
                found["invalid_accepted"].append(
                    {"id": sid, "instance": k, "text": doc, "jsonschema": verdict}
                )
    out["valid_rejected"] = out["valid"] - out["valid_accepted"]
    out["timeouts"] = sum(
        r.get("status") == "timeout" or r.get("stopped") == "timeout" for r in results.values()
    )
    if name == "cfgmask":
        out["rejected_not_canonical"] = full_ok
        out["rejected_by_full_language"] = full_no
    out["invalid_accepted"] = len(found["invalid_accepted"])
    out["findings"] = found
    return out


# ---- tables ---------------------------------------------------------------------------------------


def _f(x: float | None) -> str:
    if x is None:
        return "-"
    if x >= 1000:
        return f"{x:,.0f}"
    return f"{x:.1f}" if x >= 10 else f"{x:.2f}"


def main_table(summary: dict[str, Any]) -> str:
    head = (
        "| engine | schemas | compiled | refused / error | timeout | compile ms p50 | p90 | p99 | max "
        "| first-use mask µs p50 | p99 | max | all masks µs p50 | p99 | later instances µs p50 | p99 "
        "| first doc ms p50 | p90 |"
    )
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for name, s in summary.items():
        st, c = s["all"], s["counts"]["status"]
        other = sum(v for k, v in c.items() if k not in ("ok", "timeout"))
        cells = [
            name,
            str(st["schemas"]),
            str(st["compiled"]),
            str(other),
            str(s["counts"]["timeouts"]),
            *(_f(st["compile_ms"][q]) for q in ("p50", "p90", "p99", "max")),
            *(_f(st["first_use_mask_us"][q]) for q in ("p50", "p99", "max")),
            *(_f(st["all_mask_us"][q]) for q in ("p50", "p99")),
            *(_f(st["later_mask_us"][q]) for q in ("p50", "p99")),
            *(_f(st["ttfd_ms"][q]) for q in ("p50", "p90")),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def ratio_table(summary: dict[str, Any]) -> str:
    head = (
        "| cfgmask / peer | schemas both compiled | compile p50 | p90 | p99 | first-use mask p50 | p99 "
        "| all masks p50 | p99 | first doc p50 | p90 |"
    )
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for peer, s in summary.items():
        if "vs_cfgmask" not in s:
            continue
        cm, pe = s["vs_cfgmask"]["cfgmask"], s["vs_cfgmask"][peer]
        keys = [
            ("compile_ms", "p50"),
            ("compile_ms", "p90"),
            ("compile_ms", "p99"),
            ("first_use_mask_us", "p50"),
            ("first_use_mask_us", "p99"),
            ("all_mask_us", "p50"),
            ("all_mask_us", "p99"),
            ("ttfd_ms", "p50"),
            ("ttfd_ms", "p90"),
        ]
        cells = [peer, str(cm["compiled"])]
        for a, q in keys:
            x, y = cm[a][q], pe[a][q]
            cells.append(f"{x / y:.2f}" if x is not None and y else "-")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def counts_table(summary: dict[str, Any]) -> str:
    head = (
        "| engine | valid instances | accepted | rejected | of which not canonical (whole language accepts) "
        "| invalid instances | invalid accepted |"
    )
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for name, s in summary.items():
        c = s["counts"]
        nc = str(c["rejected_not_canonical"]) if "rejected_not_canonical" in c else "n/a"
        cells = [
            name,
            c["valid"],
            c["valid_accepted"],
            c["valid_rejected"],
            nc,
            c["invalid"],
            c["invalid_accepted"],
        ]
        lines.append("| " + " | ".join(str(x) for x in cells) + " |")
    return "\n".join(lines)


def findings_text(summary: dict[str, Any]) -> str:
    out = []
    for name, s in summary.items():
        f = s["counts"]["findings"]
        for sid, st, err in f["refused"][:MAX_LISTED]:
            out.append(f"{name}: {sid}: {st}: {err}")
        for sid, stopped, stages in f["stopped"]:
            out.append(f"{name}: {sid}: {stopped} after {stages}")
        for x in f["rejected"][:MAX_LISTED]:
            extra = f" whole language {x['full_language']};" if "full_language" in x else ""
            js = f" jsonschema: {x['jsonschema']}" if "jsonschema" in x else ""
            out.append(f"{name}: {x['id']} #{x['instance']} {x['status']} after {x['where']!r};{extra}{js}")
        for x in f["invalid_accepted"][:MAX_LISTED]:
            out.append(f"{name}: {x['id']} invalid #{x['instance']} accepted; jsonschema: {x['jsonschema']}")
    return "\n".join(out)


# ---- main -----------------------------------------------------------------------------------------


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="smoke run: 10 schemas a split, xgrammar on 12")
    p.add_argument("--splits", type=Path, default=None, help="folder of *.jsonl splits")
    p.add_argument("--limit", type=int, default=None, help="schemas a split (default: all)")
    p.add_argument(
        "--sample", action="store_true", help="with --limit: a fixed random subsample, not the first N"
    )
    p.add_argument("--engines", default=",".join(ENGINES))
    p.add_argument(
        "--xgrammar-sample", type=int, default=40, help="schemas xgrammar gets (drawn with a fixed seed)"
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=30.0,
        help="seconds a schema may take in all (compile, replay, checks)",
    )
    p.add_argument("--keep-vocab-walks", action="store_true", help="cfgmask: clear tables and automata only")
    p.add_argument(
        "--steady",
        action="store_true",
        help="cfgmask: keep what earlier schemas built (shared rules' automata, walks); clear tables only",
    )
    p.add_argument("--mem-gb", type=float, default=8.0, help="a worker's data-size limit")
    p.add_argument("--out", type=Path, default=RESULTS_DIR / "maskbench.json")
    args = p.parse_args(argv)
    if args.quick:
        args.limit = args.limit or 10
        args.xgrammar_sample = min(args.xgrammar_sample, 12)
    folder = args.splits or (SHARED_CORPUS if SHARED_CORPUS.is_dir() else TEST_CORPUS)
    records = load_corpus(folder, args.limit, args.sample)
    _log(f"{len(records)} schemas from {folder}; tokenizing instances")
    jobs = [job_of(r) for r in records]
    by_id = {j["id"]: j for j in jobs}
    xg_ids = xgrammar_ids(records, args.xgrammar_sample)

    raw: dict[str, Any] = {}
    for name in args.engines.split(","):
        mine = [j for j in jobs if name != "xgrammar" or j["id"] in xg_ids]
        _log(f"{name}: {len(mine)} schemas")
        got = run_engine(name, mine, args)
        if got is not None:
            raw[name] = got

    summary: dict[str, Any] = {}
    for name, got in raw.items():
        res = got["results"]
        summary[name] = {"all": stats(res), "counts": counts(res, by_id, name)}
        if name != "cfgmask" and "cfgmask" in raw:
            cm = raw["cfgmask"]["results"]
            both = {
                k for k, r in res.items() if r.get("status") == "ok" and cm.get(k, {}).get("status") == "ok"
            }
            summary[name]["vs_cfgmask"] = {"cfgmask": stats(cm, both), name: stats(res, both)}

    text = "\n\n".join(
        [main_table(summary), ratio_table(summary), counts_table(summary), findings_text(summary)]
    )
    print(text)
    payload = {
        "corpus": str(folder),
        "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "environment": environment([]),
        "engines": {n: {k: v for k, v in g.items() if k != "results"} for n, g in raw.items()},
        "summary": summary,
        "schemas": {n: {k: _compact(r) for k, r in g["results"].items()} for n, g in raw.items()},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(payload, indent=1) + "\n")
    _log(f"wrote {args.out}")
    return 0


def _compact(r: dict[str, Any]) -> dict[str, Any]:
    """A schema's result without its raw mask times (counts and medians instead)."""
    out = {k: v for k, v in r.items() if k != "runs"}
    runs = []
    for run in r.get("runs", []):
        m = np.asarray(run["masks"]) / 1e3
        runs.append(
            {
                "status": run["status"],
                "at": run["at"],
                "masks": len(m),
                "mask_p50_us": float(np.median(m)) if m.size else None,
                "mask_max_us": float(m.max()) if m.size else None,
                "span_ms": run["span_ns"] / 1e6,
            }
        )
    if runs:
        out["runs"] = runs
    return out


if __name__ == "__main__":
    sys.exit(main())
