"""Applying a bitmask to CPU logits: µs a row, cfgmask beside its peers, one thread.

For each vocabulary size (32,000 Llama-2, 128,256 Llama-3, 200,019 o200k), batch (1, 8, 64),
logits dtype (float32, bfloat16, float16) and row selection (every row; or ``indices`` naming
every other row, the batch of a server mixing constrained and free requests), the same random
bitmask (each token allowed with probability ``--density``, 0.5 by default: every word mixed,
the kernel's slowest case) is applied to the same torch CPU logits by

* ``cfgmask``: ``cfgmask.apply_bitmask_inplace`` (the C kernel of csrc/apply.c);
* ``xgrammar``: ``xgrammar.apply_token_bitmask_inplace`` (its CPU backend, C++);
* ``llg-numpy``: ``llguidance.numpy.apply_token_bitmask_inplace`` on the numpy view of the logits
  (float32 and float16 only: numpy has no bfloat16; no ``indices`` argument);
* ``llg-torch``: ``llguidance.torch.apply_token_bitmask_inplace`` (``torch.compile``d; its first
  call compiles for minutes, done before timing; no ``indices`` argument);
* ``fill``: ``Tensor.fill_(-inf)`` on the rows masked: writing every logit once, the floor a
  kernel that touches every logit cannot beat (at batch 64 the rows no longer fit in the
  cache and this is the machine's memory bandwidth).

Each call is timed with ``perf_counter_ns`` and divided by the rows it masked; the statistics
(median, p90, p99) are over ``--reps`` calls after a warm-up, the engines taking turns call by
call (so each call finds its logits evicted from L2 by the other engines' buffers: a cold-cache
measurement); ``--hot`` runs each engine's calls in a row instead (logits that fit stay
cached, as fresh logits from the LM head usually are).  Masking is idempotent, so each
engine reuses its own logits buffer: every call writes the same elements.  The ratio columns
are cfgmask's median over the peer's (< 1: cfgmask faster).  Prints a table and writes
``benchmarks/results/apply.json``.

    python -m benchmarks.bench_apply                 # about 5 minutes on 2 busy cores
    python -m benchmarks.bench_apply --quick         # V = 128,256 only, fewer calls
    python -m benchmarks.bench_apply --quick --hot   # the same, logits kept in the cache
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from collections.abc import Callable

import numpy as np

from .common import RESULTS_DIR, single_thread

VOCABS = (32_000, 128_256, 200_019)
BATCHES = (1, 8, 64)
DTYPES = ("float32", "bfloat16", "float16")
ENGINES = ("cfgmask", "xgrammar", "llg-numpy", "llg-torch")


def percentile(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(q / 100 * len(s)))]


def time_interleaved(
    calls: dict[str, Callable[[], None]], rows: int, reps: int, warmup: int, hot: bool = False
) -> dict:
    """Each call ``reps`` times, round robin (so that a busy spell of the machine falls on
    every engine alike), in µs a row; hot: each engine's calls in a row instead (its logits
    stay in the cache when they fit)."""
    for fn in calls.values():
        for _ in range(warmup):
            fn()
    per_row: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(1 if hot else reps):
        for name, fn in calls.items():
            for _ in range(reps if hot else 1):
                t0 = time.perf_counter_ns()
                fn()
                per_row[name].append((time.perf_counter_ns() - t0) / 1e3 / rows)
    return {name: stats(xs) for name, xs in per_row.items()}


def stats(xs: list[float]) -> dict[str, float]:
    med = statistics.median(xs)
    return {"median": med, "p90": percentile(xs, 90), "p99": percentile(xs, 99), "calls": len(xs)}


def engines(torch, names: list[str]) -> dict[str, Callable | None]:
    """name -> apply(logits, bitmask, indices) or None where the peer is not installed."""
    out: dict[str, Callable | None] = {}
    if "cfgmask" in names:
        import cfgmask

        out["cfgmask"] = cfgmask.apply_bitmask_inplace
    if "xgrammar" in names:
        try:
            import xgrammar

            def xgr(logits, bitmask, indices, xgrammar=xgrammar):
                xgrammar.apply_token_bitmask_inplace(logits, bitmask, indices=indices)

            out["xgrammar"] = xgr
        except ImportError:
            out["xgrammar"] = None
    for name, module in (("llg-numpy", "llguidance.numpy"), ("llg-torch", "llguidance.torch")):
        if name not in names:
            continue
        try:
            mod = __import__(module, fromlist=["apply_token_bitmask_inplace"])
        except ImportError:
            out[name] = None
            continue
        if name == "llg-numpy":

            def llg_np(logits, bitmask, indices, f=mod.apply_token_bitmask_inplace):
                f(logits.numpy(), bitmask.numpy())

            out[name] = llg_np
        else:

            def llg_torch(logits, bitmask, indices, f=mod.apply_token_bitmask_inplace):
                f(logits, bitmask)

            out[name] = llg_torch
    return out


def supported(name: str, dtype: str, indices: list[int] | None) -> str | None:
    """Why the engine cannot run this case, or None."""
    if name.startswith("llg") and indices is not None:
        return "no indices"
    if name == "llg-numpy" and dtype == "bfloat16":
        return "no bf16"
    return None


def run(args: argparse.Namespace) -> list[dict]:
    import torch

    torch.set_num_threads(1)
    if hasattr(torch, "_dynamo"):  # llg-torch: one compile per dtype and shape, none dropped to eager
        torch._dynamo.config.recompile_limit = 256
    fns = engines(torch, args.engines)
    for name, fn in fns.items():
        if fn is None:
            print(f"{name}: not installed, skipped")
    rng = np.random.default_rng(0)
    rows_out = []
    for vocab in args.vocabs:
        words = (vocab + 31) // 32
        for batch in args.batches:
            bits = rng.random((batch, 32 * words)) < args.density
            mask = torch.from_numpy(np.packbits(bits, axis=1, bitorder="little").view("<i4").copy())
            base = torch.from_numpy(rng.standard_normal((batch, vocab), dtype=np.float32))
            reps = max(20, args.reps // batch)
            for dtype in args.dtypes:
                for subset in (False, True):
                    indices = list(range(0, batch, 2)) if subset else None
                    n_rows = len(indices) if indices else batch
                    row = {"vocab": vocab, "batch": batch, "dtype": dtype, "indices": subset, "engines": {}}
                    calls = {}
                    for name, fn in fns.items():
                        why = supported(name, dtype, indices) if fn else "not installed"
                        if why:
                            row["engines"][name] = {"skipped": why}
                            continue
                        logits = base.to(getattr(torch, dtype), copy=True)
                        calls[name] = lambda fn=fn, x=logits, m=mask, i=indices: fn(x, m, i)
                    # the floor: write every logit of the masked rows once
                    floor = base.to(getattr(torch, dtype), copy=True)
                    rows_view = floor if indices is None else floor[::2]  # indices: every other row
                    calls["fill"] = lambda v=rows_view: v.fill_(float("-inf"))
                    row["engines"].update(time_interleaved(calls, n_rows, reps, 5, args.hot))
                    rows_out.append(row)
                    print_row(row)
    return rows_out


def check_agreement(args: argparse.Namespace) -> None:
    """The engines compared compute the same thing: equal logits after one call each."""
    import torch

    fns = {k: v for k, v in engines(torch, args.engines).items() if v is not None}
    rng = np.random.default_rng(1)
    vocab, batch = 1000, 4
    bits = rng.random((batch, 32 * ((vocab + 31) // 32))) < 0.5
    mask = torch.from_numpy(np.packbits(bits, axis=1, bitorder="little").view("<i4").copy())
    base = torch.from_numpy(rng.standard_normal((batch, vocab), dtype=np.float32))
    for dtype in args.dtypes:
        for indices in (None, [0, 2]):
            results = {}
            for name, fn in fns.items():
                if supported(name, dtype, indices) is None:
                    logits = base.to(getattr(torch, dtype))
                    fn(logits, mask, indices)
                    results[name] = logits
            ref = results["cfgmask"]
            for name, got in results.items():
                if not torch.equal(got, ref):
                    raise SystemExit(f"{name} disagrees with cfgmask: {dtype}, indices={indices}")


HEAD = f"{'V':>7} {'batch':>5} {'dtype':>8} {'idx':>3} | {'cfgmask µs/row: p50':>19} {'p90':>6} {'p99':>6} |"


def print_row(row: dict) -> None:
    c = row["engines"].get("cfgmask", {})
    text = f"{row['vocab']:>7} {row['batch']:>5} {row['dtype']:>8} {'yes' if row['indices'] else 'no':>3} | "
    if "median" in c:
        text += f"{c['median']:>19.2f} {c['p90']:>6.2f} {c['p99']:>6.2f} |"
    else:
        text += f"{'-':>19} {'-':>6} {'-':>6} |"
    for name, r in row["engines"].items():
        if name == "cfgmask":
            continue
        if "median" in r:
            ratio = f"{c['median'] / r['median']:.3f}" if "median" in c else "-"
            text += f" {name} {r['median']:.1f} ({ratio})"
        else:
            text += f" {name} -"
    print(text, flush=True)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="V = 128,256 only, fewer calls")
    p.add_argument("--vocabs", type=lambda s: [int(x) for x in s.split(",")], default=list(VOCABS))
    p.add_argument("--batches", type=lambda s: [int(x) for x in s.split(",")], default=list(BATCHES))
    p.add_argument("--dtypes", type=lambda s: s.split(","), default=list(DTYPES))
    p.add_argument("--engines", type=lambda s: s.split(","), default=list(ENGINES))
    p.add_argument("--reps", type=int, default=400, help="calls at batch 1 (fewer for larger batches)")
    p.add_argument("--density", type=float, default=0.5, help="probability that a token is allowed")
    p.add_argument(
        "--hot", action="store_true", help="each engine's calls in a row (logits stay cached), not in turns"
    )
    args = p.parse_args()
    if args.quick:
        args.vocabs, args.reps = [128_256], 100
    single_thread()
    if args.engines[0] != "cfgmask":
        raise SystemExit("--engines must start with cfgmask (the reference of the ratios)")
    import cfgmask
    from cfgmask import _core

    simd = {1: "baseline", 2: "AVX2", 3: "AVX-512"}[_core.apply_mask_simd()]
    print(f"cfgmask {cfgmask.__version__} ({simd}), {platform.processor() or platform.machine()}, one thread")
    print(f"random bitmask, density {args.density}; ratio = cfgmask p50 / peer p50 (< 1: cfgmask faster)")
    t0 = time.perf_counter()
    check_agreement(args)
    print(HEAD + " peer p50 µs/row (ratio)")
    print("-" * (len(HEAD) + 40))
    rows = run(args)
    RESULTS_DIR.mkdir(exist_ok=True)
    out = RESULTS_DIR / "apply.json"
    payload = {"density": args.density, "hot": args.hot, "simd": simd, "rows": rows}
    payload["seconds"] = time.perf_counter() - t0
    out.write_text(json.dumps(payload, indent=1) + "\n")
    print(f"wrote {out} ({time.perf_counter() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
