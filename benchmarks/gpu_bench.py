#!/usr/bin/env python3
"""ddp_train vs PyTorch on one GPU, side by side, step time.

For each model (default 784-1024-1024-10, large 784-4096-4096-4096-10) and
per-rank batch (256, 4096), alternates --repeats runs of
  mpirun --bind-to none -np 1 ddp_train --device cuda --dataset synthetic ...   (epoch 2 timed)
  python3 benchmarks/pytorch_gpu_step.py ...                     (after warm-up)
and prints the median step times and the ratio (PyTorch / ddp_train: above 1
means ddp_train is faster). Both use float32 GEMMs (TF32 off), SGD with
momentum, host batches copied to the device every step.

ddp_train's step time is epoch 2's training time over its steps, from
--metrics: epoch 1 absorbs start-up (cuBLAS, NCCL, first kernels) and the
loss is read only at the end of each epoch (--log-every above the steps), as
PyTorch's loop never reads it.

A run that fails (or takes over 60 s) is reported with its error, its cell
reads "failed", and the other runs still go ahead (after a hang, those of
the other side only); the exit status is then 1. Repeats go round all cells
in turn, so that --time-limit (no new run starts after that many seconds)
leaves every cell measured at least once, and the table says how many runs
each median has.

  python3 benchmarks/gpu_bench.py [--build build] [--repeats 3] [--markdown FILE] [--time-limit S]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = {"default": "1024,1024", "large": "4096,4096,4096"}
BATCHES = [256, 4096]
RUN_TIMEOUT_S = 60  # one run takes seconds; a hang costs this much


def mpi_env():
    env = dict(os.environ)
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_pml="ob1", OMPI_MCA_btl="self,vader",
               OMPI_MCA_btl_vader_single_copy_mechanism="none", MALLOC_PERTURB_="0")
    return env


def steps_for(batch):
    return 200 if batch <= 256 else 40


def run_ours(args, hidden, batch):
    steps = steps_for(batch)
    with tempfile.TemporaryDirectory() as tmp:
        metrics = os.path.join(tmp, "m.jsonl")
        # --bind-to none: mpirun -np 1 would bind the rank to one core, leaving
        # it one batch-gathering thread (Note [Threads per rank]); PyTorch's
        # process runs unbound.
        cmd = ["mpirun", "-q", "--bind-to", "none", "-np", "1",
               os.path.join(args.build, "launcher", "ddp_train"),
               "--device", "cuda", "--dataset", "synthetic", "--synthetic-samples", str(steps * batch),
               "--hidden", hidden, "--batch-size", str(batch), "--epochs", "2",
               "--log-every", "1000000", "--lr", "0.01", "--metrics", metrics]
        subprocess.run(cmd, env=mpi_env(), check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, text=True, timeout=RUN_TIMEOUT_S)
        # The epoch lines; the run's end line follows them.
        epochs = [m for m in map(json.loads, open(metrics)) if "train_loss" in m]
        second = epochs[1]
        return second["train_time_s"] / second["steps"] * 1e3, second


def run_torch(args, hidden, batch):
    cmd = [args.python, os.path.join(HERE, "pytorch_gpu_step.py"), "--hidden", hidden,
           "--batch-size", str(batch), "--steps", str(steps_for(batch))]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=RUN_TIMEOUT_S).stdout
    return json.loads(out.strip().splitlines()[-1])


HUNG = set()  # the sides ("ddp_train", "PyTorch") that ran out of time once


def attempt(side, what, call):
    """call(), or None after printing why it failed: one failed run must not
    cost the other rows (a GPU is lent for minutes). A side that hung once is
    not run again: a hang repeats, and each costs the bound."""
    if side in HUNG:
        return None
    try:
        return call()
    except subprocess.TimeoutExpired as error:
        HUNG.add(side)
        print(f"{side}, {what} failed: {error}; {side} is not run again", flush=True)
        return None
    except (subprocess.CalledProcessError, OSError, ValueError, KeyError, IndexError) as error:
        detail = getattr(error, "stderr", None) or ""
        print(f"{side}, {what} failed: {error}" + (f"\n{detail.strip()[-2000:]}" if detail else ""),
              flush=True)
        return None


def cell(values):
    return f"{statistics.median(values):.3f}" if values else "failed"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default="build")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--markdown", help="also write the table to this file")
    parser.add_argument("--time-limit", type=float, default=0,
                        help="start no run after this many seconds (0: no limit)")
    args = parser.parse_args()

    started = time.monotonic()
    cells = [(model, hidden, batch) for model, hidden in MODELS.items() for batch in BATCHES]
    results = {c: ([], []) for c in cells}
    device, failures, attempted, cut = "?", 0, 0, False
    for r in range(args.repeats):
        for model, hidden, batch in cells:
            if args.time_limit and time.monotonic() - started > args.time_limit:
                cut = True
                break
            ours, theirs = results[(model, hidden, batch)]
            mine = attempt("ddp_train", f"{model} batch {batch}",
                           lambda: run_ours(args, hidden, batch))
            torch_result = attempt("PyTorch", f"{model} batch {batch}",
                                   lambda: run_torch(args, hidden, batch))
            attempted += 2
            failures += (mine is None) + (torch_result is None)
            line = f"{model} batch {batch} repeat {r + 1}:"
            if mine is not None:
                ms, metrics = mine
                ours.append(ms)
                step = metrics["step_ms"]
                line += (f" ddp_train {ms:.3f} ms (data {step['data']:.3f} fwd {step['forward']:.3f} "
                         f"bwd {step['backward']:.3f} comm {step['comm']:.3f} "
                         f"opt {step['optimizer']:.3f}),")
            if torch_result is not None:
                theirs.append(torch_result["step_ms"])
                device = torch_result["device"] + ", torch " + torch_result["torch"]
                line += f" PyTorch {torch_result['step_ms']:.3f} ms"
            print(line, flush=True)
        if cut:
            print(f"--time-limit {args.time_limit} s reached: no more runs", flush=True)
            break
    raw = {f"{model} {batch}": {"ddp_train": results[(model, hidden, batch)][0],
                                "pytorch": results[(model, hidden, batch)][1]}
           for model, hidden, batch in cells}
    rows = [(model, hidden, batch) + results[(model, hidden, batch)] for model, hidden, batch in cells]

    lines = [f"One GPU ({device}), float32 (TF32 off), median of up to {args.repeats} alternating runs",
             "",
             "| model | batch | ddp_train step (ms) | PyTorch step (ms) | PyTorch / ddp_train | runs |",
             "|---|---:|---:|---:|---:|---:|"]
    for model, hidden, batch, ours, theirs in rows:
        ratio = (f"{statistics.median(theirs) / statistics.median(ours):.2f}x"
                 if ours and theirs else "-")
        lines.append(f"| {model} 784-{hidden.replace(',', '-')}-10 | {batch} | {cell(ours)} | "
                     f"{cell(theirs)} | {ratio} | {len(ours)}, {len(theirs)} |")
    if failures:
        lines += ["", f"{failures} of {attempted} runs failed (see the log)"]
    table = "\n".join(lines)
    print(table)
    print("raw step times (ms):", json.dumps(raw))
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(table + "\n\nraw step times (ms): " + json.dumps(raw) + "\n")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
