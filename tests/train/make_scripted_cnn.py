"""Writes a small CNN for 1x28x28 images as TorchScript, as a user of lockstep train would:
python3 make_scripted_cnn.py OUT.pt"""
import sys

import torch
from torch import nn


class SmallCnn(nn.Module):
    def __init__(self, classes: int = 10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2))
        self.classifier = nn.Linear(32 * 7 * 7, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.features(x), 1))


if __name__ == "__main__":
    torch.manual_seed(0)
    torch.jit.script(SmallCnn()).save(sys.argv[1])
