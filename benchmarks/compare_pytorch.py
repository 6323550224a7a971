#!/usr/bin/env python3
"""ddp_train vs PyTorch DDP, side by side, on the same MLP and batch.

For each model, bucket cap and world size, alternates runs of ddp_train and
of PyTorch DDP (gloo, Debian's python3-torch) --repeats times, one BLAS thread
per rank, and reports the median step time, samples/s and the ratios:
  speed-up       = ddp_train samples/s / PyTorch samples/s   (same np, same cap)
  scaling cost   = step time at np / step time at np=1        (same framework)

  python3 benchmarks/compare_pytorch.py [--build build] [--np 1,2] [--models default]
        [--caps 25] [--optimizers sgd] [--clip-grad-norm 0] [--shard-optimizer off]
        [--batch-size 64] [--steps 300] [--repeats 5] [--markdown FILE]
        [--torch-kernels same|library]

--models: default (784-1024-1024-10) and/or large (784-4096-4096-4096-10), or
--hidden W,W,... for one other MLP. --caps: bucket caps in MiB for both
frameworks (inf: one bucket; PyTorch gets a cap larger than the model). The
large MLP runs --steps / 5 steps. --optimizers: sgd (momentum 0.9) and/or
adamw (lr 0.001, weight decay 0.01) for both frameworks; "sgd,adamw" also prints what
AdamW's step costs over SGD's. --clip-grad-norm: limits for both frameworks
(ddp_train --clip-grad-norm X; PyTorch calls clip_grad_norm_ after backward);
0 is no clipping, so "0,1" measures both side by side. --shard-optimizer:
off and/or on (ddp_train --shard-optimizer; PyTorch's ZeroRedundancyOptimizer
around the same optimizer); "off,on" also prints what sharding does to the
step and to rank 0's memory: its peak resident set (ddp_train's own report,
PyTorch's ru_maxrss) and its proportional set size at the end (PSS: pages
shared between ranks, as ddp_train's node shared memory is, count once in
all, not once per rank that reads them).

--torch-kernels: both frameworks' GEMMs are OpenBLAS's. ddp_train may run
other kernels than OpenBLAS chooses by itself (on a CPU newer than the
library: Note [OpenBLAS kernels on CPUs newer than the library] in
trainer/blas_kernels.h, reported by ddp_train --version). "same" (the
default) has PyTorch's OpenBLAS run those kernels too (OPENBLAS_CORETYPE),
so the ratios compare the frameworks, not the kernels; "library" leaves
PyTorch to OpenBLAS's own choice, as a PyTorch user gets it. An
OPENBLAS_CORETYPE already set applies to both.

ddp_train trains on --dataset synthetic (in memory, like the PyTorch side) and
its step time is taken from its --metrics file (training steps only, no
evaluation, no start-up). The first --warmup steps are not timed on the
PyTorch side; ddp_train's first step is included in its mean (its effect at
300 steps is below 0.5%).
"""
import argparse
import functools
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TORCH_PYTHON = "/usr/bin/python3"  # Debian's python3-torch lives here


def mpi_env(one_blas_thread=True):
    """mpirun as root, more ranks than cores, shared memory only; with
    one_blas_thread, one BLAS/OpenMP thread per rank (PyTorch and OpenBLAS
    read these at start-up)."""
    env = dict(os.environ)
    if os.geteuid() == 0:
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    env.update(OMPI_MCA_rmaps_base_oversubscribe="1", OMPI_MCA_pml="ob1", OMPI_MCA_btl="self,vader",
               MALLOC_PERTURB_="0")
    if one_blas_thread:
        env.update(OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    return env


MODELS = {"default": "1024,1024", "large": "4096,4096,4096"}


def optimizer_args(optimizer):
    """ddp_train's options for PyTorch's optimizer in pytorch_ddp_mlp.py."""
    return ["--optimizer", "adamw", "--lr", "0.001", "--weight-decay", "0.01"] if optimizer == "adamw" else []


def run_ours(args, np_, hidden, steps, cap, optimizer, clip, shard):
    """Mean step (ms) and rank 0's memory (MiB): peak resident, proportional at the end."""
    with tempfile.TemporaryDirectory() as tmp:
        metrics = os.path.join(tmp, "m.jsonl")
        samples = max(4096, steps * args.batch_size * np_)
        cmd = ["mpirun", "-q", "-np", str(np_), os.path.join(args.build, "launcher", "ddp_train"),
               "--dataset", "synthetic", "--synthetic-samples", str(samples), "--hidden", hidden,
               "--batch-size", str(args.batch_size), "--max-steps", str(steps), "--epochs", "1",
               "--threads", "1", "--log-every", "1000000", "--metrics", metrics,
               "--bucket-cap-mb", cap, "--clip-grad-norm", clip] + optimizer_args(optimizer)
        if shard == "on":
            cmd.append("--shard-optimizer")
        out = subprocess.run(cmd, env=mpi_env(), check=True, capture_output=True, text=True, timeout=900).stdout
        m = json.loads(open(metrics).readline())
        memory = re.search(r"memory: peak resident ([0-9.]+) MiB .*proportional now ([0-9.]+) MiB", out)
        return m["train_time_s"] / m["steps"] * 1e3, (float(memory.group(1)), float(memory.group(2)))


@functools.lru_cache(maxsize=None)
def our_blas(build):
    """ddp_train's BLAS line: ("OpenBLAS 0.3.21, SkylakeX kernels (...)", "SkylakeX")."""
    out = subprocess.run([os.path.join(build, "launcher", "ddp_train"), "--version"], env=mpi_env(),
                         check=True, capture_output=True, text=True, timeout=120).stdout
    line = re.search(r"^BLAS: (.*)$", out, re.M).group(1)
    return line, re.search(r", (\w+) kernels", line).group(1)


def torch_env(args):
    """PyTorch's environment: with --torch-kernels same, OpenBLAS runs the
    kernels ddp_train runs (Note [OpenBLAS kernels on CPUs newer than the
    library] in trainer/blas_kernels.h)."""
    env = mpi_env()
    if args.torch_kernels == "same" and "OPENBLAS_CORETYPE" not in env:
        env["OPENBLAS_CORETYPE"] = our_blas(args.build)[1]
    return env


def run_torch(args, np_, port, hidden, steps, cap, optimizer, clip, shard):
    """Mean step (ms) and rank 0's memory (MiB): peak resident, proportional at the end."""
    torch_cap = "100000" if cap in ("inf", "single") else cap  # larger than any model here
    cmd = ["mpirun", "-q", "-np", str(np_), TORCH_PYTHON, os.path.join(HERE, "pytorch_ddp_mlp.py"),
           "--hidden", hidden, "--batch-size", str(args.batch_size), "--steps", str(steps),
           "--port", str(port), "--bucket-cap-mb", torch_cap, "--clip-grad-norm", clip,
           "--optimizer", optimizer] + (["--zero"] if shard == "on" else [])
    out = subprocess.run(cmd, env=torch_env(args), check=True, capture_output=True, text=True, timeout=900).stdout
    result = json.loads(out.strip().splitlines()[-1])
    return result["step_ms"], (result["peak_rss_mib"], result["pss_mib"])


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default="build")
    parser.add_argument("--np", default="1,2")
    parser.add_argument("--models", default="default")
    parser.add_argument("--hidden", help="one MLP with these hidden widths instead of --models")
    parser.add_argument("--caps", default="25")
    parser.add_argument("--optimizers", default="sgd")
    parser.add_argument("--clip-grad-norm", default="0")
    parser.add_argument("--shard-optimizer", default="off")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--markdown", help="append the table to this file")
    parser.add_argument("--torch-kernels", choices=["same", "library"], default="same",
                        help="same: PyTorch's OpenBLAS runs the kernels ddp_train runs; library: the ones "
                             "OpenBLAS chooses by itself (on a CPU newer than the library, older ones)")
    args = parser.parse_args()
    worlds = [int(n) for n in args.np.split(",")]
    models = {"custom": args.hidden} if args.hidden else {m: MODELS[m] for m in args.models.split(",")}
    caps = args.caps.split(",")
    clips = args.clip_grad_norm.split(",")
    optimizers = args.optimizers.split(",")
    shards = args.shard_optimizer.split(",")
    # What each run trains with besides model and cap: (optimizer, clip, sharded).
    variants = [(o, c, z) for o in optimizers for c in clips for z in shards]
    steps_of = lambda model: args.steps // 5 if model == "large" else args.steps  # noqa: E731

    times = {}
    memory = {}  # rank 0's peak resident MiB, per run
    port = 29600
    for r in range(args.repeats):
        for model, hidden in models.items():
            for cap in caps:
                for opt, clip, shard in variants:
                    for n in worlds:
                        key = (model, cap, opt, clip, shard, n)
                        ours, our_peak = run_ours(args, n, hidden, steps_of(model), cap, opt, clip, shard)
                        port += 1
                        theirs, their_peak = run_torch(args, n, port, hidden, steps_of(model), cap, opt, clip,
                                                       shard)
                        times.setdefault(key, {"ddp": [], "torch": []})
                        times[key]["ddp"].append(ours)
                        times[key]["torch"].append(theirs)
                        memory.setdefault(key, {"ddp": [], "torch": []})
                        memory[key]["ddp"].append(our_peak)
                        memory[key]["torch"].append(their_peak)
                        print(f"repeat {r + 1}/{args.repeats} {model} cap {cap} {opt} clip {clip} shard {shard} "
                              f"np={n}: ddp_train {ours:.2f} ms, {our_peak[0]:.0f} MiB peak, {our_peak[1]:.0f} "
                              f"MiB PSS; PyTorch DDP {theirs:.2f} ms, {their_peak[0]:.0f} MiB peak, "
                              f"{their_peak[1]:.0f} MiB PSS", file=sys.stderr, flush=True)

    torch_core = torch_env(args).get("OPENBLAS_CORETYPE")
    torch_blas = f"{torch_core} kernels (OPENBLAS_CORETYPE)" if torch_core else "the kernels OpenBLAS chooses"
    lines = [
        f"batch {args.batch_size} per rank, {args.steps} steps (large MLP: {args.steps // 5}), "
        f"1 BLAS thread per rank, median of {args.repeats} alternating runs; "
        f"ddp_train: {our_blas(args.build)[0]}; PyTorch: {torch_blas}",
        "",
        "| model | cap (MiB) | optimizer | clip | sharded | np | ddp_train step (ms) | ddp_train samples/s "
        "| PyTorch DDP step (ms) | PyTorch samples/s | speed-up (ddp/PyTorch) | ddp_train step vs np=1 "
        "| PyTorch step vs np=1 |",
        "|---|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for model, hidden in models.items():
        for cap in caps:
            for opt, clip, shard in variants:
                base = worlds[0]
                med = {n: {fw: statistics.median(times[(model, cap, opt, clip, shard, n)][fw])
                           for fw in ("ddp", "torch")} for n in worlds}
                for n in worlds:
                    ours, theirs = med[n]["ddp"], med[n]["torch"]
                    sps = lambda ms: n * args.batch_size / ms * 1e3  # noqa: E731
                    lines.append(
                        f"| 784-{hidden.replace(',', '-')}-10 | {cap} | {opt} | {clip if clip != '0' else '-'} | "
                        f"{shard} | {n} | {ours:.2f} | {sps(ours):.0f} | {theirs:.2f} | {sps(theirs):.0f} | "
                        f"{theirs / ours:.2f}x | {ours / med[base]['ddp']:.2f}x | "
                        f"{theirs / med[base]['torch']:.2f}x |")
    def ratios(title, pairs):
        """One line per (label, key, reference key): the median step ratio of each framework."""
        nonlocal lines
        lines += ["", title, ""]
        for label, key, reference in pairs:
            ratio = {fw: statistics.median(times[key][fw]) / statistics.median(times[reference][fw])
                     for fw in ("ddp", "torch")}
            lines.append(f"- {label}: ddp_train {ratio['ddp']:.3f}x, PyTorch DDP {ratio['torch']:.3f}x")

    name = lambda hidden: f"784-{hidden.replace(',', '-')}-10"  # noqa: E731
    if "0" in clips and len(clips) > 1:
        ratios("What clipping adds to a step (median step with the limit / without):",
               [(f"{name(hidden)}, cap {cap}, {opt}, clip {clip}, np={n}",
                 (model, cap, opt, clip, z, n), (model, cap, opt, "0", z, n))
                for model, hidden in models.items() for cap in caps for opt in optimizers
                for clip in clips if clip != "0" for z in shards for n in worlds])
    if "sgd" in optimizers and "adamw" in optimizers:
        ratios("What AdamW's step costs over SGD's (median step with AdamW / with SGD):",
               [(f"{name(hidden)}, cap {cap}, clip {clip}, np={n}",
                 (model, cap, "adamw", clip, z, n), (model, cap, "sgd", clip, z, n))
                for model, hidden in models.items() for cap in caps for clip in clips for z in shards
                for n in worlds])
    if "off" in shards and "on" in shards:
        pairs = [(model, hidden, cap, opt, clip, n) for model, hidden in models.items() for cap in caps
                 for opt in optimizers for clip in clips for n in worlds]
        ratios("What sharding the optimizer state does to a step (median step sharded / not):",
               [(f"{name(hidden)}, cap {cap}, {opt}, clip {clip}, np={n}",
                 (model, cap, opt, clip, "on", n), (model, cap, opt, clip, "off", n))
                for model, hidden, cap, opt, clip, n in pairs])
        for i, what in enumerate(("peak resident set", "proportional set size at the end")):
            lines += ["", f"Rank 0's {what} (MiB, median), not sharded -> sharded:", ""]
            for model, hidden, cap, opt, clip, n in pairs:
                mib = {(z, fw): statistics.median(m[i] for m in memory[(model, cap, opt, clip, z, n)][fw])
                       for z in ("off", "on") for fw in ("ddp", "torch")}
                lines.append(f"- {name(hidden)}, cap {cap}, {opt}, clip {clip}, np={n}: "
                             f"ddp_train {mib[('off', 'ddp')]:.0f} -> {mib[('on', 'ddp')]:.0f}, "
                             f"PyTorch DDP {mib[('off', 'torch')]:.0f} -> {mib[('on', 'torch')]:.0f}")
    table = "\n".join(lines)
    print(table)
    if args.markdown:
        with open(args.markdown, "a") as f:
            f.write(table + "\n")
    raw = {f"{m} cap {c} {o} clip {k} shard {z} np={n} {fw}": [round(t, 3) for t in v[fw]]
           for (m, c, o, k, z, n), v in times.items() for fw in ("ddp", "torch")}
    print("raw step times (ms):", json.dumps(raw), file=sys.stderr)


if __name__ == "__main__":
    main()
