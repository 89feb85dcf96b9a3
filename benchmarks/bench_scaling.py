"""How each cost grows with the size of the input: cfgmask beside xgrammar and llguidance.

For every point of every sweep (``scaling_inputs.py``: object properties, enum values, string and
array length bounds, nesting depth, GBNF rules, vocabulary size) and every engine, a fresh process
builds the vocabulary, then, cold and on one thread, compiles the grammar (cfgmask after
``cfgmask.clear_caches()``; each engine with its default options) and replays one valid document:
a mask before every token and after the last one, and every token accepted.  Per point it records
the compile time, the time to the end of the document (compile + matcher + every mask and accept),
the mask p50 and max over the document, and the growth of the process's peak RSS over the compile
and the replay.  A point past ``--timeout`` is killed; a refused grammar, a limit, an exception, a
crash or a rejected document is recorded with its reason and the sweep goes on.  Then the log-log
slope of compile time and of time to the end of the document against N, per engine and sweep.

    python -m benchmarks.bench_scaling --quick                   # smoke: 2 small points a sweep
    python -m benchmarks.bench_scaling --engines llguidance,xgrammar
    python -m benchmarks.bench_scaling --engines cfgmask --merge benchmarks/results/scaling.json

cfgmask is whatever ``import cfgmask`` finds in the worker: ``PYTHONPATH`` first, then this
checkout (built in place), then the installed package.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .common import RESULTS_DIR, environment
from .scaling_inputs import SWEEPS, vocab_size

ENGINES = ("cfgmask", "llguidance", "xgrammar")
ROOT = Path(__file__).resolve().parent.parent
DEFAULT_MD = ROOT / "docs" / "scaling.md"
SETUP_ALLOWANCE_S = 300.0  # a worker's own limit covers compile + document; this covers its start
WORKER_MAIN = (
    "import sys; sys.path.insert(0, sys.argv[1]); from benchmarks.scaling_worker import work; "
    "from pathlib import Path; import json; sys.path.pop(0); "
    "sys.exit(work(json.loads(sys.argv[2]), Path(sys.argv[3])))"
)


# ---- the parent: one worker process per point and engine ----------------------------------------


def run_point(sweep: str, point: Any, engine: str, args: argparse.Namespace) -> dict[str, Any]:
    """Run one point in a fresh worker; what the worker wrote last if it was killed."""
    with tempfile.TemporaryDirectory(prefix="bench_scaling_") as tmp:
        state = Path(tmp) / "state.json"
        job = {
            "sweep": sweep,
            "point": point,
            "engine": engine,
            "timeout": args.timeout,
            "mem_gb": args.mem_gb,
        }
        env = dict(os.environ)
        # The worker runs in an empty folder with this checkout after PYTHONPATH: cfgmask comes from
        # PYTHONPATH (another checkout), else from here, else from the installed package; the
        # harness always from here, even where PYTHONPATH's checkout has a benchmarks package.
        env["PYTHONPATH"] = os.pathsep.join(p for p in (env.get("PYTHONPATH"), str(ROOT)) if p)
        cmd = [sys.executable, "-c", WORKER_MAIN, str(ROOT), json.dumps(job), str(state)]
        try:
            proc = subprocess.run(
                cmd,
                cwd=tmp,
                env=env,
                capture_output=True,
                text=True,
                timeout=args.timeout + SETUP_ALLOWANCE_S,
            )
            rc, err = proc.returncode, proc.stderr
        except subprocess.TimeoutExpired as ex:
            rc, err = None, ex.stderr.decode(errors="replace") if isinstance(ex.stderr, bytes) else ""
        rec: dict[str, Any] = json.loads(state.read_text()) if state.exists() else {}
    rec.update(sweep=sweep, point=point, engine=engine)
    rec.setdefault("n", point if isinstance(point, int) else vocab_size(point))
    if rc == 0 and rec.get("status"):
        return rec
    if rc == -signal.SIGALRM or rc is None:
        rec["status"] = "timeout"
        where = (
            "compiling" if "compile_s" not in rec else f"at token {rec.get('steps', 0)} of {rec['n_tokens']}"
        )
        rec["reason"] = f"over {args.timeout:g} s ({where})"
    else:
        rec["status"] = "crash"
        tail = " | ".join(line for line in err.strip().splitlines()[-3:])
        rec["reason"] = f"exit {rc}: {tail}"[:400]
    return rec


def sweep_points(
    names: Sequence[str], engines: Sequence[str], args: argparse.Namespace
) -> list[dict[str, Any]]:
    out = []
    t_start = time.perf_counter()
    for name in names:
        sweep = SWEEPS[name]
        for engine in engines:
            timed_out_at = None
            for point in sweep.quick if args.quick else sweep.points:
                t0 = time.perf_counter()
                if timed_out_at is not None and not args.no_skip:
                    rec = {"sweep": name, "point": point, "engine": engine, "status": "skipped"}
                    rec["n"] = point if isinstance(point, int) else vocab_size(point)
                    rec["reason"] = f"N={timed_out_at} timed out"
                else:
                    rec = run_repeated(name, point, engine, args)
                    if rec["status"] == "timeout":
                        timed_out_at = rec["n"]
                out.append(rec)
                _log(f"{name:<10} {point!s:>11} {engine:<10} {_summary(rec)}", t0, t_start)
    return out


MEDIANS = ("compile_s", "compile_cpu_s", "end_s", "end_cpu_s", "mask_p50_us", "mask_max_us", "rss_growth_mb")


def run_repeated(sweep: str, point: Any, engine: str, args: argparse.Namespace) -> dict[str, Any]:
    """Up to ``--reps`` fresh workers while they stay cheap (each one under ``--rep-budget``
    seconds of wall clock, process start included) and succeed; the median of each cost.  The
    small points are where the noise of a shared machine is as large as the cost."""
    reps = []
    while len(reps) < args.reps:
        t0 = time.perf_counter()
        rec = run_point(sweep, point, engine, args)
        if rec["status"] != "ok":
            return rec  # a failure on any run is the finding
        reps.append(rec)
        if time.perf_counter() - t0 > args.rep_budget:
            break
    out = dict(reps[0])
    out["reps"] = len(reps)
    for k in MEDIANS:
        values = sorted(r[k] for r in reps if k in r)
        if values:
            out[k] = statistics.median(values)
            if len(values) > 1:
                out[k + "_all"] = values
    return out


def _summary(rec: dict[str, Any]) -> str:
    s = rec["status"]
    if "compile_s" in rec:
        s += f"  compile {_ms(rec['compile_s'])} ms"
    if "end_s" in rec:
        s += f"  end of document {_ms(rec['end_s'])} ms ({rec['n_tokens']} tokens)"
    if rec.get("reason"):
        s += f"  [{rec['reason'][:160]}]"
    return s


def _log(msg: str, t0: float, t_start: float) -> None:
    now = time.perf_counter()
    print(f"[{now - t_start:7.1f} s] {msg}  ({now - t0:.1f} s)", file=sys.stderr, flush=True)


# ---- slopes --------------------------------------------------------------------------------------


def slope(points: Sequence[tuple[float, float]]) -> float | None:
    """Least-squares slope of log(cost) against log(N); None for fewer than two distinct N."""
    xs = [math.log(n) for n, _ in points]
    ys = [math.log(c) for _, c in points]
    if len(set(xs)) < 2:
        return None
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum((x - mx) ** 2 for x in xs)


def slopes(points: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per sweep and engine: compile over every point whose compile finished (the document may
    then have been rejected or run out of time), end of document over the "ok" points."""
    out = []
    for sweep in SWEEPS:
        for engine in ENGINES:
            recs = [r for r in points if r["sweep"] == sweep and r["engine"] == engine]
            if not recs:
                continue
            row: dict[str, Any] = {"sweep": sweep, "engine": engine, "points": len(recs)}
            for cost, ok in (
                ("compile_s", lambda r: "compile_s" in r),
                ("compile_cpu_s", lambda r: "compile_s" in r),
                ("end_s", lambda r: r["status"] == "ok"),
                ("end_cpu_s", lambda r: r["status"] == "ok"),
            ):
                pts = [(r["n"], r[cost]) for r in recs if ok(r) and r.get(cost, 0) > 0]
                row[cost] = {"slope": slope(pts), "n_points": len(pts)}
                if pts:
                    row[cost]["n_range"] = [min(n for n, _ in pts), max(n for n, _ in pts)]
            out.append(row)
    return out


# ---- results: JSON (mergeable) and markdown ---------------------------------------------------------


def merge(old_paths: Sequence[str], new: dict[str, Any] | None) -> dict[str, Any]:
    """The points of earlier runs plus this run's (if any); a point this run measured (same sweep,
    point and engine) replaces the earlier one."""
    key = lambda r: (r["sweep"], str(r["point"]), r["engine"])  # noqa: E731
    points: dict[tuple[str, str, str], dict[str, Any]] = {}
    runs: list[dict[str, Any]] = []
    for path in old_paths:
        old = json.loads(Path(path).read_text())
        runs += old["runs"]
        points.update((key(r), r) for r in old["points"])
    if new:
        runs.append(new["run"])
        points.update((key(r), r) for r in new["points"])
    order = {s: i for i, s in enumerate(SWEEPS)}
    merged = sorted(points.values(), key=lambda r: (order[r["sweep"]], r["n"], ENGINES.index(r["engine"])))
    return {"runs": runs, "points": merged, "slopes": slopes(merged)}


CELL = {
    "refused": "refused",
    "limit": "limit",
    "error": "error",
    "timeout": "t/o",
    "skipped": "skip",
    "crash": "crash",
    "rejected": "rejected",
    "memory": "memory",
}


def markdown(res: dict[str, Any]) -> str:
    points = res["points"]
    engines = [e for e in ENGINES if any(r["engine"] == e for r in points)]
    lines = ["# Scaling: how each cost grows with the size of the input", ""]
    lines += _intro(res)
    for sweep in SWEEPS.values():
        recs = [r for r in points if r["sweep"] == sweep.name]
        if recs:
            lines += _sweep_tables(sweep.name, sweep.what, recs, engines)
    lines += ["## Log-log slopes", ""]
    lines += [
        "Least squares of log(cost) on log(N) over the points that succeeded (compile: every point whose",
        "compile finished; end of document: the points accepted to the end); `k/n`: points used of the",
        "points run.  1 is linear, 2 quadratic; a slope over a range where the cost is mostly fixed",
        "(process-level overheads, the vocabulary) reads low.  CPU: the same fit on the process's CPU",
        "time, which other jobs on a shared machine disturb less than the wall clock.",
        "",
        "| sweep | engine | compile | CPU | points | end of document | CPU | points |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for row in res["slopes"]:
        c, e = row["compile_s"], row["end_s"]
        cc, ec, k = row.get("compile_cpu_s"), row.get("end_cpu_s"), row["points"]
        lines.append(
            f"| {row['sweep']} | {row['engine']} | {_slope(c)} | {_slope(cc)} | {c['n_points']}/{k} "
            f"| {_slope(e)} | {_slope(ec)} | {e['n_points']}/{k} |"
        )
    return "\n".join(lines) + "\n"


def _intro(res: dict[str, Any]) -> list[str]:
    out = [
        "Written by `python -m benchmarks.bench_scaling` (benchmarks/README.md says how to run it); every",
        "point in its own fresh process, one thread, cold: cfgmask after `cfgmask.clear_caches()`, the",
        "peers in a new process; each engine with its default options (cfgmask",
        "`Grammar.from_json_schema(text)` = canonical, strict; xgrammar `compile_json_schema(text)`;",
        "llguidance `grammar_from_json_schema(text)`; GBNF as in bench_gbnf).  Documents are tokenized",
        "by the vocabulary's own BPE (Llama-3 except in the vocabulary sweep, where quicktok's cl100k,",
        "Llama-3, Qwen3 and o200k are used as they are, and cl100k's first 50,000 ranks, longest match",
        "first, stand in for a ~50k vocabulary: quicktok ships none of ~50k and none of ~256k).",
        "",
        "* **compile**: grammar text to compiled grammar (llguidance: the `LLMatcher`).",
        "* **end of document**: compile + matcher + a mask before every token and after the last + every",
        "  accept, wall clock.",
        "* **mask p50 / max**: over the masks of that replay (µs).",
        "* **RSS**: growth of the process's peak resident memory from just before the compile to the end",
        "  of the document (MB).",
        "* **tokens**: the document's length in tokens.",
        "* Cells that are not numbers: `refused` (the engine rejects the grammar), `limit` (a compile",
        "  limit), `error` (another exception), `t/o` (past the timeout), `skip` (not run: a smaller N",
        "  timed out), `crash` (the process died), `rejected` (the document was not accepted; the times",
        "  are then up to the rejection).  The reasons are listed under each table.",
        "",
        "Runs merged here:",
        "",
    ]
    for run in res["runs"]:
        eng = ", ".join(f"{k} {v['version']}" for k, v in run["engines"].items())
        where = f", cfgmask from {run['cfgmask']}" if run.get("cfgmask") else ""
        out.append(
            f"* run ending {run['time']}: {eng}{where}; harness at {run['cfgmask_commit']}; "
            f"{run['processor']}, {run['cpus']} cores (shared{_load(run)}), Python {run['python']}; "
            f"timeout {run['timeout']:g} s; {_reps(run)}; {run['wall_s'] / 60:.1f} min"
            + (" (quick)" if run.get("quick") else "")
        )
    return out + [""]


def _load(run: dict[str, Any]) -> str:
    if "loadavg_start" not in run:
        return ""
    return (
        f": load average {run['loadavg_start'][0]:.1f} at the start, {run['loadavg_end'][0]:.1f} at the end"
    )


def _reps(run: dict[str, Any]) -> str:
    if run.get("reps", 1) == 1:
        return "one run a point"
    return f"median of up to {run['reps']} runs a point (those under {run['rep_budget_s']:g} s a run)"


def _sweep_tables(name: str, what: str, recs: list[dict[str, Any]], engines: list[str]) -> list[str]:
    ns = sorted({r["n"] for r in recs})
    by = {(r["n"], r["engine"]): r for r in recs}
    out = [f"## {name}: {what}", ""]
    head = "| N | tokens | " + " | ".join(engines) + " |"
    rule = "|---:|---:|" + "---:|" * len(engines)
    costs = (
        ("compile (ms)", lambda r: _ms(r["compile_s"]) if "compile_s" in r else None),
        ("end of document (ms)", lambda r: _ms(r["end_s"]) if "end_s" in r else None),
        (
            "mask p50 / max (µs)",
            lambda r: f"{_num(r['mask_p50_us'])} / {_num(r['mask_max_us'])}" if "mask_p50_us" in r else None,
        ),
        ("RSS growth (MB)", lambda r: _num(r["rss_growth_mb"]) if "rss_growth_mb" in r else None),
    )
    for title, value in costs:
        out += [f"**{title}**", "", head, rule]
        for n in ns:
            row = [by.get((n, e)) for e in engines]
            toks = next((f"{r['n_tokens']:,}" for r in row if r and "n_tokens" in r), "")
            vocab = next((f" ({r['point']})" for r in row if r and not isinstance(r["point"], int)), "")
            cells = [_cell(r, value(r)) if r else "" for r in row]
            out.append(f"| {n:,}{vocab} | {toks} | " + " | ".join(cells) + " |")
        out.append("")
    notes = [f"* {r['engine']}, N={r['n']:,}: {r['status']}: {r['reason']}" for r in recs if r.get("reason")]
    return out + (["Reasons:", "", *notes, ""] if notes else [])


def _cell(r: dict[str, Any], value: str | None) -> str:
    if r["status"] == "ok":
        return value or "-"
    mark = CELL.get(r["status"], r["status"])
    return f"{value} ({mark})" if value and r["status"] in ("rejected", "timeout") else mark


def _ms(s: float) -> str:
    return _num(s * 1e3)


def _num(x: float) -> str:
    if x >= 100:
        return f"{x:,.0f}"
    if x >= 10:
        return f"{x:.1f}"
    return f"{x:.2f}"


def _slope(c: dict[str, Any] | None) -> str:
    return "-" if c is None or c["slope"] is None else f"{c['slope']:.2f}"


# ---- main ----------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter
    )
    ap.add_argument("--sweeps", default=",".join(SWEEPS), help="comma-separated, of: " + ", ".join(SWEEPS))
    ap.add_argument("--engines", default=",".join(ENGINES))
    ap.add_argument("--quick", action="store_true", help="two small points a sweep")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds for compile + document (120)")
    ap.add_argument("--mem-gb", type=float, default=8.0, help="a worker's data-size limit, GiB (8)")
    ap.add_argument("--reps", type=int, help="fresh runs of a cheap point, median kept (3; --quick: 1)")
    ap.add_argument(
        "--rep-budget", type=float, default=10.0, help="repeat a point only if a run takes < S s (10)"
    )
    ap.add_argument("--no-skip", action="store_true", help="run larger N after a timeout too")
    ap.add_argument("--merge", action="append", default=[], metavar="JSON", help="earlier results to combine")
    ap.add_argument("--report", action="store_true", help="run nothing: tables from the --merge files")
    ap.add_argument("--out", help="JSON (default benchmarks/results/scaling[_quick].json)")
    ap.add_argument("--md", help=f"markdown (default {DEFAULT_MD.relative_to(ROOT)}; none for --quick)")
    args = ap.parse_args(argv)
    sweeps = [s for s in args.sweeps.split(",") if s]
    engines = [e for e in args.engines.split(",") if e]
    for bad in [s for s in sweeps if s not in SWEEPS] + [e for e in engines if e not in ENGINES]:
        ap.error(f"unknown sweep or engine: {bad}")
    if args.reps is None:
        args.reps = 1 if args.quick else 3
    if args.report:
        if not args.merge:
            ap.error("--report needs --merge JSON")
        return write(merge(args.merge, None), args)
    t0, load0 = time.perf_counter(), [round(x, 2) for x in os.getloadavg()]
    points = sweep_points(sweeps, engines, args)
    run = environment([])
    run.update(
        engines={
            e: {"version": next((r["version"] for r in points if r["engine"] == e and "version" in r), "?")}
            for e in engines
        },
        cfgmask=next((r["cfgmask"] for r in points if r.get("cfgmask")), None)
        if "cfgmask" in engines
        else None,
        sweeps=sweeps,
        quick=args.quick,
        timeout=args.timeout,
        reps=args.reps,
        loadavg_start=load0,
        loadavg_end=[round(x, 2) for x in os.getloadavg()],
        rep_budget_s=args.rep_budget,
        wall_s=time.perf_counter() - t0,
    )
    return write(merge(args.merge, {"run": run, "points": points}), args)


def write(res: dict[str, Any], args: argparse.Namespace) -> int:
    out = (
        Path(args.out) if args.out else RESULTS_DIR / ("scaling_quick.json" if args.quick else "scaling.json")
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=1) + "\n")
    text = markdown(res)
    print(text)
    md = Path(args.md) if args.md else (None if args.quick else DEFAULT_MD)
    if md:
        md.write_text(text)
    print(f"results: {out}" + (f", {md}" if md else ""), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
