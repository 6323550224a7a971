"""The same training step as ddp_train, in PyTorch DDP (gloo), for comparison.

Started by mpirun (one process per rank): reads the rank from Open MPI's
environment and rendezvouses over loopback TCP. Trains an MLP of the given
widths with SGD (momentum 0.9) or AdamW (weight decay 0.01) on in-memory random data, so that the data
loader costs nothing, and prints one JSON line on rank 0 with the mean step
time over the timed steps and rank 0's memory: its peak resident set and its
proportional set size at the end (shared pages split between the processes
that map them). --zero wraps the
optimizer in ZeroRedundancyOptimizer (each rank keeps 1/world of its state).

  mpirun -np 2 /usr/bin/python3 pytorch_ddp_mlp.py --hidden 1024,1024 --batch-size 64 --steps 300
"""
import argparse
import json
import os
import resource
import time

import torch
import torch.distributed as dist
import torch.nn as nn

from torch_mlp import build_mlp


def pss_mib():
    """This process's proportional set size (MiB), 0 where the kernel does not say."""
    try:
        for line in open("/proc/self/smaps_rollup"):
            if line.startswith("Pss:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--hidden", default="1024,1024")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--bucket-cap-mb", type=float, default=25.0)
    parser.add_argument("--port", type=int, default=29517)
    parser.add_argument("--clip-grad-norm", type=float, default=0.0, help="0: no clipping")
    parser.add_argument("--optimizer", choices=["sgd", "adamw"], default="sgd")
    parser.add_argument("--zero", action="store_true", help="shard the optimizer state (ZeroRedundancyOptimizer)")
    args = parser.parse_args()

    rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", "0"))
    world = int(os.environ.get("OMPI_COMM_WORLD_SIZE", "1"))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{args.port}", rank=rank, world_size=world)

    torch.manual_seed(0)
    model = nn.parallel.DistributedDataParallel(build_mlp(args.hidden), bucket_cap_mb=args.bucket_cap_mb)
    if args.optimizer == "adamw":
        optimizer_class, settings = torch.optim.AdamW, dict(lr=1e-3, weight_decay=0.01)
    else:
        optimizer_class, settings = torch.optim.SGD, dict(lr=0.01, momentum=0.9)
    if args.zero:
        from torch.distributed.optim import ZeroRedundancyOptimizer

        optimizer = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=optimizer_class, **settings)
    else:
        optimizer = optimizer_class(model.parameters(), **settings)
    loss_fn = nn.CrossEntropyLoss()
    generator = torch.Generator().manual_seed(rank)
    x = torch.rand(args.batch_size * 16, 784, generator=generator)
    y = torch.randint(0, 10, (args.batch_size * 16,), generator=generator)

    def step(i):
        lo = (i % 16) * args.batch_size
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(model(x[lo : lo + args.batch_size]), y[lo : lo + args.batch_size])
        loss.backward()
        if args.clip_grad_norm > 0:
            nn.utils.clip_grad_norm_(model.parameters(), args.clip_grad_norm)
        optimizer.step()

    for i in range(args.warmup):
        step(i)
    dist.barrier()
    start = time.perf_counter()
    for i in range(args.steps):
        step(i)
    dist.barrier()
    elapsed = time.perf_counter() - start
    if rank == 0:
        step_ms = elapsed / args.steps * 1e3
        print(json.dumps({"step_ms": step_ms, "samples_per_s": world * args.batch_size * args.steps / elapsed,
                          "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                          "pss_mib": pss_mib()}))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
