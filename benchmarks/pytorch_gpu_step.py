"""One GPU, the same training step as `ddp_train --device cuda`, in PyTorch.

DDP with the NCCL backend at world size 1 (so the gradient hook path runs, as
ddp_train's Reducer does), an MLP of the given widths, SGD with momentum 0.9,
float32 with TF32 off (ddp_train's cuBLAS GEMMs are full float32). Batches are
prepared on the host in page-locked memory and copied with non_blocking=True
each step, as ddp_train copies its batches. Prints one JSON line with the mean
step time over the timed steps (after warm-up; the device is synchronised
before and after the timed loop).

  python3 benchmarks/pytorch_gpu_step.py --hidden 1024,1024 --batch-size 256 --steps 200
"""
import argparse
import json
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn

from torch_mlp import build_mlp


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--hidden", default="1024,1024")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--port", type=int, default=29531)
    args = parser.parse_args()

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(args.port))
    dist.init_process_group("nccl", rank=0, world_size=1)
    device = torch.device("cuda", 0)

    torch.manual_seed(0)
    model = nn.parallel.DistributedDataParallel(build_mlp(args.hidden).to(device), device_ids=[0])
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    pool = 8
    x = torch.rand(args.batch_size * pool, 784).pin_memory()
    y = torch.randint(0, 10, (args.batch_size * pool,)).pin_memory()

    def step(i):
        lo = (i % pool) * args.batch_size
        xb = x[lo : lo + args.batch_size].to(device, non_blocking=True)
        yb = y[lo : lo + args.batch_size].to(device, non_blocking=True)
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(model(xb), yb)
        loss.backward()
        optimizer.step()

    for i in range(args.warmup):
        step(i)
    torch.cuda.synchronize()
    start = time.perf_counter()
    for i in range(args.steps):
        step(i)
    torch.cuda.synchronize()
    elapsed = time.perf_counter() - start
    print(json.dumps({"step_ms": elapsed / args.steps * 1e3, "torch": torch.__version__,
                      "device": torch.cuda.get_device_name(0)}))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
