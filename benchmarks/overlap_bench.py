#!/usr/bin/env python3
"""Step time with overlap (default buckets) against without (one bucket after backward).

Runs ddp_train on in-memory synthetic data for each model, world size and
bucket setting, alternating the settings --repeats times, and reports median
step time, exposed communication (time waiting for all-reduces after
backward) and its fraction of the step.

  python3 benchmarks/overlap_bench.py [--build build] [--np 2,4] [--repeats 3] [--steps 20]

Models: the default MLP 784-1024-1024-10 and a large one 784-4096-4096-4096-10.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

MODELS = {"default 784-1024-1024-10": "1024,1024", "large 784-4096-4096-4096-10": "4096,4096,4096"}
SETTINGS = {"overlap (cap 25 MiB)": "25", "none (one bucket)": "inf"}


def run(args, np_, hidden, cap):
    env = dict(os.environ, OMPI_MCA_rmaps_base_oversubscribe="1", OMPI_MCA_pml="ob1", MALLOC_PERTURB_="0")
    if os.geteuid() == 0:
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    with tempfile.TemporaryDirectory() as tmp:
        metrics = os.path.join(tmp, "m.jsonl")
        cmd = ["mpirun", "-q", "-np", str(np_), os.path.join(args.build, "launcher", "ddp_train"),
               "--dataset", "synthetic", "--synthetic-samples", "4096", "--hidden", hidden,
               "--batch-size", "64", "--max-steps", str(args.steps), "--epochs", "1", "--threads", "1",
               "--bucket-cap-mb", cap, "--log-every", "1000000", "--metrics", metrics]
        subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL, timeout=1800)
        m = json.loads(open(metrics).readline())
        return m["step_ms"]["total"], m["step_ms"]["comm"]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default="build")
    parser.add_argument("--np", default="2,4")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    rows = []
    for model, hidden in MODELS.items():
        for np_ in [int(n) for n in args.np.split(",")]:
            samples = {s: [] for s in SETTINGS}
            for r in range(args.repeats):
                for setting, cap in SETTINGS.items():
                    samples[setting].append(run(args, np_, hidden, cap))
                    print(f"{model} np={np_} {setting} repeat {r + 1}: {samples[setting][-1]}", file=sys.stderr)
            for setting in SETTINGS:
                total = statistics.median(t for t, _ in samples[setting])
                comm = statistics.median(c for _, c in samples[setting])
                rows.append(f"| {model} | {np_} | {setting} | {total:.1f} | {comm:.2f} | {100 * comm / total:.1f}% |")
    print(f"batch 64 per rank, {args.steps} steps, median of {args.repeats} alternating runs\n")
    print("| model | np | overlap | step (ms) | exposed comm (ms) | exposed fraction |")
    print("|---|---:|---|---:|---:|---:|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
