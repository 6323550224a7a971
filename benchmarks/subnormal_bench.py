#!/usr/bin/env python3
"""What subnormal floats cost a step, flushed (ddp_train's default) or kept
(--keep-subnormals, IEEE 754, PyTorch's default): Note [Subnormal floats] in
runtime/subnormals.h.

  python3 benchmarks/subnormal_bench.py [--build build] [--repeats 5] [--np 2]

Three cases, each run alternately in both modes --repeats times, medians:
  dead     a small MLP (--hidden 64,64, --lr 0.1 constant, synthetic data) whose
           ReLUs all die within 3 epochs: the loss stays at ln 10 and its
           momentum decays into the subnormal range. The mean step and its
           optimizer part over epochs 9-24 (epochs 1-8 left out: the decay).
  healthy  the default MLP (1024,1024, batch 64) training normally, 3 epochs:
           what flushing costs where there is nothing to flush (nothing).
  torch    PyTorch's own optimizer step (torch.optim.SGD, momentum 0.9) on the
           dead run's last checkpoint (weights and momentum, gradients 0), with
           and without torch.set_flush_denormal(True): whether PyTorch pays the
           same by default. Needs Debian's python3-torch.
"""
import argparse
import json
import os
import statistics
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from compare_pytorch import TORCH_PYTHON, mpi_env  # noqa: E402

DEAD = ["--dataset", "synthetic", "--hidden", "64,64", "--batch-size", "16", "--lr", "0.1",
        "--lr-schedule", "constant", "--epochs", "24"]
HEALTHY = ["--dataset", "synthetic", "--synthetic-samples", "24576", "--hidden", "1024,1024",
           "--batch-size", "64", "--epochs", "3"]
MODES = {"flushed": [], "kept": ["--keep-subnormals"]}


def run(args, options, mode, first_epoch, checkpoint_dir=None):
    """Mean step and optimizer (ms) over the epochs from first_epoch, and the final loss."""
    with tempfile.TemporaryDirectory() as tmp:
        metrics = os.path.join(tmp, "m.jsonl")
        cmd = ["mpirun", "-q", "-np", str(args.np), os.path.join(args.build, "launcher", "ddp_train"),
               "--threads", "1", "--log-every", "1000000", "--metrics", metrics] + options + MODES[mode]
        if checkpoint_dir:
            cmd += ["--checkpoint-dir", checkpoint_dir]
        subprocess.run(cmd, env=mpi_env(), check=True, capture_output=True, text=True, timeout=900)
        # The epoch lines; the run's end line follows them.
        epochs = [m for m in map(json.loads, open(metrics)) if "train_loss" in m]
    kept = [e for e in epochs if e["epoch"] >= first_epoch]
    steps = sum(e["steps"] for e in kept)
    mean = lambda part: sum(e["step_ms"][part] * e["steps"] for e in kept) / steps
    return mean("total"), mean("optimizer"), epochs[-1]["train_loss"]


def subnormal_share(path):
    """Of the momentum buffers in a checkpoint: (subnormal, all) element counts."""
    tensors = read_safetensors(path)
    sub = total = 0
    for name, values in tensors.items():
        if name.startswith("optimizer.momentum."):
            sub += sum(1 for v in values if v != 0 and abs(v) < 2.0 ** -126)
            total += len(values)
    return sub, total


def read_safetensors(path):
    """{name: tuple of floats} of the float32 tensors (no numpy needed)."""
    data = open(path, "rb").read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    out = {}
    for name, entry in header.items():
        if name == "__metadata__" or entry["dtype"] != "F32":
            continue
        begin, end = entry["data_offsets"]
        out[name] = struct.unpack("<%df" % ((end - begin) // 4), data[8 + n + begin:8 + n + end])
    return out


TORCH_STEP = r"""
import json, sys, time, torch
sys.path.insert(0, sys.argv[2])
from subnormal_bench import read_safetensors
torch.set_num_threads(1)
tensors = read_safetensors(sys.argv[1])
names = [k for k in tensors if k.startswith("layers.")]
params = [torch.nn.Parameter(torch.tensor(tensors[k])) for k in names]
# Made before any flushing, so that the subnormal values arrive intact.
momentum = [torch.tensor(tensors["optimizer.momentum." + k]) for k in names]
result = {}
for flush in (False, True):
    torch.set_flush_denormal(flush)
    times = []
    for repeat in range(5):
        optimizer = torch.optim.SGD(params, lr=0.1, momentum=0.9)
        for p, m in zip(params, momentum):
            p.grad = torch.zeros_like(p)
            optimizer.state[p]["momentum_buffer"] = m.clone()
        start = time.perf_counter()
        for _ in range(200):
            optimizer.step()
        times.append((time.perf_counter() - start) / 200 * 1e3)
    result["flushed" if flush else "kept"] = sorted(times)[2]
print(json.dumps(result))
"""

def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default="build")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--np", type=int, default=2)
    args = parser.parse_args()

    print(f"# {args.np} ranks, {args.repeats} runs per mode, alternating; medians; ratio kept / flushed\n")
    print("| case | mode | step (ms) | optimizer (ms) | final train_loss | runs: step (ms) |")
    print("|---|---|---:|---:|---:|---|")
    checkpoint = None
    with tempfile.TemporaryDirectory() as keep_dir:
        for case, options, first in (("dead", DEAD, 9), ("healthy", HEALTHY, 1)):
            results = {mode: [] for mode in MODES}
            for repeat in range(args.repeats):
                for mode in MODES:
                    last = case == "dead" and mode == "kept" and repeat == 0
                    results[mode].append(run(args, options, mode, first, keep_dir if last else None))
            for mode, runs in results.items():
                step = statistics.median(r[0] for r in runs)
                optimizer = statistics.median(r[1] for r in runs)
                listed = ", ".join(f"{r[0]:.3f}" for r in runs)
                print(f"| {case} | {mode} | {step:.3f} | {optimizer:.3f} | {runs[-1][2]:.4f} | {listed} |")
            ratios = [k[0] / f[0] for k, f in zip(results["kept"], results["flushed"])]
            print(f"| {case} | kept / flushed | {statistics.median(ratios):.2f}x | | | "
                  f"{', '.join(f'{r:.2f}' for r in ratios)} |")
        files = sorted(f for f in os.listdir(keep_dir) if f.endswith(".safetensors"))
        checkpoint = os.path.join(keep_dir, files[-1])
        sub, total = subnormal_share(checkpoint)
        print(f"\ndead run, kept, its last checkpoint: {sub} of {total} momentum values subnormal")
        if os.path.exists(TORCH_PYTHON):
            out = subprocess.run([TORCH_PYTHON, "-c", TORCH_STEP, checkpoint, HERE], env=mpi_env(), check=True,
                                 capture_output=True, text=True, timeout=600).stdout
            torch_ms = json.loads(out)
            print(f"PyTorch SGD step on that state (median of 5 x 200 steps): IEEE (default) "
                  f"{torch_ms['kept']:.3f} ms, set_flush_denormal(True) {torch_ms['flushed']:.3f} ms: "
                  f"{torch_ms['kept'] / torch_ms['flushed']:.1f}x")


if __name__ == "__main__":
    main()
