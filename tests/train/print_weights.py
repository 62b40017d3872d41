"""Prints the tensors Python reads from a file, one per line: tensor NAME ELEMENT_SIZE SHAPE HEX,
where HEX is the tensor's bytes. python3 print_weights.py state-dict|script FILE"""
import sys

import torch

kind, path = sys.argv[1], sys.argv[2]
# weights_only=True: what a plain torch.load does from PyTorch 2.6 on, asked of 1.13 too.
weights = torch.jit.load(path).state_dict() if kind == "script" else torch.load(path, weights_only=True)
for name, tensor in weights.items():
    t = tensor.contiguous()
    shape = "x".join(str(size) for size in t.shape)
    print("tensor", name, t.element_size(), shape, t.numpy().tobytes().hex())
