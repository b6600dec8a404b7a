"""A real PyTorch CPU training whose activations scale with the batch.

An MLP of element-wise blocks (scale, shift, ReLU) between two linear
layers, trained with SGD on a fixed random regression task: the memory the
forward pass keeps for the backward grows with --batch-size, the compute is
small. --ckpt 1 recomputes the blocks in 3 segments during the backward
(torch.utils.checkpoint.checkpoint_sequential): less memory, more time, and
the very same losses. Prints "step s/S loss=x" and, at the end, the peak
resident memory the script itself measured ("Memory: … MB", as the seed's
logs print it).

Run it with MALLOC_MMAP_THRESHOLD_=65536 in the environment: glibc's
adaptive threshold otherwise keeps freed activations in the heap and the
resident memory stops following the batch.
"""
import argparse
import resource

import torch
import torch.nn as nn
from torch.utils.checkpoint import checkpoint_sequential

p = argparse.ArgumentParser()
p.add_argument("--batch-size", type=int, default=256)
p.add_argument("--ckpt", type=int, default=0)
p.add_argument("--steps", type=int, default=2)
p.add_argument("--width", type=int, default=1024)
p.add_argument("--layers", type=int, default=12)
args = p.parse_args()

torch.manual_seed(0)
torch.set_num_threads(1)


class Block(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.scale = nn.Parameter(torch.full((width,), 0.9))
        self.shift = nn.Parameter(torch.zeros(width))

    def forward(self, x):
        return torch.relu(x * self.scale + self.shift)


inp = nn.Linear(32, args.width)
blocks = nn.Sequential(*[Block(args.width) for _ in range(args.layers)])
head = nn.Linear(args.width, 1)
params = list(inp.parameters()) + list(blocks.parameters()) + list(head.parameters())
opt = torch.optim.SGD(params, lr=0.01)
x = torch.randn(args.batch_size, 32)
y = x[:, :1].sin()

for step in range(1, args.steps + 1):
    h = inp(x)
    h = checkpoint_sequential(blocks, 3, h) if args.ckpt else blocks(h)
    loss = ((head(h) - y) ** 2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"step {step}/{args.steps} loss={loss.item():.6f}", flush=True)
peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(f"Memory: {peak_kib / 1024:.3f} MB", flush=True)
