"""bench/gpu_train's job under PyTorch's Python DistributedDataParallel (NCCL on a GPU, gloo
on the CPU), world 1: ResNet-50 (torchvision), batch 128, bf16 autocast, SGD with momentum,
synthetic 224x224 images on the device. Prints the median images/s over timed windows.

    python3 bench/gpu_train.py [--device cuda] [--model resnet50|cnn] [--batch 128]
                               [--image-size 224] [--steps 20] [--repeats 5] [--precision bf16]
"""
import argparse
import os
import statistics
import tempfile
import time

import torch
import torch.distributed as dist
from torch import nn


def make_model(name: str) -> nn.Module:
    if name == "resnet50":
        import torchvision
        return torchvision.models.resnet50(num_classes=1000)
    # lockstep's "cnn" for 3-channel input: two convolutions, then two linear layers.
    return nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
        nn.LazyLinear(128), nn.ReLU(), nn.Linear(128, 1000))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--image-size", type=int, default=224)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--precision", default="bf16", choices=["bf16", "fp32"])
    args = parser.parse_args()

    device = torch.device(args.device)
    store = os.path.join(tempfile.mkdtemp(), "store")
    dist.init_process_group("nccl" if device.type == "cuda" else "gloo", init_method=f"file://{store}",
                            rank=0, world_size=1)
    torch.manual_seed(0)
    model = make_model(args.model).to(device)
    images = torch.randn(args.batch, 3, args.image_size, args.image_size, device=device)
    labels = torch.randint(1000, (args.batch,), device=device)
    model(images)  # materializes lazy layers before DDP sees the parameters
    ddp = nn.parallel.DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.01, momentum=0.9)

    def window(steps: int) -> float:
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        began = time.perf_counter()
        for _ in range(steps):
            optimizer.zero_grad()
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=args.precision == "bf16"):
                loss = nn.functional.cross_entropy(ddp(images), labels)
            loss.backward()
            optimizer.step()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        return steps * args.batch / (time.perf_counter() - began)

    window(3)  # warm-up
    rates = [window(args.steps) for _ in range(args.repeats)]
    print(f"PyTorch DDP, world 1, {args.model}, batch {args.batch}, {args.precision} on {device}: "
          f"{statistics.median(rates):.1f} images/s (median of {args.repeats} windows of {args.steps} steps)")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
