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

  python3 benchmarks/gpu_bench.py [--build build] [--repeats 3] [--markdown FILE]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = {"default": "1024,1024", "large": "4096,4096,4096"}
BATCHES = [256, 4096]


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
        subprocess.run(cmd, env=mpi_env(), check=True, stdout=subprocess.DEVNULL, timeout=600)
        epochs = [json.loads(line) for line in open(metrics)]
        second = epochs[1]
        return second["train_time_s"] / second["steps"] * 1e3, second


def run_torch(args, hidden, batch):
    cmd = [args.python, os.path.join(HERE, "pytorch_gpu_step.py"), "--hidden", hidden,
           "--batch-size", str(batch), "--steps", str(steps_for(batch))]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=600).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default="build")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--markdown", help="also write the table to this file")
    args = parser.parse_args()

    rows, raw, device = [], {}, "?"
    for model, hidden in MODELS.items():
        for batch in BATCHES:
            ours, theirs = [], []
            for r in range(args.repeats):
                ms, metrics = run_ours(args, hidden, batch)
                ours.append(ms)
                torch_result = run_torch(args, hidden, batch)
                theirs.append(torch_result["step_ms"])
                device = torch_result["device"] + ", torch " + torch_result["torch"]
                step = metrics["step_ms"]
                print(f"{model} batch {batch} repeat {r + 1}: ddp_train {ms:.3f} ms "
                      f"(data {step['data']:.3f} fwd {step['forward']:.3f} bwd {step['backward']:.3f} "
                      f"comm {step['comm']:.3f} opt {step['optimizer']:.3f}), "
                      f"PyTorch {torch_result['step_ms']:.3f} ms", flush=True)
            raw[f"{model} {batch}"] = {"ddp_train": ours, "pytorch": theirs}
            a, b = statistics.median(ours), statistics.median(theirs)
            rows.append((model, hidden, batch, a, b))

    lines = [f"One GPU ({device}), float32 (TF32 off), median of {args.repeats} alternating runs",
             "",
             "| model | batch | ddp_train step (ms) | PyTorch step (ms) | PyTorch / ddp_train |",
             "|---|---:|---:|---:|---:|"]
    for model, hidden, batch, a, b in rows:
        lines.append(f"| {model} 784-{hidden.replace(',', '-')}-10 | {batch} | {a:.3f} | {b:.3f} | {b / a:.2f}x |")
    table = "\n".join(lines)
    print(table)
    print("raw step times (ms):", json.dumps(raw))
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(table + "\n\nraw step times (ms): " + json.dumps(raw) + "\n")


if __name__ == "__main__":
    main()
