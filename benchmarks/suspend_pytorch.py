#!/usr/bin/python3
"""PyTorch DDP (gloo) under the stop that benchmarks/suspend_resume.sh gives
ddp_train: 2 processes training a 784-256-10 MLP on random data, timeout 4 s
(init_process_group's, which gloo's collectives use), both stopped with
SIGSTOP a second into training and continued STOP_S (8) seconds later, as
Slurm's scontrol suspend/resume does. Prints, per run, how each process
ended: 0 when it trained all its steps, else its exit code and the last
line of its output that names an error.

  /usr/bin/python3 benchmarks/suspend_pytorch.py [--runs 3] [--stop 8] [--steps 4000]

(Debian's python3-torch: bash scripts/setup.sh python3-torch)
"""
import argparse
import os
import signal
import socket
import subprocess
import sys
import time


def worker(rank, port, steps):
    import datetime
    import torch
    import torch.distributed as dist
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=2, timeout=datetime.timedelta(seconds=4))
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(
        torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10)))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x, y = torch.randn(64, 784), torch.randint(0, 10, (64,))
    for step in range(steps):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
        if step == 10:
            print("training", flush=True)
    dist.destroy_process_group()


def one(stop, steps):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = [subprocess.Popen([sys.executable, __file__, "--worker", str(r), str(port), str(steps)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for r in range(2)]
    for p in procs:
        assert p.stdout.readline().strip() == "training"
    time.sleep(1)
    for p in procs:
        os.kill(p.pid, signal.SIGSTOP)
    time.sleep(stop)
    for p in procs:
        os.kill(p.pid, signal.SIGCONT)
    ends = []
    for p in procs:
        _, err = p.communicate(timeout=300)
        lines = [l for l in err.splitlines() if "Error" in l or "error" in l]
        ends.append("0" if p.returncode == 0 else
                    f"exit {p.returncode}: {lines[-1][:120] if lines else err[-120:]}")
    return ends


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--stop", type=float, default=float(os.environ.get("STOP_S", 8)))
    ap.add_argument("--steps", type=int, default=4000)
    a = ap.parse_args()
    for run in range(a.runs):
        ends = one(a.stop, a.steps)
        print(f"run {run + 1}: trained to the end: {sum(e == '0' for e in ends)} of 2 processes;",
              "; ".join(f"rank {r}: {e}" for r, e in enumerate(ends)), flush=True)


if __name__ == "__main__":
    main()
