"""Draw the series plotbench wrote with matplotlib, the way a Python user
would: the raw loss as a thin light line and the smoothed one bold, at
1280x800, to PNG in memory. Prints: matplotlib N median-wall-ms cpu-ms.

The smoothed values come precomputed from plotbench, so matplotlib is
timed on drawing alone (trainbot's time includes smoothing)."""
import io
import statistics
import sys
import time

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


def draw(x, raw, smooth):
    fig, ax = plt.subplots(figsize=(12.8, 8), dpi=100)
    ax.plot(x, raw, color="#0072b2", alpha=0.45, linewidth=1, label="loss (raw)")
    ax.plot(x, smooth, color="#0072b2", linewidth=2.5, label="loss (smoothed 0.6)")
    ax.set_title("bench", fontsize=20)
    ax.set_xlabel("step", fontsize=16)
    ax.set_ylabel("loss", fontsize=16)
    ax.grid(True, color="#e1e1e1")
    ax.legend(fontsize=14)
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return buf.getvalue()


def main():
    path, runs = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 3
    data = np.fromfile(path, dtype="<f8")
    n = len(data) // 2
    raw, smooth = data[:n], data[n:]
    x = np.arange(n, dtype=np.float64)
    draw(x, raw, smooth)  # warm up: fonts, caches
    walls = []
    cpu0 = time.process_time()
    for _ in range(runs):
        t = time.perf_counter()
        draw(x, raw, smooth)
        walls.append((time.perf_counter() - t) * 1000)
    cpu = (time.process_time() - cpu0) * 1000 / runs
    print("matplotlib %d %.1f %.1f" % (n, statistics.median(walls), cpu))


if __name__ == "__main__":
    main()
