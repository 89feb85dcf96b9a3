"""apply_bitmask_inplace on CUDA: correctness against a CPU reference, then timing.

For batch 1 and 64, V = 128,256 (Llama-3), float32 and bfloat16 logits on the GPU:

1. correctness: random logits and random bitmasks (sparse, half, dense), plus a padded
   logit width (V + 128 columns: the extra ones must become -inf) and an ``indices`` subset;
   the GPU result must equal, bit for bit, the same operation on a CPU copy computed
   independently (``np.unpackbits`` + ``np.where``);
2. timing with CUDA events, median of many runs: the bitmask already on the GPU, and the
   bitmask in host memory (the usual case: the matcher fills a host buffer, 16 KB a row),
   beside a lower bound that only does ``masked_fill_`` with a precomputed boolean mask.

Prints a table and writes ``benchmarks/results/apply_cuda.json``.  Skips cleanly (exit 0)
without CUDA.  Runs in well under two minutes on one GPU.

    python -m benchmarks.bench_apply_cuda
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

V = 128_256
PAD = 128
BATCHES = (1, 64)
RESULTS = Path(__file__).resolve().parent / "results" / "apply_cuda.json"


def main() -> int:
    try:
        import torch
    except ImportError:
        print("bench_apply_cuda: torch is not installed: skipped")
        return 0
    if not torch.cuda.is_available():
        print("bench_apply_cuda: CUDA is not available: skipped")
        return 0
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    import cfgmask

    dev = torch.device("cuda")
    print(
        f"device: {torch.cuda.get_device_name(dev)}, torch {torch.__version__}, cfgmask {cfgmask.__version__}"
    )
    t0 = time.perf_counter()
    checks = correctness(torch, cfgmask, dev)
    print(f"correctness: {checks} cases equal to the CPU reference ({time.perf_counter() - t0:.1f} s)")
    rows = timing(torch, cfgmask, dev)
    print_table(rows)
    RESULTS.parent.mkdir(exist_ok=True)
    payload = {
        "device": torch.cuda.get_device_name(dev),
        "torch": torch.__version__,
        "vocab": V,
        "rows": rows,
    }
    RESULTS.write_text(json.dumps(payload, indent=1) + "\n")
    print(f"wrote {RESULTS}")
    return 0


def random_bitmask(rng: np.random.Generator, batch: int, n_bits: int, density: float) -> np.ndarray:
    bits = rng.random((batch, ((n_bits + 31) // 32) * 32)) < density
    bits[:, n_bits:] = False
    return np.packbits(bits, axis=1, bitorder="little").view("<i4").astype(np.int32)


def reference(logits_cpu: np.ndarray, bitmask: np.ndarray, indices=None) -> np.ndarray:
    """The CPU reference: allowed iff the bit is set; columns past the mask are blocked."""
    width = logits_cpu.shape[1]
    bits = np.unpackbits(bitmask.view(np.uint8), axis=1, bitorder="little").astype(bool)
    allowed = np.zeros((bitmask.shape[0], width), dtype=bool)
    n = min(width, bits.shape[1])
    allowed[:, :n] = bits[:, :n]
    out = np.where(allowed, logits_cpu, -np.inf)
    if indices is not None:
        keep = np.ones(out.shape[0], dtype=bool)
        keep[list(indices)] = False
        out[keep] = logits_cpu[keep]
    return out


def correctness(torch, cfgmask, dev) -> int:
    rng = np.random.default_rng(0)
    n = 0
    for batch in BATCHES:
        for dtype in (torch.float32, torch.bfloat16):
            for density in (0.001, 0.5, 0.999):
                for width, indices in ((V, None), (V + PAD, None), (V, list(range(0, batch, 3)))):
                    mask = random_bitmask(rng, batch, V, density)
                    logits = torch.randn(batch, width, device=dev).to(dtype)
                    # the reference sees exactly the values the GPU holds (bf16 upcast to f32)
                    want = reference(logits.float().cpu().numpy(), mask, indices)
                    for host_mask in (True, False):
                        got = logits.clone()
                        bm = torch.from_numpy(mask) if host_mask else torch.from_numpy(mask).to(dev)
                        cfgmask.apply_bitmask_inplace(got, bm, indices=indices)
                        assert got.device == logits.device and got.dtype == dtype
                        same = np.array_equal(got.float().cpu().numpy(), want)
                        if not same:
                            raise SystemExit(
                                f"MISMATCH batch={batch} dtype={dtype} density={density} width={width} "
                                f"indices={indices is not None} host_mask={host_mask}"
                            )
                        n += 1
    return n


def cuda_median_us(torch, fn, iters: int = 200, warmup: int = 20) -> float:
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3)
    return statistics.median(times)


def wall_median_us(torch, fn, iters: int = 200, warmup: int = 20) -> float:
    """Host-side time of the call (what the decoding loop waits for before sampling)."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        t = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t) * 1e6)
    return statistics.median(times)


def timing(torch, cfgmask, dev) -> list[dict]:
    rng = np.random.default_rng(1)
    rows = []
    for batch in BATCHES:
        for dtype in (torch.float32, torch.bfloat16):
            mask = random_bitmask(rng, batch, V, 0.5)
            host = torch.from_numpy(mask)
            pinned = host.pin_memory()
            on_gpu = host.to(dev)
            logits = torch.randn(batch, V, device=dev).to(dtype)
            blocked = torch.from_numpy(np.isinf(reference(np.zeros((batch, V), np.float32), mask))).to(dev)

            def apply(bm, logits=logits):
                return lambda: cfgmask.apply_bitmask_inplace(logits, bm)

            def fill(logits=logits, blocked=blocked):
                logits.masked_fill_(blocked, float("-inf"))

            row = {
                "batch": batch,
                "dtype": str(dtype).replace("torch.", ""),
                "gpu_mask_us": cuda_median_us(torch, apply(on_gpu)),
                "host_mask_us": wall_median_us(torch, apply(host)),
                "pinned_mask_us": wall_median_us(torch, apply(pinned)),
                "masked_fill_us": cuda_median_us(torch, fill),
            }
            rows.append(row)
    return rows


def print_table(rows: list[dict]) -> None:
    head = (
        f"{'batch':>5} {'dtype':>8} | {'mask on GPU':>11} {'mask on host':>12} {'pinned host':>11} | "
        f"{'masked_fill only':>16}"
    )
    print()
    print(f"apply_bitmask_inplace, V = {V}, median µs (GPU events for 'on GPU', wall + sync for host)")
    print(head)
    print("-" * len(head))
    for r in rows:
        print(
            f"{r['batch']:>5} {r['dtype']:>8} | {r['gpu_mask_us']:>11.1f} {r['host_mask_us']:>12.1f} "
            f"{r['pinned_mask_us']:>11.1f} | {r['masked_fill_us']:>16.1f}"
        )
    print()


if __name__ == "__main__":
    sys.exit(main())
