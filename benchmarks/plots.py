#!/usr/bin/env python3
"""Plots for benchmarks/RESULTS.md from the files allreduce_bench --csv and
scaling_bench.py wrote (matplotlib, Debian's python3-matplotlib).

    /usr/bin/python3 benchmarks/plots.py [--results benchmarks/results] [--out benchmarks/plots]
        [--scaling benchmarks/results/scaling.csv benchmarks/results/focused/scaling.csv]

busbw_vs_size.png     all-reduce bus bandwidth against message size: ddp's
                      Communicator (shared memory and plain) and raw MPI_Allreduce
step_vs_cap.png       ddp_bench step time against bucket cap, per profile and np
efficiency_vs_np.png  weak-scaling efficiency against np, best fixed cap and auto
"""
import argparse
import csv
import glob
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def read_csv(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def finish(fig, ax, xlabel, ylabel, title, path):
    """Labels, grid and legend, then writes the figure."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def busbw_plot(results, out):
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for path in sorted(glob.glob(os.path.join(results, "allreduce_np*_*.csv"))):
        rows = read_csv(path)
        n, memory = rows[0]["ranks"], rows[0]["memory"]
        sizes = [int(r["bytes"]) for r in rows]
        ax.plot(sizes, [float(r["ip_busbw"]) for r in rows], marker=".",
                label=f"ddp in-place, {memory} memory, np={n}")
        if memory == "plain":
            ax.plot(sizes, [float(r["raw_busbw"]) for r in rows], linestyle="--",
                    label=f"raw MPI_Allreduce, np={n}")
    ax.set_xscale("log", base=2)
    finish(fig, ax, "message size (bytes)", "busbw (GB/s)", "float32 sum all-reduce, one 2-core VM",
           os.path.join(out, "busbw_vs_size.png"))


def scaling_plots(paths, out):
    # A profile found in a later file replaces the same profile's rows from
    # earlier ones (a focused re-run with more rounds).
    rows = []
    for path in paths:
        if not os.path.exists(path):
            continue
        new = read_csv(path)
        replaced = {r["profile"] for r in new}
        rows = [r for r in rows if r["profile"] not in replaced] + new
    if not rows:
        return
    profiles = sorted({r["profile"] for r in rows})
    caps = ["1", "5", "25", "100", "single"]
    fig, axes = plt.subplots(1, len(profiles), figsize=(4.2 * len(profiles), 3.8), squeeze=False)
    for ax, profile in zip(axes[0], profiles):
        for n in sorted({int(r["np"]) for r in rows}):
            points = [(c, next((float(r["step_ms"]) for r in rows if r["profile"] == profile
                                and int(r["np"]) == n and r["cap"] == c), None)) for c in caps]
            ax.plot([c for c, v in points if v], [v for c, v in points if v], marker="o",
                    label=f"np={n}")
        ax.set_title(profile)
        ax.set_xlabel("bucket cap (MiB)")
        ax.set_ylabel("step (ms)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "step_vs_cap.png"), dpi=110)

    fig, ax = plt.subplots(figsize=(6, 4))
    for profile in profiles:
        sizes = sorted({int(r["np"]) for r in rows if r["profile"] == profile})
        best, auto = [], []
        for n in sizes:
            fixed = [r for r in rows if r["profile"] == profile and int(r["np"]) == n
                     and r["cap"] != "auto" and r["efficiency"]]
            best.append(max(float(r["efficiency"]) for r in fixed))
            a = next((r for r in rows if r["profile"] == profile and int(r["np"]) == n
                      and r["cap"] == "auto" and r["efficiency"]), None)
            auto.append(float(a["efficiency"]) if a else None)
        line, = ax.plot(sizes, best, marker="o", label=f"{profile}, best fixed cap")
        ax.plot([n for n, a in zip(sizes, auto) if a], [a for a in auto if a], marker="x",
                linestyle="--", color=line.get_color(), label=f"{profile}, auto")
    finish(fig, ax, "ranks (np)", "weak-scaling efficiency (step np=1 / step np=N)",
           "ddp_bench on a 2-core VM (np=4 oversubscribes 2 cores)",
           os.path.join(out, "efficiency_vs_np.png"))


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", default=os.path.join(HERE, "results"))
    parser.add_argument("--out", default=os.path.join(HERE, "plots"))
    parser.add_argument("--scaling", nargs="*",
                        help="scaling.csv files from scaling_bench.py (default: RESULTS/scaling.csv)")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    busbw_plot(args.results, args.out)
    scaling_plots(args.scaling or [os.path.join(args.results, "scaling.csv")], args.out)


if __name__ == "__main__":
    main()
