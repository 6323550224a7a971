#!/usr/bin/env python3
"""A small cost model of one data-parallel step, fitted to this machine and
then used to predict other machines.

    python3 benchmarks/cost_model.py [--results benchmarks/results] [--build build]

The model:
  * an all-reduce of S bytes over n ranks (ring): 2(n-1) alpha + S 2(n-1)/n / B,
    where alpha is the latency of one ring step and B the bus bandwidth
    (nccl-tests' busbw);
  * the step: forward, then backward, whose time is spread over the layers in
    proportion to their parameters (ddp_bench's emulated backward is exactly
    that); each bucket (the Reducer's layout: reverse registration order, the
    first capped at 1 MiB) is all-reduced as soon as its last layer is done and
    the previous bucket's all-reduce has finished; then the optimizer;
  * overlap: "full" lets communication run beside backward at no cost to it (a
    GPU with its own copy engines and NICs); "none" runs it after backward (a
    CPU whose cores are all computing: the 2-core development machine).

1. fit: alpha and B from allreduce_bench's CSVs (least squares on relative error).
2. check: predict ddp_bench's step at np=2 and 4 from its np=1 compute
   phases (times ranks / cores when ranks outnumber cores), against the
   measured step (prediction error printed).
3. predict: with published figures as inputs (see GPU_* below), the weak-scaling
   efficiency of each profile at 8 to 1024 GPUs and the bucket cap that
   maximises it. These are predictions, labelled as such.
"""
import argparse
import csv
import glob
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
MIB = 1 << 20
SINGLE = None  # a bucket cap meaning "one bucket"


def allreduce_time(nbytes, n, alpha, busbw):
    """Ring all-reduce time (s) of nbytes over n ranks."""
    if n <= 1:
        return 0.0
    return 2 * (n - 1) * alpha + nbytes * 2 * (n - 1) / n / busbw


def fit_alpha_busbw(samples):
    """Least squares on relative error of t = alpha * a + bytes * f / B over
    samples (n, nbytes, seconds); returns (alpha, B)."""
    # t_i = alpha * a_i + gamma * b_i with gamma = 1 / B; divide by t_i.
    s_aa = s_ab = s_bb = s_a = s_b = 0.0
    for n, nbytes, t in samples:
        a = 2 * (n - 1) / t
        b = nbytes * 2 * (n - 1) / n / t
        s_aa += a * a
        s_ab += a * b
        s_bb += b * b
        s_a += a
        s_b += b
    det = s_aa * s_bb - s_ab * s_ab
    if det == 0:
        raise ValueError("degenerate fit: need several sizes")
    alpha = (s_a * s_bb - s_b * s_ab) / det
    gamma = (s_aa * s_b - s_ab * s_a) / det
    return alpha, 1.0 / gamma


def bucket_layout(tensor_bytes, cap, first_cap=MIB):
    """The Reducer's buckets: lists of tensor indices (registration order
    indices), filled in reverse order; a bucket closes once it reaches its
    cap (the first bucket's cap is first_cap). cap None: one bucket."""
    if cap is SINGLE:
        return [list(range(len(tensor_bytes) - 1, -1, -1))]
    buckets, current, size = [], [], 0
    for i in range(len(tensor_bytes) - 1, -1, -1):
        current.append(i)
        size += tensor_bytes[i]
        limit = first_cap if not buckets else cap
        if size >= limit:
            buckets.append(current)
            current, size = [], 0
    if current:
        buckets.append(current)
    return buckets


def simulate_step(layers, forward, backward, optimizer, cap, comm_time, overlap=True):
    """Step time (s) and exposed communication (s).

    layers: list of lists of tensor bytes (registration order); backward time
    is spread over layers by bytes; comm_time(nbytes) is one all-reduce."""
    tensor_bytes = [b for layer in layers for b in layer]
    total = float(sum(tensor_bytes))
    # When each tensor's gradient is ready: its layer's backward has finished.
    ready, elapsed, index = [0.0] * len(tensor_bytes), 0.0, len(tensor_bytes)
    for layer in reversed(layers):
        elapsed += backward * sum(layer) / total
        index -= len(layer)
        for t in range(index, index + len(layer)):
            ready[t] = elapsed
    done = backward if not overlap else 0.0
    for bucket in bucket_layout(tensor_bytes, cap):
        start = max(done, max(ready[t] for t in bucket)) if overlap else done
        done = start + comm_time(sum(tensor_bytes[t] for t in bucket))
    end_of_comm = max(backward, done)
    step = forward + end_of_comm + optimizer
    return step, end_of_comm - backward


def describe_profile(build, name):
    out = subprocess.run([os.path.join(build, "benchmarks", "ddp_bench"), "--profile", name,
                          "--describe"], stdout=subprocess.PIPE, text=True, check=True)
    doc = json.loads(out.stdout)
    return [[4 * n for n in layer["tensors"]] for layer in doc["layers"]]


def cap_bytes(label):
    if label in ("single", "inf"):
        return SINGLE
    return float(label) * MIB


# Published figures used for the predictions (inputs, not measurements):
# ~475 GB/s all-reduce busbw within an 8 x H200 NVLink node (nccl-tests
# class figure), ~46-48 GB/s per 400G NIC across nodes (one NIC per GPU), a
# few microseconds of latency per ring step within a node and ~10 us across.
GPU_NODE = 8
GPU_BUSBW_NVLINK = 475e9
GPU_BUSBW_NIC = 47e9
GPU_ALPHA_NVLINK = 3e-6
GPU_ALPHA_NIC = 10e-6
# Compute per step on one H200, from model FLOPs at an assumed sustained
# 160 TFLOP/s (bf16, ~40% of peak): 6 x parameters x tokens (transformers),
# 3 x 4.1 GFLOP x images (ResNet-50). Forward a third, backward two thirds;
# the optimizer a fused pass over fp32 parameters (~4 TB/s, 16 B/parameter).
GPU_FLOPS = 160e12
GPU_WORKLOADS = {
    "resnet50": {"flops": 3 * 4.1e9 * 256, "batch": "256 images"},
    "bert-base": {"flops": 6 * 110e6 * 32 * 512, "batch": "32 x 512 tokens"},
    "gpt2": {"flops": 6 * 124e6 * 16 * 1024, "batch": "16 x 1024 tokens"},
}


def gpu_comm_time(n):
    """All-reduce time on n GPUs: NVLink within a node; beyond one node the
    NICs set the bandwidth (busbw per GPU), and latency follows a
    hierarchical schedule (a ring inside each node, one across the nodes),
    as NCCL's multi-node algorithms do, rather than one hop per GPU."""
    if n <= GPU_NODE:
        return lambda nbytes: allreduce_time(nbytes, n, GPU_ALPHA_NVLINK, GPU_BUSBW_NVLINK)
    nodes = n // GPU_NODE
    latency = 2 * (GPU_NODE - 1) * GPU_ALPHA_NVLINK + 2 * (nodes - 1) * GPU_ALPHA_NIC
    return lambda nbytes: latency + nbytes * 2 * (n - 1) / n / GPU_BUSBW_NIC


def predict_gpu(layers, profile, n, caps):
    """(best cap, efficiency at it, efficiency per cap) on n GPUs."""
    work = GPU_WORKLOADS[profile]
    compute = work["flops"] / GPU_FLOPS
    forward, backward = compute / 3, 2 * compute / 3
    params = sum(sum(layer) for layer in layers) / 4
    optimizer = params * 16 / 4e12
    one = forward + backward + optimizer
    per_cap = {}
    for label in caps:
        step, _ = simulate_step(layers, forward, backward, optimizer, cap_bytes(label),
                                gpu_comm_time(n), overlap=True)
        per_cap[label] = one / step
    best = max(per_cap, key=per_cap.get)
    return best, per_cap[best], per_cap


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", default=os.path.join(HERE, "results"))
    parser.add_argument("--build", default=os.path.join(HERE, "..", "build"))
    parser.add_argument("--runs", default="scaling_runs.json",
                        help="ddp_bench runs (under --results) to check the model against")
    args = parser.parse_args()

    # 1. Fit alpha and B per world size, on the plain MPI path and on the
    #    shared-memory path (the one training uses), from 64 KiB up.
    fits = {}
    print("### Cost model: fit (this machine)\n")
    print("| path | np | alpha (us) | busbw B (GB/s) | rel. error median / max | sizes fitted |")
    print("|---|---:|---:|---:|---:|---|")
    for path in sorted(glob.glob(os.path.join(args.results, "allreduce_np*_*.csv"))):
        with open(path) as f:
            rows = list(csv.DictReader(f))
        n = int(rows[0]["ranks"])
        memory = rows[0]["memory"]
        # Open MPI's own all-reduce falls off a cliff from 32 MiB on this VM
        # (RESULTS.md); the plain path is fitted below it.
        top = 16 << 20 if memory == "plain" else 1 << 40
        samples = [(n, int(r["bytes"]), float(r["ip_us"]) * 1e-6) for r in rows
                   if 256 << 10 <= int(r["bytes"]) <= top]
        alpha, busbw = fit_alpha_busbw(samples)
        errors = sorted(abs(allreduce_time(b, n, alpha, busbw) - t) / t for n, b, t in samples)
        fits[(memory, n)] = (alpha, busbw)
        print(f"| {memory} | {n} | {alpha * 1e6:.1f} | {busbw / 1e9:.2f} | "
              f"{100 * errors[len(errors) // 2]:.0f}% / {100 * errors[-1]:.0f}% | "
              f"{samples[0][1] >> 10} KiB - {samples[-1][1] >> 20} MiB |")

    # 2. Check against ddp_bench (shared-memory path, as the Reducer uses).
    runs_path = os.path.join(args.results, args.runs)
    if os.path.exists(runs_path):
        with open(runs_path) as f:
            runs = json.load(f)
        print("\n### Cost model: check against ddp_bench (prediction from np=1 phases)\n")
        print("The last column predicts from np=N's own measured compute phases (the slowest "
              "rank's medians), no overlap: its error is the communication model's alone.\n")
        print("| profile | np | cap | measured ms | full overlap ms (err) | no overlap ms (err) "
              "| np=N compute, no overlap ms (err) |")
        print("|---|---:|---|---:|---:|---:|---:|")
        by_key = {}
        for doc in runs:
            for r in doc["results"]:
                by_key.setdefault((doc["profile"], doc["ranks"], r["cap"]), []).append(r)
        median = lambda xs: sorted(xs)[len(xs) // 2]
        for (profile, n, cap), results in sorted(by_key.items()):
            if n == 1 or cap == "auto" or ("shared", n) not in fits:
                continue
            one = by_key.get((profile, 1, cap))
            if not one:
                continue
            layers = describe_profile(args.build, profile)
            # More ranks than cores share the cores: compute slows down by
            # ranks / cores (np=4 on the 2-core machine).
            share = max(1.0, n / (os.cpu_count() or 1))
            fwd = share * median([r["forward_ms"] for r in one]) / 1e3
            bwd = share * median([r["backward_ms"] for r in one]) / 1e3
            opt = share * median([r["optimizer_ms"] for r in one]) / 1e3
            alpha, busbw = fits[("shared", n)]
            comm = lambda nbytes: allreduce_time(nbytes, n, alpha, busbw)
            measured = median([r["step_ms"] for r in results])
            cells = []
            own = [median([r[phase] for r in results]) / 1e3
                   for phase in ("forward_ms", "backward_ms", "optimizer_ms")]
            for phases, overlap in (((fwd, bwd, opt), True), ((fwd, bwd, opt), False),
                                    (own, False)):
                step, _ = simulate_step(layers, *phases, cap_bytes(cap), comm, overlap)
                cells.append(f"{step * 1e3:.1f} ({100 * (step * 1e3 - measured) / measured:+.0f}%)")
            print(f"| {profile} | {n} | {cap} | {measured:.1f} | " + " | ".join(cells) + " |")

    # 3. Predictions for GPU clusters from published figures.
    caps = ["1", "5", "10", "25", "50", "100", "single"]
    sizes = [8, 16, 32, 64, 128, 256, 512, 1024]
    print("\n### Cost model: PREDICTED weak-scaling efficiency on H200 clusters\n")
    print(f"Inputs (published figures, not measured here): {GPU_BUSBW_NVLINK / 1e9:.0f} GB/s "
          f"busbw within an 8-GPU NVLink node, {GPU_BUSBW_NIC / 1e9:.0f} GB/s per GPU across "
          f"nodes (one 400G NIC per GPU), ring latency {GPU_ALPHA_NVLINK * 1e6:.0f} us / "
          f"{GPU_ALPHA_NIC * 1e6:.0f} us per step, compute at {GPU_FLOPS / 1e12:.0f} TFLOP/s "
          "sustained, fp32 gradients, full overlap.\n")
    print("| profile (per-GPU batch) | " + " | ".join(f"{n} GPUs" for n in sizes) + " |")
    print("|---|" + "---:|" * len(sizes))
    for profile, work in GPU_WORKLOADS.items():
        layers = describe_profile(args.build, profile)
        cells = []
        for n in sizes:
            best, eff, _ = predict_gpu(layers, profile, n, caps)
            cells.append(f"{100 * eff:.0f}% (cap {best})")
        print(f"| {profile} ({work['batch']}) | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    sys.exit(main())
