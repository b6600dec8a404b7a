"""A tiny PyTorch training that reports only through TensorBoard event files.

It prints nothing on stdout: its loss goes through tbwriter (trainbot's
pure-Python event writer, trainer/tfevents/testdata/tbwriter.py, whose
directory is in TBWRITER_DIR) into LOGDIR, as SummaryWriter.add_scalar
would write it, flushed after each step. After each flush it appends
"STEP LOSS" to LEDGER, so a test knows what was logged so far.
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.environ["TBWRITER_DIR"])
import tbwriter  # noqa: E402
import torch  # noqa: E402

p = argparse.ArgumentParser()
p.add_argument("--logdir", required=True)
p.add_argument("--ledger", required=True)
p.add_argument("--steps", type=int, default=80)
p.add_argument("--sleep", type=float, default=0.05)
a = p.parse_args()

torch.manual_seed(0)
x = torch.randn(256, 8)
y = x @ torch.randn(8, 1) + 0.1 * torch.randn(256, 1)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
writer = tbwriter.EventWriter(a.logdir)
with open(a.ledger, "a") as ledger:
    for step in range(a.steps):
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        writer.add_scalar("loss", loss.item(), step)
        if step % 10 == 0:
            writer.add_scalar("lr", opt.param_groups[0]["lr"], step, new_style=True)
        writer.flush()
        ledger.write("%d %r\n" % (step, loss.item()))
        ledger.flush()
        time.sleep(a.sleep)
writer.close()
