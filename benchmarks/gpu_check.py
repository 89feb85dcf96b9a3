"""apply_bitmask_inplace on CUDA: bit-exact against the CPU path, then timed.  Exits 0 with a
message when torch or a CUDA device is missing.

1. Correctness: float32, bfloat16 and float16 logits on the GPU (random values with NaN, -0.0
   and infinities planted), batch 1, 8 and 64, V = 128,256 with an exact, a padded (+128
   columns: must become -inf) and a short (-100: surplus mask bits ignored) logit width,
   sparse / half / dense random bitmasks held in pageable host memory, pinned host memory or on
   the GPU, rows given as None, every third row, a list with a duplicate, an empty list, a CPU
   index tensor and a CUDA one.  The GPU result, copied back, must equal bit for bit what the
   CPU path (the C kernel) makes of a host copy of the same logits.  An out-of-range index must
   raise IndexError before any kernel runs.
2. Timing at V = 128,256, batch 1, 8 and 64, every row or every other row (indices): the
   bitmask already on the GPU (CUDA events around the call) and in host memory (wall clock
   around call + synchronize: what a decoding step waits for); median and p99 in µs a row,
   beside xgrammar's CUDA kernel (``xgrammar.apply_token_bitmask_inplace``, Triton) when it
   runs here.

    python benchmarks/gpu_check.py [--out results.json]

Writes ``benchmarks/results/gpu_check.json`` (or --out).  Well under two minutes on one GPU.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
V = 128_256
BATCHES = (1, 8, 64)
DTYPES = ("float32", "bfloat16", "float16")
INT_OF = {2: "int16", 4: "int32", 8: "int64"}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "gpu_check.json")
    p.add_argument("--reps", type=int, default=200)
    p.add_argument(
        "--cpu-dry-run",
        action="store_true",
        help="run the script on the CPU, the torch-ops path standing in for CUDA (checks the script)",
    )
    args = p.parse_args()
    try:
        import torch
    except ImportError:
        print("gpu_check: torch is not installed; nothing to check")
        return 0
    if not torch.cuda.is_available() and not args.cpu_dry_run:
        print("gpu_check: no CUDA device here; nothing to check (run it on a machine with a GPU)")
        return 0
    sys.path.insert(0, str(ROOT))
    import cfgmask
    from cfgmask.torch_ops import apply_bitmask_inplace_torch

    if args.cpu_dry_run:
        dev, name = torch.device("cpu"), "cpu (dry run: torch ops stand in for CUDA)"
        on_device = apply_bitmask_inplace_torch
    else:
        dev, name = torch.device("cuda"), torch.cuda.get_device_name()
        on_device = cfgmask.apply_bitmask_inplace
    print(f"device: {name}, torch {torch.__version__}, cfgmask from {Path(cfgmask.__file__).parent}")
    t0 = time.perf_counter()
    n = correctness(torch, cfgmask.apply_bitmask_inplace, on_device, dev)
    print(f"correctness: {n} cases bit-exact against the CPU path ({time.perf_counter() - t0:.1f} s)")
    rows = timing(torch, on_device, dev, args.reps)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    payload = {"device": name, "torch": torch.__version__, "vocab": V, "rows": rows}
    args.out.write_text(json.dumps(payload, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


def bits(t):
    """The bit patterns of a float tensor, on the host, as numpy integers."""
    import torch

    return t.detach().cpu().view(getattr(torch, INT_OF[t.element_size()])).numpy()


def random_mask(rng: np.random.Generator, batch: int, words: int, density: float) -> np.ndarray:
    allowed = rng.random((batch, 32 * words)) < density
    return np.packbits(allowed, axis=1, bitorder="little").view("<i4").copy()


def random_logits(torch, rng, batch: int, width: int, dtype: str, dev):
    x = torch.from_numpy(rng.standard_normal((batch, width), dtype=np.float32))
    flat = x.view(-1)
    for value in (float("nan"), -0.0, float("inf"), float("-inf")):
        flat[torch.from_numpy(rng.integers(0, flat.numel(), 50))] = value
    return x.to(getattr(torch, dtype)).to(dev)


def correctness(torch, on_host, on_device, dev) -> int:
    """on_host: the CPU path (C kernel); on_device: what runs on dev."""
    rng = np.random.default_rng(0)
    words = (V + 31) // 32
    n = 0
    for dtype in DTYPES:
        for batch in BATCHES:
            index_modes = {
                "all": None,
                "every third": list(range(0, batch, 3)),
                "duplicate": [batch - 1, 0, batch - 1],
                "empty": [],
                "cpu tensor": torch.arange(0, batch, 2),
                "device tensor": torch.arange(batch - 1, -1, -2, device=dev),
            }
            for mode, indices in index_modes.items():
                for where in ("host", "pinned", "gpu"):
                    width = int(rng.choice([V, V + 128, V - 100]))
                    density = float(rng.choice([0.001, 0.5, 0.999]))
                    mask = torch.from_numpy(random_mask(rng, batch, words, density))
                    if where == "pinned" and dev.type == "cuda":
                        mask = mask.pin_memory()
                    elif where == "gpu":
                        mask = mask.to(dev)
                    logits = random_logits(torch, rng, batch, width, dtype, dev)
                    host = logits.cpu()
                    on_device(logits, mask, indices=indices)
                    host_indices = indices.cpu() if isinstance(indices, torch.Tensor) else indices
                    on_host(host, mask.cpu(), indices=host_indices)
                    assert logits.device == dev and logits.dtype == getattr(torch, dtype)
                    if not np.array_equal(bits(logits), bits(host)):
                        raise SystemExit(
                            f"MISMATCH {dtype} batch={batch} width={width} density={density} "
                            f"indices={mode} mask on {where}"
                        )
                    n += 1
    logits = torch.zeros(2, 64, device=dev)
    for bad in ([2], [-1], torch.tensor([5], device=dev)):
        try:
            on_device(logits, torch.zeros(2, 2, dtype=torch.int32), indices=bad)
        except IndexError:
            n += 1
        else:
            raise SystemExit(f"index {bad} was not refused")
    assert not bool(torch.isinf(logits).any())
    return n


def event_us(torch, fn, reps: int) -> list[float]:
    """GPU time of each call (CUDA events); wall time on the CPU (dry run)."""
    if not torch.cuda.is_available():
        return wall_us(torch, fn, reps)
    out = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        out.append(start.elapsed_time(end) * 1e3)
    return out


def wall_us(torch, fn, reps: int) -> list[float]:
    sync = torch.cuda.synchronize if torch.cuda.is_available() else lambda: None
    out = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        sync()
        out.append((time.perf_counter() - t) * 1e6)
    return out


def summary(xs: list[float], rows: int) -> dict[str, float]:
    s = sorted(x / rows for x in xs)
    return {"median": statistics.median(s), "p99": s[min(len(s) - 1, int(0.99 * len(s)))]}


def xgrammar_apply():
    try:
        import xgrammar

        return xgrammar.apply_token_bitmask_inplace
    except Exception:  # not installed, or no triton: not compared
        return None


HEAD = f"{'batch':>5} {'dtype':>8} {'idx':>3} | {'GPU mask p50':>12} {'p99':>7} | {'host mask':>9} {'p99':>7}"


def timing(torch, on_device, dev, reps: int) -> list[dict]:
    rng = np.random.default_rng(1)
    words = (V + 31) // 32
    xgr = xgrammar_apply() if dev.type == "cuda" else None
    rows = []
    print(
        f"\napply_bitmask_inplace on {dev.type}, V = {V}, µs a row (GPU mask: CUDA events; host: wall + sync)"
    )
    print(HEAD + (" | xgrammar GPU mask p50 (cfgmask/xgrammar)" if xgr else ""))
    print("-" * (len(HEAD) + 40))
    for batch in BATCHES:
        host_mask = torch.from_numpy(random_mask(rng, batch, words, 0.5))
        masks = {"gpu_mask": host_mask.to(dev), "host_mask": host_mask}
        for dtype in DTYPES:
            logits = random_logits(torch, rng, batch, V, dtype, dev)
            for subset in (False, True):
                indices = list(range(0, batch, 2)) if subset else None
                row = time_case(torch, on_device, xgr, logits, masks, indices, reps)
                rows.append({"batch": batch, "dtype": dtype, "indices": subset, **row})
                text = f"{batch:>5} {dtype:>8} {'yes' if subset else 'no':>3} | "
                text += f"{row['gpu_mask']['median']:>12.2f} {row['gpu_mask']['p99']:>7.2f} | "
                text += f"{row['host_mask']['median']:>9.2f} {row['host_mask']['p99']:>7.2f}"
                if "xgrammar_gpu_mask" in row:
                    med = row["xgrammar_gpu_mask"]["median"]
                    text += f" | {med:.2f} ({row['gpu_mask']['median'] / med:.2f})"
                elif "xgrammar_failed" in row:
                    text += f" | xgrammar failed: {row['xgrammar_failed']}"
                print(text, flush=True)
    return rows


def time_case(torch, on_device, xgr, logits, masks: dict, indices, reps: int) -> dict:
    n_rows = len(indices) if indices else logits.shape[0]
    row: dict = {}
    for key, mask in masks.items():

        def call(m=mask):
            on_device(logits, m, indices=indices)

        for _ in range(10):
            call()
        measure = event_us if key == "gpu_mask" else wall_us
        row[key] = summary(measure(torch, call, reps), n_rows)
    if xgr is not None:
        peer, mask = logits.clone(), masks["gpu_mask"]
        try:
            xgr(peer, mask, indices=indices)
            row["xgrammar_gpu_mask"] = summary(
                event_us(torch, lambda: xgr(peer, mask, indices=indices), reps), n_rows
            )
        except Exception as e:  # a peer that cannot run here (no triton): say so
            row["xgrammar_failed"] = f"{type(e).__name__}: {e}"[:100]
    return row


if __name__ == "__main__":
    sys.exit(main())
