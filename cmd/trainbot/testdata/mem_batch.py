"""A training stand-in whose resident memory follows its batch: it holds
64 KiB per example (written, so the pages are resident) and prints two
steps of a loss. No PyTorch needed: the peaks trainbot records (the
kernel's high-water mark) make a clean line against batch_size. It holds
the memory half a second, as a training does: the supervisor samples the
high-water mark every 100 ms at most, and a process that exits sooner can
end before its peak was read."""
import sys
import time

bs = int(sys.argv[1])
held = b"\x01" * (bs * 65536)
for step in (1, 2):
    print(f"step {step}/2 loss={1.0 / step:.4f} n={len(held)}", flush=True)
time.sleep(0.5)
import resource
print("maxrss", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, flush=True)
