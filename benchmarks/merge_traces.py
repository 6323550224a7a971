#!/usr/bin/env python3
"""Merge the per-rank Chrome traces of `ddp_train --trace PREFIX` into one.

  python3 benchmarks/merge_traces.py PREFIX.rank*.json -o merged.json [--png step.png --step N]

Each rank is one process in the merged trace (open it in chrome://tracing or
https://ui.perfetto.dev); time starts at 0 at the earliest event. Ranks of one
node share the clock. With --png (needs matplotlib), draws one step of every
rank: compute spans above, each bucket's all-reduce below, so overlap shows
as all-reduce bars under the backward bars of earlier layers.
"""
import argparse
import json
import sys


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("traces", nargs="+")
    parser.add_argument("-o", "--output", required=True)
    parser.add_argument("--png", help="draw one step of every rank into this PNG")
    parser.add_argument("--step", type=int, default=5, help="which traced step to draw (0-based, default 5)")
    args = parser.parse_args()

    events = []
    for path in args.traces:
        events += json.load(open(path))["traceEvents"]
    spans = [e for e in events if e.get("ph") == "X"]
    if not spans:
        sys.exit("no spans in the traces")
    start = min(e["ts"] for e in spans)
    for e in spans:
        e["ts"] = round(e["ts"] - start, 3)
    json.dump({"traceEvents": events, "displayTimeUnit": "ms"}, open(args.output, "w"))
    print(f"merged {len(args.traces)} traces, {len(spans)} spans -> {args.output}")
    if args.png:
        draw(spans, args.png, args.step)


def draw(spans, path, step):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ranks = sorted({e["pid"] for e in spans})
    fig, ax = plt.subplots(figsize=(11, 1.2 + 1.1 * len(ranks)))
    colours = {"forward": "#4c72b0", "backward": "#55a868", "comm": "#c44e52", "optimizer": "#8172b2"}
    window = None
    for row, rank in enumerate(ranks):
        mine = sorted((e for e in spans if e["pid"] == rank), key=lambda e: e["ts"])
        forwards = [e for e in mine if e["name"] == "forward"]
        if step >= len(forwards):
            sys.exit(f"rank {rank} has only {len(forwards)} traced steps")
        begin = forwards[step]["ts"]
        end = forwards[step + 1]["ts"] if step + 1 < len(forwards) else max(e["ts"] + e["dur"] for e in mine)
        if window is None:
            window = (begin, end)
        for e in mine:
            if e["tid"] == 0 and not (begin <= e["ts"] < end):
                continue
            if e["tid"] == 1 and not (begin <= e["ts"] < end):
                continue
            y = row * 2 + (1 if e["tid"] == 0 else 0)
            ax.broken_barh([((e["ts"] - window[0]) / 1e3, e["dur"] / 1e3)], (y + 0.1, 0.8),
                           facecolors=colours.get(e["cat"], "grey"), edgecolor="white", linewidth=0.5)
            if e["dur"] > (end - begin) * 0.06:
                ax.text((e["ts"] - window[0] + e["dur"] / 2) / 1e3, y + 0.5, e["name"].replace("backward ", "bwd "),
                        ha="center", va="center", fontsize=7, color="white")
    ax.set_yticks([r * 2 + o + 0.5 for r in range(len(ranks)) for o in (0, 1)])
    ax.set_yticklabels([f"rank {r} {lane}" for r in ranks for lane in ("comm", "compute")])
    ax.set_xlabel("ms since the step's forward began (rank 0)")
    ax.set_title("one training step: compute lane, and each bucket's all-reduce on the comm lane")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"drew step {step} -> {path}")


if __name__ == "__main__":
    main()
