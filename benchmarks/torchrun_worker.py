"""A PyTorch DDP (gloo) worker that checkpoints and resumes, for torchrun
--max-restarts: the PyTorch side of benchmarks/mpirun_restart.sh.

Trains the MLP of ddp_train's --model mlp with SGD (momentum 0.9) on
in-memory random data for --steps steps; rank 0 writes the model's and the
optimizer's state to DIR/checkpoint-STEP.pt every --checkpoint-every steps
(written to a temporary name, then renamed: a killed write leaves no
checkpoint), and every start resumes from the newest one there, printing
"resume: from FILE" as ddp_train does.

  torchrun --nproc_per_node 2 --max_restarts 1 torchrun_worker.py --checkpoint-dir DIR
"""
import argparse
import os
import re
import time

import torch
import torch.distributed as dist
import torch.nn as nn

from torch_mlp import build_mlp


def newest_checkpoint(directory):
    """The path of the checkpoint of the highest step in `directory`, or None."""
    steps = [int(m.group(1)) for name in os.listdir(directory)
             if (m := re.fullmatch(r"checkpoint-(\d+)\.pt", name))]
    return os.path.join(directory, f"checkpoint-{max(steps)}.pt") if steps else None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--checkpoint-dir", required=True)
    parser.add_argument("--hidden", default="128")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--steps", type=int, default=18000)
    parser.add_argument("--checkpoint-every", type=int, default=1000)
    args = parser.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(42)
    model = nn.parallel.DistributedDataParallel(build_mlp(args.hidden))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    generator = torch.Generator().manual_seed(rank)
    inputs = torch.randn(64 * args.batch_size, 784, generator=generator)
    labels = torch.randint(0, 10, (64 * args.batch_size,), generator=generator)

    os.makedirs(args.checkpoint_dir, exist_ok=True)
    dist.barrier()
    start = 0
    path = newest_checkpoint(args.checkpoint_dir)
    if path:
        state = torch.load(path)
        model.module.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        start = state["step"]
        if rank == 0:
            print(f"resume: from {path}", flush=True)
    if rank == 0:
        print("training", flush=True)
    for step in range(start + 1, args.steps + 1):
        at = (step % 64) * args.batch_size
        optimizer.zero_grad()
        loss_fn(model(inputs[at:at + args.batch_size]), labels[at:at + args.batch_size]).backward()
        optimizer.step()
        if step % args.checkpoint_every == 0 and rank == 0:
            temporary = os.path.join(args.checkpoint_dir, f".checkpoint-{step}.pt")
            torch.save({"model": model.module.state_dict(),
                        "optimizer": optimizer.state_dict(), "step": step}, temporary)
            os.replace(temporary, os.path.join(args.checkpoint_dir, f"checkpoint-{step}.pt"))
    if rank == 0:
        print(f"done at step {args.steps} ({time.strftime('%H:%M:%S')})", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
