"""PyTorch's own DistributedDataParallel on the CNN that bench/ddp_cnn trains, for comparison.

Started by bench/ddp_cnn with torchrun-style variables (RANK, WORLD_SIZE, MASTER_ADDR,
MASTER_PORT); rank 0 prints the median samples per second over all ranks.
"""
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn

BATCH, WARMUP, WINDOWS, STEPS_PER_WINDOW = 64, 5, 7, 5


def main():
    torch.set_num_threads(1)
    # Debian 13's torch 2.6 is built without libuv, which its TCPStore asks for by default
    # from 2.4 on; USE_LIBUV=0 picks the classic store there and is ignored by older releases.
    os.environ.setdefault("USE_LIBUV", "0")
    dist.init_process_group("gloo")
    world = dist.get_world_size()
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(3136, 128), nn.ReLU(), nn.Linear(128, 10))
    ddp = nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(BATCH, 1, 28, 28)
    y = torch.randint(0, 10, (BATCH,))

    def step():
        optimizer.zero_grad()
        nn.functional.cross_entropy(ddp(x), y).backward()
        optimizer.step()

    for _ in range(WARMUP):
        step()
    rates = []
    for _ in range(WINDOWS):
        dist.barrier()
        start = time.perf_counter()
        for _ in range(STEPS_PER_WINDOW):
            step()
        rates.append(BATCH * world * STEPS_PER_WINDOW / (time.perf_counter() - start))
    if dist.get_rank() == 0:
        print(f"{statistics.median(rates):.1f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
