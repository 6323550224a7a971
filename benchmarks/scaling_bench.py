#!/usr/bin/env python3
"""Weak-scaling sweep of ddp_bench over model profiles, world sizes and bucket
caps, repeated in alternating rounds; medians go to JSON, CSV and markdown.

    python3 benchmarks/scaling_bench.py [--profiles resnet50,bert-base,gpt2]
        [--np 1,2,4] [--caps 1,5,25,100,inf,auto] [--repeats 3] [--steps 6]
        [--warmup 2] [--work 8] [--device cpu|cuda] [--out benchmarks/results]

Each (profile, np) run measures every cap in one ddp_bench invocation, the
caps taking turns step by step, so caps are compared side by side; rounds
alternate over profiles and world sizes so that a noisy period on the shared
machine spreads over all of them.
Efficiency is weak scaling (fixed per-rank batch): step(np=1) / step(np=N) at
the same cap. The markdown goes to stdout; plots come from plots.py.
"""
import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import tempfile

from compare_pytorch import mpi_env

HERE = os.path.dirname(os.path.abspath(__file__))


def run_bench(build, np_, profile, caps, steps, warmup, work, device="cpu"):
    env = mpi_env(one_blas_thread=False)  # ddp_bench sets its own BLAS threads
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        cmd = ["mpirun", "-q", "-np", str(np_), os.path.join(build, "benchmarks", "ddp_bench"),
               "--profile", profile, "--bucket-cap-mb", caps, "--steps", str(steps),
               "--warmup", str(warmup), "--work", str(work), "--device", device, "--json", out.name]
        done = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, timeout=1800)
        if done.returncode != 0:
            sys.exit(f"failed ({done.returncode}): {' '.join(cmd)}\n{done.stdout}")
        with open(out.name) as f:
            return json.load(f)


def pooled_auto(runs, profile, n):
    """auto against the best fixed cap with every round's samples: each run's
    step times are divided by the mean of its fixed caps (removing the level of
    that process and moment), then each cap's median over rounds is taken.
    Returns the best fixed cap, auto's ratio to it, and the median and worst
    ratio of the caps auto chose (judged by their pooled fixed-cap medians)."""
    normalized, picks = {}, []
    for doc in runs:
        if doc["profile"] != profile or doc["ranks"] != n:
            continue
        fixed = [r for r in doc["results"] if r["cap"] != "auto"]
        auto = next((r for r in doc["results"] if r["cap"] == "auto"), None)
        if not fixed or auto is None:
            continue
        level = statistics.mean(r["step_ms"] for r in fixed)
        for r in doc["results"]:
            normalized.setdefault(r["cap"], []).append(r["step_ms"] / level)
        picks.append(auto["chosen"])
    if not picks:
        return None
    med = {cap: statistics.median(v) for cap, v in normalized.items()}
    fixed = {cap: v for cap, v in med.items() if cap != "auto"}
    best = min(fixed, key=fixed.get)
    quality = [fixed[c] / fixed[best] for c in picks if c in fixed]
    return {"best": best, "auto": med["auto"] / fixed[best],
            "pick_median": statistics.median(quality), "pick_worst": max(quality)}


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default=os.path.join(HERE, "..", "build"))
    parser.add_argument("--profiles", default="resnet50,bert-base,gpt2")
    parser.add_argument("--np", default="1,2,4")
    parser.add_argument("--caps", default="1,5,25,100,inf,auto")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--work", type=int, default=8)
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                        help="cuda: one GPU per rank, the NCCL backend")
    parser.add_argument("--out", default=os.path.join(HERE, "results"))
    parser.add_argument("--from-json", help="summarise this scaling_runs.json instead of running")
    args = parser.parse_args()
    profiles = args.profiles.split(",")
    sizes = [int(n) for n in args.np.split(",")]
    os.makedirs(args.out, exist_ok=True)

    runs = []  # every ddp_bench JSON, tagged with its round
    if args.from_json:
        with open(args.from_json) as f:
            runs = json.load(f)
        args.repeats = max(doc["round"] for doc in runs) + 1
    for round_ in range(0 if args.from_json else args.repeats):
        for profile in profiles:
            for np_ in sizes:
                doc = run_bench(args.build, np_, profile, args.caps, args.steps, args.warmup,
                                args.work, args.device)
                doc["round"] = round_
                runs.append(doc)
                print(f"round {round_ + 1}/{args.repeats} {profile} np={np_}: " +
                      ", ".join(f"{r['cap']}={r['step_ms']:.1f}ms" for r in doc["results"]),
                      file=sys.stderr, flush=True)
    if not args.from_json:
        with open(os.path.join(args.out, "scaling_runs.json"), "w") as f:
            json.dump(runs, f, indent=1)

    # Medians over rounds per (profile, np, cap).
    table = {}
    for doc in runs:
        for r in doc["results"]:
            key = (doc["profile"], doc["ranks"], r["cap"])
            table.setdefault(key, []).append(r)
    rows = []
    for (profile, np_, cap), results in table.items():
        med = lambda field: statistics.median(r[field] for r in results)
        rows.append({"profile": profile, "np": np_, "cap": cap,
                     "chosen": ",".join(sorted({r["chosen"] for r in results})),
                     "step_ms": med("step_ms"), "forward_ms": med("forward_ms"),
                     "backward_ms": med("backward_ms"), "comm_ms": med("comm_ms"),
                     "optimizer_ms": med("optimizer_ms"), "samples_per_s": med("samples_per_s"),
                     "exposed_fraction": med("exposed_fraction"), "runs": len(results)})
    base = {(r["profile"], r["cap"]): r["step_ms"] for r in rows if r["np"] == 1}
    for r in rows:
        one = base.get((r["profile"], r["cap"]))
        r["efficiency"] = one / r["step_ms"] if one else None
    with open(os.path.join(args.out, "scaling.csv"), "w", newline="") as f:
        # csv quotes the fields that hold commas (auto's choices over rounds).
        writer = csv.DictWriter(f, fieldnames=list(rows[0].keys()), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)

    caps = args.caps.split(",")
    for profile in profiles:
        meta = next(d for d in runs if d["profile"] == profile)
        print(f"\n#### {profile} ({meta['tensors']} tensors, {meta['parameters'] / 1e6:.1f}M "
              f"parameters), work K={meta['work']}, medians of {args.repeats} rounds\n")
        print("| cap (MiB) | " + " | ".join(
            f"np={n} step ms (exposed) | np={n} eff" for n in sizes) + " |")
        print("|---|" + "---:|---:|" * len(sizes))
        for cap in caps:
            cells = []
            for n in sizes:
                r = next((x for x in rows if x["profile"] == profile and x["np"] == n and
                          x["cap"] == ("single" if cap == "inf" else cap)), None)
                if r is None:
                    cells += ["", ""]
                    continue
                label = f"{r['step_ms']:.1f} ({100 * r['exposed_fraction']:.0f}%)"
                if r["cap"] == "auto":
                    label += f" [chose {r['chosen']}]"
                cells += [label, "" if r["efficiency"] is None else f"{r['efficiency']:.2f}"]
            print(f"| {cap} | " + " | ".join(cells) + " |")
        # auto against the best fixed cap of the same run, paired per round.
        # The caps take turns step by step inside one run (ddp_bench), so
        # within a run they are compared under the same machine conditions.
        # "auto" is the tuned run's own steps; "pick" is the fixed cap that
        # auto chose, measured as a fixed cap in the same run (how good the
        # choice is, without auto's own sampling noise).
        for n in sizes:
            ratios, picks, choices = [], [], []
            for doc in runs:
                if doc["profile"] != profile or doc["ranks"] != n:
                    continue
                fixed = [r for r in doc["results"] if r["cap"] != "auto"]
                auto = next((r for r in doc["results"] if r["cap"] == "auto"), None)
                if fixed and auto:
                    best = min(fixed, key=lambda r: r["step_ms"])
                    ratios.append(auto["step_ms"] / best["step_ms"])
                    same = next((r for r in fixed if r["cap"] == auto["chosen"]), None)
                    if same is not None:
                        picks.append(same["step_ms"] / best["step_ms"])
                    choices.append(f"{auto['chosen']} (best {best['cap']})")
            if ratios:
                print(f"\nnp={n}: auto / best fixed cap of the same run: median "
                      f"{statistics.median(ratios):.3f}x over {len(ratios)} rounds "
                      f"({', '.join(f'{x:.2f}' for x in ratios)})", end="")
                if picks:
                    print(f"; the chosen cap / best: median {statistics.median(picks):.3f}x, "
                          f"worst {max(picks):.3f}x", end="")
                print(f"; chose {'; '.join(choices)}", end="")
            pooled = pooled_auto(runs, profile, n)
            if pooled:
                print(f"\n  pooled over rounds (each run's steps over the mean of its fixed "
                      f"caps, median over rounds): best fixed {pooled['best']}; auto / best "
                      f"{pooled['auto']:.3f}x; the chosen caps / best: median "
                      f"{pooled['pick_median']:.3f}x, worst {pooled['pick_worst']:.3f}x", end="")
        print()


if __name__ == "__main__":
    main()
