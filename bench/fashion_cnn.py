"""The default `lockstep train` recipe in PyTorch, for comparison (docs/PERFORMANCE.md).

    /usr/bin/python3 bench/fashion_cnn.py [--workers 2] [--epochs 5]   # Debian's python3-torch

Two worker processes (torch.multiprocessing, gloo, one intra-op thread each) train the CNN
of bench/ddp_cnn.cpp under torch.nn.parallel.DistributedDataParallel on Fashion-MNIST from
Debian's dataset-fashion-mnist package: batch 64 per worker, SGD lr 0.05 momentum 0.9
weight decay 5e-4, 100 warm-up steps then cosine decay, inputs normalized by the mean and
standard deviation of the first 512 training images, no augmentation, the test split
evaluated after every epoch in batches of 64. Rank 0 prints the test accuracy after the last
epoch and the wall time from start to end.
"""
import argparse
import gzip
import math
import os
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F

DATA = "/usr/share/datasets/fashion-mnist"


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    dims = data[3]
    shape = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return torch.frombuffer(bytearray(data), dtype=torch.uint8, offset=4 + 4 * dims).reshape(shape)


def load(prefix):
    images = read_idx(f"{DATA}/{prefix}-images-idx3-ubyte.gz").float().div(255).unsqueeze(1)
    labels = read_idx(f"{DATA}/{prefix}-labels-idx1-ubyte.gz").long()
    return images, labels


def cnn():
    return nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(3136, 128), nn.ReLU(), nn.Linear(128, 10))


def worker(rank, world, epochs, port, started):
    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    os.environ.setdefault("USE_LIBUV", "0")  # Debian 13's torch 2.6 has no libuv (bench/ddp_cnn.py)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    train_x, train_y = load("train")
    test_x, test_y = load("t10k")
    mean, std = train_x[:512].mean().item(), train_x[:512].std().item()
    train_x, test_x = (train_x - mean) / std, (test_x - mean) / std

    torch.manual_seed(0)
    model = nn.parallel.DistributedDataParallel(cnn())
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
    batch, warmup = 64, 100
    sampler = torch.utils.data.distributed.DistributedSampler(range(len(train_x)), world, rank, seed=0)
    steps_per_epoch = math.ceil(len(sampler) / batch)
    total = epochs * steps_per_epoch

    def lr_at(step):
        if step < warmup:
            return (step + 1) / warmup
        return 0.5 * (1 + math.cos(math.pi * min(1.0, (step - warmup) / max(total - warmup, 1))))

    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_at)
    mine = torch.arange(rank, len(test_x), world)
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        order = torch.tensor(list(sampler))
        model.train()
        for i in range(0, len(order), batch):
            index = order[i:i + batch]
            optimizer.zero_grad()
            F.cross_entropy(model(train_x[index]), train_y[index]).backward()
            optimizer.step()
            schedule.step()
        # Validated after every epoch, as lockstep train does.
        model.eval()
        with torch.no_grad():
            correct = torch.zeros(1, dtype=torch.float64)
            for i in range(0, len(mine), batch):
                index = mine[i:i + batch]
                correct += (model(test_x[index]).argmax(1) == test_y[index]).sum().item()
        dist.all_reduce(correct)
    if rank == 0:
        print(f"PyTorch DDP cnn on fashion-mnist: test top-1 {100 * correct.item() / len(test_x):.2f}% after "
              f"{epochs} epochs on {world} workers in {time.time() - started:.0f} s", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=5)
    args = parser.parse_args()
    mp.spawn(worker, args=(args.workers, args.epochs, 29400 + os.getpid() % 500, time.time()), nprocs=args.workers)
