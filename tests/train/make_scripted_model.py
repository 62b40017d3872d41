"""Writes a small model for 1x28x28 images as TorchScript, as a user of lockstep train
would: python3 make_scripted_model.py OUT.pt [--classes N] [--mlp | --reordered]"""
import argparse

import torch
from torch import nn


class SmallCnn(nn.Module):
    def __init__(self, classes: int):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2))
        self.classifier = nn.Linear(32 * 7 * 7, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.features(x), 1))


class SmallMlp(nn.Module):
    def __init__(self, classes: int):
        super().__init__()
        self.hidden = nn.Linear(28 * 28, 32)
        self.out = nn.Linear(32, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(torch.relu(self.hidden(torch.flatten(x, 1))))


class ReorderedMlp(nn.Module):
    """Registers its layers in the reverse of the order it uses them, so that their gradients
    arrive in registration order: the reverse of DistributedDataParallel's first guess."""

    def __init__(self, classes: int):
        super().__init__()
        self.out = nn.Linear(64, classes)
        self.middle = nn.Linear(64, 64)
        self.hidden = nn.Linear(28 * 28, 64)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.hidden(torch.flatten(x, 1)))
        return self.out(torch.relu(self.middle(x)))


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--classes", type=int, default=10)
    parser.add_argument("--mlp", action="store_true")
    parser.add_argument("--reordered", action="store_true")
    args = parser.parse_args()
    torch.manual_seed(0)
    if args.reordered:
        model = ReorderedMlp(args.classes)
    else:
        model = SmallMlp(args.classes) if args.mlp else SmallCnn(args.classes)
    torch.jit.script(model).save(args.out)
