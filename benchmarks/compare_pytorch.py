#!/usr/bin/env python3
"""ddp_train vs PyTorch DDP, side by side, on the same MLP and batch.

For each world size, alternates runs of ddp_train and of PyTorch DDP (gloo,
Debian's python3-torch) --repeats times, one BLAS thread per rank, and reports
the median step time, samples/s and the ratios:
  speed-up       = ddp_train samples/s / PyTorch samples/s   (same np)
  scaling cost   = step time at np / step time at np=1        (same framework)

  python3 benchmarks/compare_pytorch.py [--build build] [--np 1,2] [--hidden 1024,1024]
        [--batch-size 64] [--steps 300] [--repeats 5] [--markdown FILE]

ddp_train trains on --dataset synthetic (in memory, like the PyTorch side) and
its step time is taken from its --metrics file (training steps only, no
evaluation, no start-up). The first --warmup steps are not timed on the
PyTorch side; ddp_train's first step is included in its mean (its effect at
300 steps is below 0.5%).
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
TORCH_PYTHON = "/usr/bin/python3"  # Debian's python3-torch lives here


def mpi_env():
    env = dict(os.environ)
    if os.geteuid() == 0:
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    env.update(OMPI_MCA_rmaps_base_oversubscribe="1", OMPI_MCA_pml="ob1", OMPI_MCA_btl="self,vader",
               OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MALLOC_PERTURB_="0")
    return env


def run_ours(args, np_):
    with tempfile.TemporaryDirectory() as tmp:
        metrics = os.path.join(tmp, "m.jsonl")
        samples = max(4096, args.steps * args.batch_size * np_)
        cmd = ["mpirun", "-q", "-np", str(np_), os.path.join(args.build, "launcher", "ddp_train"),
               "--dataset", "synthetic", "--synthetic-samples", str(samples), "--hidden", args.hidden,
               "--batch-size", str(args.batch_size), "--max-steps", str(args.steps), "--epochs", "1",
               "--threads", "1", "--log-every", "1000000", "--metrics", metrics]
        subprocess.run(cmd, env=mpi_env(), check=True, stdout=subprocess.DEVNULL, timeout=900)
        m = json.loads(open(metrics).readline())
        return m["train_time_s"] / m["steps"] * 1e3


def run_torch(args, np_, port):
    cmd = ["mpirun", "-q", "-np", str(np_), TORCH_PYTHON, os.path.join(HERE, "pytorch_ddp_mlp.py"),
           "--hidden", args.hidden, "--batch-size", str(args.batch_size), "--steps", str(args.steps),
           "--port", str(port)]
    out = subprocess.run(cmd, env=mpi_env(), check=True, capture_output=True, text=True, timeout=900).stdout
    return json.loads(out.strip().splitlines()[-1])["step_ms"]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default="build")
    parser.add_argument("--np", default="1,2")
    parser.add_argument("--hidden", default="1024,1024")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--markdown", help="append the table to this file")
    args = parser.parse_args()
    worlds = [int(n) for n in args.np.split(",")]

    times = {(fw, n): [] for fw in ("ddp", "torch") for n in worlds}
    port = 29600
    for r in range(args.repeats):
        for n in worlds:
            times[("ddp", n)].append(run_ours(args, n))
            port += 1
            times[("torch", n)].append(run_torch(args, n, port))
            print(f"repeat {r + 1}/{args.repeats} np={n}: ddp_train {times[('ddp', n)][-1]:.2f} ms, "
                  f"PyTorch DDP {times[('torch', n)][-1]:.2f} ms", file=sys.stderr)

    med = {key: statistics.median(v) for key, v in times.items()}
    lines = [
        f"MLP 784-{args.hidden.replace(',', '-')}-10, batch {args.batch_size} per rank, {args.steps} steps, "
        f"1 BLAS thread per rank, median of {args.repeats} alternating runs",
        "",
        "| np | ddp_train step (ms) | ddp_train samples/s | PyTorch DDP step (ms) | PyTorch samples/s "
        "| speed-up (ddp/PyTorch) | ddp_train step vs np=1 | PyTorch step vs np=1 |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    base = worlds[0]
    for n in worlds:
        ours, theirs = med[("ddp", n)], med[("torch", n)]
        sps = lambda ms: n * args.batch_size / ms * 1e3  # noqa: E731
        lines.append(f"| {n} | {ours:.2f} | {sps(ours):.0f} | {theirs:.2f} | {sps(theirs):.0f} | "
                     f"{theirs / ours:.2f}x | {ours / med[('ddp', base)]:.2f}x | {theirs / med[('torch', base)]:.2f}x |")
    table = "\n".join(lines)
    print(table)
    if args.markdown:
        with open(args.markdown, "a") as f:
            f.write(table + "\n")
    raw = {f"{fw} np={n}": [round(t, 3) for t in v] for (fw, n), v in times.items()}
    print("raw step times (ms):", json.dumps(raw), file=sys.stderr)


if __name__ == "__main__":
    main()
