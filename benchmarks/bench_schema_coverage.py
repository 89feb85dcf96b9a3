"""Issue 13's coverage target on every visible JSONSchemaBench split: does cfgmask compile at least
max(llguidance, xgrammar minus the schemas xgrammar gets wrong), with 0 invalid instances accepted?

    nice -n 19 python -m benchmarks.bench_schema_coverage [--stride 4] [--stop-at 03:05] [--report-only]

Every schema of every split (``/work/shared/corpora/jsonschemabench`` when it exists, else the
40-a-split sample in ``tests/corpora``) goes to each engine in its own worker process
(``bench_schemas.Worker``: caches cleared, a compile past ``--timeout`` killed and counted apart),
with each engine's JSON Schema defaults as ``bench_schemas.compile_schema`` sets them: cfgmask
``Grammar.from_json_schema(strict=True)`` (canonical), llguidance ``grammar_from_json_schema``,
xgrammar ``compile_json_schema(any_whitespace=True, strict_mode=False)``.  Every test instance of
the corpus (``json.dumps`` default and compact, Llama-3 BPE) is then fed token by token to a fresh
matcher; its verdict is the corpus's ``valid`` flag.  A valid instance that canonical cfgmask
rejects is checked again, in this process, against ``canonical=False`` (the whole language, as
``bench_maskbench`` does): only one that the whole language also rejects is a real disagreement.

Schemas are taken in two passes: every ``--stride``-th schema of each split first (a stratified
sample), then the rest; two worker processes at a time.  Raw results are saved after every chunk
(``benchmarks/results/schema_coverage_raw.json``), so a run stopped by ``--stop-at`` (UTC HH:MM)
or killed can be reported with ``--report-only``: a split's row counts the schemas that every
engine finished.  Writes ``benchmarks/results/schema_coverage.json`` and ``docs/schema_coverage.md``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from .bench_maskbench import SHARED_CORPUS, TEST_CORPUS, load_corpus
from .bench_schemas import Worker, instances, jsonschema_verdict
from .common import RESULTS_DIR, environment
from .schema_refusals import reason_of

ROOT = Path(__file__).resolve().parent.parent
ENGINES = ("cfgmask", "llguidance", "xgrammar")
RAW = RESULTS_DIR / "schema_coverage_raw.json"
OUT = RESULTS_DIR / "schema_coverage.json"
DOC = ROOT / "docs" / "schema_coverage.md"
CHUNK = 50  # schemas per task: the unit of work a thread takes and of saving


def _log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# ---- running ----------------------------------------------------------------------------------


def tasks_of(records: list[dict[str, Any]], stride: int) -> list[tuple[int, str, list[dict[str, Any]]]]:
    """(pass, engine, chunk of records): pass k holds the schemas whose index in their split is k
    modulo ``stride``, so that each finished pass is a stratified sample of every split."""
    by_split: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        by_split.setdefault(r["split"], []).append(r)
    passes: list[list[tuple[float, dict[str, Any]]]] = [[] for _ in range(stride)]
    for rows in by_split.values():
        for i, r in enumerate(rows):
            passes[i % stride].append((i / len(rows), r))
    # within a pass the splits are interleaved in proportion, so that a pass cut short by
    # --stop-at still samples every split
    ordered = [[r for _, r in sorted(p, key=lambda x: x[0])] for p in passes]
    out = []
    for k, rows in enumerate(ordered):
        for name in ENGINES:
            out += [(k, name, rows[i : i + CHUNK]) for i in range(0, len(rows), CHUNK)]
    return out


def _pick(
    todo: list[tuple[int, str, list[dict[str, Any]]]], current: str | None, prefer: tuple[str, ...]
) -> tuple[int, str, list[dict[str, Any]]] | None:
    """The next task of the earliest unfinished pass: one for the engine the thread's worker runs
    (no restart), else one of its preferred engines, else any."""
    if not todo:
        return None
    first = min(k for k, _, _ in todo)
    now = [t for t in todo if t[0] == first]
    for name in (current, *prefer):
        for t in now:
            if t[1] == name:
                todo.remove(t)
                return t
    todo.remove(now[0])
    return now[0]


def run_all(records: list[dict[str, Any]], args: argparse.Namespace, raw: dict[str, Any]) -> None:
    stop = _stop_time(args.stop_at)
    done = {(r["id"], e) for r in records for e in ENGINES if e in raw["schemas"].get(r["id"], {})}
    todo = []
    for k, name, chunk in tasks_of(records, args.stride):
        rest = [r for r in chunk if (r["id"], name) not in done]
        if rest and name in args.engines.split(","):
            todo.append((k, name, rest))
    total = len(todo)
    lock = threading.Lock()
    insts = {r["id"]: instances(r) for r in records}
    _log(f"{total} chunks of up to {CHUNK} schemas to run, {args.stride} passes")
    # xgrammar compiles slowest: one thread starts on it, the other on the two others
    prefers = [("xgrammar", "cfgmask", "llguidance"), ("cfgmask", "llguidance", "xgrammar")]

    def work(prefer: tuple[str, ...]) -> None:
        worker: Worker | None = None
        try:
            while not (stop and time.time() > stop):
                with lock:
                    task = _pick(todo, worker.name if worker else None, prefer)
                if task is None:
                    return
                k, name, chunk = task
                if worker is None or worker.name != name:
                    if worker is not None:
                        worker.close()
                    worker = Worker(name)
                    with lock:
                        raw["versions"][name] = worker.version
                t0 = time.time()
                for r in chunk:
                    if stop and time.time() > stop:
                        break
                    docs = [(d["text"], d["tokens"]) for d in insts[r["id"]]]
                    res = worker.run(r["schema"], docs, args.timeout)
                    with lock:
                        raw["schemas"].setdefault(r["id"], {})[name] = res
                with lock:
                    _log(
                        f"pass {k} {name}: {len(chunk)} schemas in "
                        f"{time.time() - t0:.0f} s ({total - len(todo)}/{total} chunks taken)"
                    )
                    _save_raw(raw)
        finally:
            if worker is not None:
                worker.close()

    threads = [threading.Thread(target=work, args=(prefers[i % 2],)) for i in range(args.workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    _save_raw(raw)


def _stop_time(hhmm: str | None) -> float | None:
    if not hhmm:
        return None
    now = dt.datetime.now(dt.UTC)
    h, m = map(int, hhmm.split(":"))
    at = now.replace(hour=h, minute=m, second=0, microsecond=0)
    if at < now - dt.timedelta(hours=12):
        at += dt.timedelta(days=1)
    return at.timestamp()


def _save_raw(raw: dict[str, Any]) -> None:
    RAW.parent.mkdir(exist_ok=True)
    tmp = RAW.with_suffix(".tmp")
    tmp.write_text(json.dumps(raw) + "\n")
    tmp.replace(RAW)


# ---- cfgmask's whole language for the valid instances canonical mode rejects ---------------------


def full_language_check(records: list[dict[str, Any]], raw: dict[str, Any]) -> None:
    """For each schema where canonical cfgmask rejected a valid instance: does ``canonical=False``
    (strict, else lenient where strict refuses the whole language) accept it, bytes fed whole?
    Stored as ``raw["full_language"][id][test index] = "accepted" | "rejected" | error``."""
    import cfgmask

    from .common import CfgmaskEngine

    engine: CfgmaskEngine | None = None
    fl = raw.setdefault("full_language", {})
    for r in records:
        x = raw["schemas"].get(r["id"], {}).get("cfgmask")
        if not x or x["status"] != "ok" or r["id"] in fl:
            continue
        insts = instances(r)
        bad = [
            k
            for k, (d, v) in enumerate(zip(insts, x["verdicts"], strict=True))
            if d["valid"] and _verdict(v) != "accepted"
        ]
        if not bad:
            continue
        engine = engine or CfgmaskEngine()
        out: dict[str, str] = {}
        try:
            try:
                g = cfgmask.Grammar.from_json_schema(r["schema"], canonical=False, strict=True)
            except cfgmask.errors.GrammarError:
                g = cfgmask.Grammar.from_json_schema(r["schema"], canonical=False, strict=False)
            compiled = cfgmask.compile(g, engine.vocab)
            for k in bad:
                m = cfgmask.Matcher(compiled)
                ok = bool(m.accept_bytes(insts[k]["text"].encode())) and bool(m.is_accepting())
                out[str(k)] = "accepted" if ok else "rejected"
        except Exception as ex:  # noqa: BLE001 - recorded: a disagreement we cannot clear
            out = {str(k): f"error: {type(ex).__name__}: {ex}"[:200] for k in bad}
        fl[r["id"]] = out
    _save_raw(raw)


def _verdict(v: Any) -> str:
    """A worker's verdict: -1 accepted, an int the first rejected token, a list a cfgmask
    token/bytes disagreement, a string an exception."""
    if isinstance(v, list):
        return "mismatch"
    if isinstance(v, str):
        return "error"
    return "accepted" if v == -1 else "rejected"


# ---- the table --------------------------------------------------------------------------------


def summarize(records: list[dict[str, Any]], raw: dict[str, Any], stride: int) -> dict[str, Any]:
    splits: dict[str, Any] = {}
    short: dict[str, Counter[str]] = {}
    short_ids: dict[str, list[str]] = {}
    findings: list[dict[str, Any]] = []
    fl = raw.get("full_language", {})
    totals: Counter[str] = Counter()
    pairs: dict[str, Counter[str]] = {}
    for r in records:
        totals[r["split"]] += 1
    for r in records:
        s = r["split"]
        row = splits.setdefault(s, _empty_row(totals[s]))
        got = raw["schemas"].get(r["id"], {})
        if "cfgmask" in got and "llguidance" in got:  # the wider comparison, without xgrammar
            pair = pairs.setdefault(s, Counter())
            pair["schemas"] += 1
            for e in ("cfgmask", "llguidance"):
                pair[e] += got[e]["status"] == "ok"
        if not all(e in got for e in ENGINES):
            continue
        row["covered"] += 1
        insts = instances(r)
        ok: dict[str, bool] = {}
        for e in ENGINES:
            x = got[e]
            if x["status"] == "timeout":
                row[f"{e}_timeout"] += 1
            if x["status"] != "ok" or "verdicts" not in x:
                ok[e] = False
                continue
            ok[e] = True
            row[f"{e}_compiled"] += 1
            wrong = False
            for k, (d, v) in enumerate(zip(insts, x["verdicts"], strict=True)):
                verdict = _verdict(v)
                key = "valid" if d["valid"] else "invalid"
                row[f"{e}_{key}"] += 1
                if verdict in ("error", "mismatch"):
                    wrong = True
                    findings.append(_finding(e, r, d, verdict, v))
                    continue
                if d["valid"] and verdict == "rejected":
                    if e == "cfgmask" and fl.get(r["id"], {}).get(str(k)) == "accepted":
                        row["cfgmask_valid_rejected_not_canonical"] += 1
                        continue
                    wrong = True
                    row[f"{e}_valid_rejected"] += 1
                    findings.append(_finding(e, r, d, "valid rejected", v))
                elif not d["valid"] and verdict == "accepted":
                    wrong = True
                    row[f"{e}_invalid_accepted"] += 1
                    findings.append(_finding(e, r, d, "invalid accepted", v))
            row[f"{e}_wrong"] += wrong
        xgr_right = ok["xgrammar"] and not _schema_wrong(got["xgrammar"], insts)
        row["xgrammar_right"] += xgr_right
        if not ok["cfgmask"] and (ok["llguidance"] or xgr_right):
            reason = _reason(got["cfgmask"])
            short.setdefault(s, Counter())[reason] += 1
            short_ids.setdefault(f"{s}\t{reason}", []).append(r["id"])
    for row in splits.values():
        row["target"] = max(row["llguidance_compiled"], row["xgrammar_compiled"] - row["xgrammar_wrong"])
        row["meets"] = row["cfgmask_compiled"] >= row["target"]
        row["sampled"] = row["covered"] < row["schemas"]
    return {
        "stride": stride,
        "splits": splits,
        "cfgmask_vs_llguidance": {s: dict(c) for s, c in pairs.items()},
        "cfgmask_refuses_peer_compiles": {s: dict(c.most_common()) for s, c in short.items()},
        "cfgmask_refuses_ids": short_ids,
        "findings": findings,
    }


def _empty_row(n: int) -> dict[str, Any]:
    row: dict[str, Any] = {"schemas": n, "covered": 0, "xgrammar_right": 0}
    for e in ENGINES:
        for k in ("compiled", "timeout", "wrong", "valid", "invalid", "valid_rejected", "invalid_accepted"):
            row[f"{e}_{k}"] = 0
    row["cfgmask_valid_rejected_not_canonical"] = 0
    return row


def _schema_wrong(x: dict[str, Any], insts: list[dict[str, Any]]) -> bool:
    for d, v in zip(insts, x["verdicts"], strict=True):
        verdict = _verdict(v)
        if verdict in ("error", "mismatch") or (verdict == "accepted") != d["valid"]:
            return True
    return False


def _reason(x: dict[str, Any]) -> str:
    if x["status"] == "timeout":
        return "timeout"
    err = x.get("error", "")
    msg = err.split(": ", 1)[1] if ": " in err else err
    return f"{x['status']}: {reason_of(msg)}"


def _finding(e: str, r: dict[str, Any], d: dict[str, Any], kind: str, v: Any) -> dict[str, Any]:
    return {
        "engine": e,
        "id": r["id"],
        "test": d["test"],
        "sep": d["sep"],
        "kind": kind,
        "verdict": v,
        "text": d["text"][:300],
        "jsonschema": jsonschema_verdict(r["schema"], d["text"]),
    }


def table(summary: dict[str, Any]) -> str:
    stride = summary["stride"]
    lines = [
        "| split | schemas run / in split | cfgmask compiled | llguidance compiled | xgrammar compiled "
        "| xgrammar wrong | target = max(llg, xgr − wrong) | cfgmask ≥ target | timeouts cfg/llg/xgr "
        "| invalid accepted cfg/llg/xgr | valid rejected cfg (not canonical) / llg / xgr |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    tot: Counter[str] = Counter()
    for s, row in summary["splits"].items():
        lines.append(_row(s, row, stride))
        for k, v in row.items():
            if isinstance(v, int) and not isinstance(v, bool):
                tot[k] += v
    all_row: dict[str, Any] = dict(tot)
    all_row["target"] = sum(r["target"] for r in summary["splits"].values())
    all_row["meets"] = all(r["meets"] for r in summary["splits"].values())
    all_row["sampled"] = any(r["sampled"] for r in summary["splits"].values())
    lines.append(_row("all (sum)", all_row, stride))
    return "\n".join(lines)


def _row(s: str, r: dict[str, Any], stride: int) -> str:
    run = f"{r['covered']} / {r['schemas']}"
    if r["sampled"]:
        run += " (sample)"
    return (
        f"| {s} | {run} | {r['cfgmask_compiled']} | {r['llguidance_compiled']} | {r['xgrammar_compiled']} "
        f"| {r['xgrammar_wrong']} | {r['target']} | {'yes' if r['meets'] else '**no**'} "
        f"| {r['cfgmask_timeout']}/{r['llguidance_timeout']}/{r['xgrammar_timeout']} "
        f"| {r['cfgmask_invalid_accepted']}/{r['llguidance_invalid_accepted']}"
        f"/{r['xgrammar_invalid_accepted']} "
        f"| {r['cfgmask_valid_rejected']} ({r['cfgmask_valid_rejected_not_canonical']}) "
        f"/ {r['llguidance_valid_rejected']} / {r['xgrammar_valid_rejected']} |"
    )


def pair_table(summary: dict[str, Any]) -> str:
    lines = [
        "| split | schemas both ran / in split | cfgmask compiled | llguidance compiled |",
        "|---|---|---|---|",
    ]
    for s, c in summary["cfgmask_vs_llguidance"].items():
        n = summary["splits"][s]["schemas"]
        lines.append(f"| {s} | {c['schemas']} / {n} | {c['cfgmask']} | {c['llguidance']} |")
    return "\n".join(lines)


def shortfall_text(summary: dict[str, Any]) -> str:
    lines = []
    for s, reasons in summary["cfgmask_refuses_peer_compiles"].items():
        n = sum(reasons.values())
        lines.append(f"* **{s}** ({n}):")
        for reason, c in reasons.items():
            ids = summary["cfgmask_refuses_ids"][f"{s}\t{reason}"]
            more = ", …" if len(ids) > 4 else ""
            lines.append(f"  * {c} × {reason} ({', '.join(i.split('/')[-1] for i in ids[:4])}{more})")
    return "\n".join(lines) or "(none)"


def findings_text(summary: dict[str, Any]) -> str:
    lines = []
    by: Counter[tuple[str, str]] = Counter((f["engine"], f["kind"]) for f in summary["findings"])
    for (e, kind), c in sorted(by.items()):
        fs = [f for f in summary["findings"] if f["engine"] == e and f["kind"] == kind]
        agree = sum(f["jsonschema"].startswith("valid") == (kind == "invalid accepted") for f in fs)
        lines.append(f"* {e} {kind}: {c} instances (jsonschema sides with {e} on {agree})")
        for f in fs[: 6 if e == "cfgmask" else 3]:
            lines.append(
                f"  * {f['id']} test {f['test']} ({f['sep']}): `{f['text'][:120]}` "
                f"— jsonschema: {f['jsonschema'][:100]}"
            )
    return "\n".join(lines) or "(none)"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--splits", type=Path, help="a folder of JSONSchemaBench .jsonl splits")
    ap.add_argument("--stride", type=int, default=4, help="the first pass takes every N-th schema")
    ap.add_argument("--timeout", type=float, default=30.0, help="seconds per compile")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--engines", default=",".join(ENGINES))
    ap.add_argument("--limit", type=int, help="schemas a split (smoke runs)")
    ap.add_argument("--stop-at", help="UTC HH:MM: take no new schema after it")
    ap.add_argument("--resume", action="store_true", help="keep the raw results of an earlier run")
    ap.add_argument("--report-only", action="store_true", help="report the saved raw results")
    args = ap.parse_args(argv)
    folder = args.splits or (SHARED_CORPUS if any(SHARED_CORPUS.glob("*.jsonl")) else TEST_CORPUS)
    records = load_corpus(folder, args.limit, sample=False)
    _log(f"{len(records)} schemas from {folder}")
    fresh = {"corpus": str(folder), "versions": {}, "schemas": {}}
    raw = json.loads(RAW.read_text()) if (args.resume or args.report_only) and RAW.exists() else fresh
    t0 = time.time()
    if not args.report_only:
        run_all(records, args, raw)
        _log(f"ran for {time.time() - t0:.0f} s")
    full_language_check(records, raw)
    summary = summarize(records, raw, args.stride)
    text = (
        f"{table(summary)}\n\ncfgmask beside llguidance alone, on every schema both ran "
        f"(more than the three-engine sample when xgrammar was cut short):\n\n{pair_table(summary)}"
        f"\n\ncfgmask refuses, a peer compiles (llguidance, or xgrammar without a "
        f"wrong verdict), by reason:\n{shortfall_text(summary)}\n\n"
        f"Disagreements with the corpus's verdicts:\n{findings_text(summary)}"
    )
    print(text)
    payload = {
        "corpus": raw["corpus"],
        "versions": raw["versions"],
        "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "environment": environment([]),
        **summary,
    }
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(json.dumps(payload, indent=1) + "\n")
    DOC.write_text(_doc(text, payload))
    _log(f"wrote {OUT} and {DOC}")
    return 0


def _doc(text: str, payload: dict[str, Any]) -> str:
    v = payload["versions"]
    env = payload["environment"]
    return (
        "# JSON Schema coverage on JSONSchemaBench (issue 13)\n\n"
        "Written by `python -m benchmarks.bench_schema_coverage` (see its docstring for the method):\n"
        "each schema compiled by each engine in a worker process (30 s budget), then every test\n"
        "instance of the corpus, `json.dumps` default and compact, fed as Llama-3 tokens; verdicts are\n"
        "the corpus's.  *xgrammar wrong* = schemas xgrammar compiles but gets at least one instance\n"
        "wrong (an invalid one accepted or a valid one rejected); cfgmask's valid instances rejected\n"
        "only because they are not canonical (the `canonical=False` language accepts them) are in\n"
        "parentheses and not counted as wrong.\n\n"
        f"cfgmask {v.get('cfgmask', '?')} (commit {env.get('cfgmask_commit', '?')}), llguidance "
        f"{v.get('llguidance', '?')}, xgrammar {v.get('xgrammar', '?')}; corpus `{payload['corpus']}`.\n\n"
        f"{text}\n"
    )


if __name__ == "__main__":
    sys.exit(main())
