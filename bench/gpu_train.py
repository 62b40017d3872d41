"""bench/gpu_train's job under PyTorch's Python DistributedDataParallel (NCCL on a GPU, gloo
on the CPU): ResNet-50 (torchvision's, the architecture and parameters of lockstep's; both
print their parameter count and tensors), batch 128 per worker, bf16 autocast, SGD with
momentum, synthetic 224x224 images on the device. World 1 alone, or under torchrun for one
worker per GPU. Prints the median images/s per worker over timed windows.

    python3 bench/gpu_train.py [--device cuda] [--model resnet50|cnn] [--batch 128]
                               [--image-size 224] [--steps 20] [--repeats 5] [--precision bf16]
    torchrun --nproc-per-node GPUS bench/gpu_train.py ...
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

    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    device = torch.device(f"cuda:{local_rank % torch.cuda.device_count()}" if args.device == "cuda" else args.device)
    backend = "nccl" if device.type == "cuda" else "gloo"
    if "RANK" in os.environ:  # torchrun's
        dist.init_process_group(backend)
    else:
        store = os.path.join(tempfile.mkdtemp(), "store")
        dist.init_process_group(backend, init_method=f"file://{store}", rank=0, world_size=1)
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
    if dist.get_rank() == 0:
        parameters = sum(p.numel() for p in model.parameters())
        tensors = len(list(model.parameters()))
        print(f"PyTorch DDP, {args.model} ({parameters} parameters in {tensors} tensors), batch {args.batch} per "
              f"worker, {args.precision} on {device}, world {dist.get_world_size()}: "
              f"{statistics.median(rates):.1f} images/s per worker (median of {args.repeats} windows of "
              f"{args.steps} steps)")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
