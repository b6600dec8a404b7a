"""A small, real PyTorch training script, the kind trainbot supervises.

It trains an MLP on a synthetic classification task on the CPU and prints
the classic "Epoch [e/E], Step [s/S], Loss: x" lines. On SIGINT (trainbot's
stop) it saves a checkpoint and exits 130. With --alloc-gib N it first caps
its address space (like `ulimit -v`) and then allocates an N GiB tensor, to
provoke a real allocator failure.
"""
import argparse
import os
import resource
import sys

import torch
import torch.nn as nn

p = argparse.ArgumentParser()
p.add_argument("--epochs", type=int, default=3)
p.add_argument("--steps", type=int, default=50)
p.add_argument("--batch-size", type=int, default=64)
p.add_argument("--lr", type=float, default=1e-2)
p.add_argument("--step-sleep", type=float, default=0.0)
p.add_argument("--alloc-gib", type=float, default=0)
args = p.parse_args()

torch.manual_seed(0)
torch.set_num_threads(1)

if args.alloc_gib:
    # Cap the address space at what we use now plus 512 MiB, then ask for more.
    with open("/proc/self/status") as f:
        vm = next(int(l.split()[1]) * 1024 for l in f if l.startswith("VmSize:"))
    limit = vm + (512 << 20)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    n = int(args.alloc_gib * (1 << 30) / 4)
    big = torch.empty(n, dtype=torch.float32)
    big.fill_(1.0)
    print("allocated", big.numel())
    sys.exit(0)

w_true = torch.randn(20, 4)
x_all = torch.randn(4096, 20)
y_all = (x_all @ w_true).argmax(dim=1)

model = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 4))
opt = torch.optim.Adam(model.parameters(), lr=args.lr)
loss_fn = nn.CrossEntropyLoss()

try:
    for epoch in range(1, args.epochs + 1):
        for step in range(1, args.steps + 1):
            idx = torch.randint(0, x_all.shape[0], (args.batch_size,))
            loss = loss_fn(model(x_all[idx]), y_all[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            if step % 5 == 0:
                print(f"Epoch [{epoch}/{args.epochs}], Step [{step}/{args.steps}], Loss: {loss.item():.4f}")
            if args.step_sleep:
                import time
                time.sleep(args.step_sleep)
except KeyboardInterrupt:
    path = os.path.join(os.environ.get("TRAINBOT_RUN_DIR", "."), "checkpoint.pt")
    torch.save(model.state_dict(), path)
    print("interrupted: checkpoint saved to", path, flush=True)
    sys.exit(130)
print("done")
