"""tbwriter: TensorBoard event files in pure Python, for trainbot's tests.

torch.utils.tensorboard needs the `tensorboard` package, which Debian does
not ship; this module writes the same files from the format's
specification, with nothing but the standard library:

* TFRecord framing: uint64 length (little-endian), uint32 masked CRC32C of
  those 8 bytes, the data, uint32 masked CRC32C of the data; masked CRC =
  ((crc >> 15) | (crc << 17)) + 0xa282ead8, CRC32C with the Castagnoli
  polynomial (reflected 0x82F63B78).
* tensorflow.Event (event.proto): wall_time = 1 (double), step = 2
  (int64), file_version = 3 (string), summary = 5 (Summary).
* Summary (summary.proto): value = 1 (repeated Value); Value: tag = 1,
  simple_value = 2 (float), tensor = 8 (TensorProto), metadata = 9
  (SummaryMetadata: plugin_data = 1 { plugin_name = 1 }).
* TensorProto (tensor.proto): dtype = 1, tensor_shape = 2,
  tensor_content = 4, float_val = 5, double_val = 6, int_val = 7,
  string_val = 8, int64_val = 10, half_val = 13 (packed).

Fields are written in field-number order, as protobuf's serializers do.

    w = EventWriter("runs/exp1")            # events.out.tfevents.TIME.HOST.PID.N
    w.add_scalar("loss", 0.25, step=10)     # simple_value, as SummaryWriter.add_scalar
    w.add_scalar("lr", 1e-3, step=10, new_style=True)   # a tensor, as new_style=True
    w.add_tf2_scalar("epoch_loss", 0.3, step=1)         # tf.summary.scalar's tensor_content
    w.flush()

`python3 tbwriter.py fixtures DIR` writes the fixtures of
trainer/tfevents/testdata (deterministic: fixed times, host and pid).
"""

import math
import os
import socket
import struct
import sys
import time

_POLY = 0x82F63B78
_TABLE = []
for _i in range(256):
    _c = _i
    for _ in range(8):
        _c = (_c >> 1) ^ _POLY if _c & 1 else _c >> 1
    _TABLE.append(_c)


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc = _TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked_crc(data):
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def record(data):
    """One TFRecord: header, data, footer."""
    header = struct.pack("<Q", len(data))
    return header + struct.pack("<I", masked_crc(header)) + data + struct.pack("<I", masked_crc(data))


# Protocol buffers wire format: tag = field << 3 | wire type; varints of
# 7 bits, least significant first; negative int64 as 64-bit two's complement.
VARINT, FIXED64, BYTES, FIXED32 = 0, 1, 2, 5


def varint(n):
    n &= 0xFFFFFFFFFFFFFFFF
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def key(field, wire):
    return varint(field << 3 | wire)


def f_varint(field, n):
    return key(field, VARINT) + varint(n)


def f_double(field, x):
    return key(field, FIXED64) + struct.pack("<d", x)


def f_float(field, x):
    return key(field, FIXED32) + struct.pack("<f", x)


def f_bytes(field, b):
    if isinstance(b, str):
        b = b.encode("utf-8")
    return key(field, BYTES) + varint(len(b)) + b


DT_FLOAT, DT_DOUBLE, DT_INT32, DT_STRING, DT_INT64, DT_HALF = 1, 2, 3, 7, 9, 19


def event(wall_time, step=0, file_version=None, summary=None):
    out = f_double(1, wall_time)
    if step:
        out += f_varint(2, step)
    if file_version is not None:
        out += f_bytes(3, file_version)
    if summary is not None:
        out += f_bytes(5, summary)
    return out


def summary(*values):
    return b"".join(f_bytes(1, v) for v in values)


def metadata(plugin):
    return f_bytes(1, f_bytes(1, plugin))


def simple_value(tag, x):
    return f_bytes(1, tag) + f_float(2, x)


def tensor_value(tag, tensor, plugin="scalars"):
    out = f_bytes(1, tag) + f_bytes(8, tensor)
    if plugin is not None:
        out += f_bytes(9, metadata(plugin))
    return out


def float_tensor(x):
    """PyTorch's new_style scalar: float_val, an empty shape."""
    return f_varint(1, DT_FLOAT) + f_bytes(2, b"") + f_bytes(5, struct.pack("<f", x))


def content_tensor(x, dtype=DT_FLOAT):
    """tf.summary.scalar's: the value in tensor_content."""
    fmt = {DT_FLOAT: "<f", DT_DOUBLE: "<d", DT_INT32: "<i", DT_INT64: "<q"}[dtype]
    return f_varint(1, dtype) + f_bytes(2, b"") + f_bytes(4, struct.pack(fmt, x))


def half_tensor(x):
    bits = struct.unpack("<H", struct.pack("<e", x))[0]
    return f_varint(1, DT_HALF) + f_bytes(2, b"") + f_bytes(13, varint(bits))


def string_tensor(s):
    return f_varint(1, DT_STRING) + f_bytes(2, b"") + f_bytes(8, s)


class EventWriter:
    """Appends events to logdir/events.out.tfevents.TIME.HOST.PID.N."""

    _count = 0

    def __init__(self, logdir, start=None, host=None, pid=None, flush_every=None):
        os.makedirs(logdir, exist_ok=True)
        start = time.time() if start is None else start
        host = socket.gethostname() if host is None else host
        pid = os.getpid() if pid is None else pid
        name = "events.out.tfevents.%010d.%s.%d.%d" % (int(start), host, pid, EventWriter._count)
        EventWriter._count += 1
        self.path = os.path.join(logdir, name)
        self._f = open(self.path, "ab")
        self._pending = 0
        self._flush_every = flush_every
        self._seen = set()
        self.write(event(start, file_version="brain.Event:2"))
        self.flush()

    def write(self, data):
        self._f.write(record(data))
        self._pending += 1
        if self._flush_every and self._pending >= self._flush_every:
            self.flush()

    def add_scalar(self, tag, value, step, walltime=None, new_style=False):
        wall = time.time() if walltime is None else walltime
        if new_style:
            v = tensor_value(tag, float_tensor(value))
        else:
            v = simple_value(tag, value)
        self.write(event(wall, step, summary=summary(v)))

    def add_tf2_scalar(self, tag, value, step, walltime=None, dtype=DT_FLOAT):
        """TF2 writes a tag's metadata with its first summary only."""
        wall = time.time() if walltime is None else walltime
        plugin = None if tag in self._seen else "scalars"
        self._seen.add(tag)
        self.write(event(wall, step, summary=summary(tensor_value(tag, content_tensor(value, dtype), plugin))))

    def flush(self):
        self._f.flush()
        self._pending = 0

    def close(self):
        self._f.close()


T0 = 1764547200.0  # 2025-12-01T00:00:00Z


def fixtures(out):
    """The committed fixtures; trainer/tfevents's tests know their content."""
    # pytorch: SummaryWriter.add_scalar of a training loop, default style,
    # and one new_style tag.
    w = EventWriter(os.path.join(out, "pytorch"), start=T0, host="fixture", pid=4242)
    for step in range(20):
        w.add_scalar("Loss/train", 1.0 / (step + 1), step, walltime=T0 + 1 + step * 0.5)
        if step % 5 == 4:
            w.add_scalar("Accuracy/val", 0.5 + step / 40, step, walltime=T0 + 1 + step * 0.5)
        w.add_scalar("lr", 0.1 * 0.9 ** step, step, walltime=T0 + 1 + step * 0.5, new_style=True)
    w.close()

    # tf2: tf.summary.scalar (tensor_content, metadata once), a double, an
    # int64, a half, and a text summary (a string tensor: no scalar).
    w = EventWriter(os.path.join(out, "tf2"), start=T0 + 100, host="fixture", pid=7)
    for epoch in range(1, 4):
        wall = T0 + 100 + epoch
        w.add_tf2_scalar("epoch_loss", 1.0 / epoch, epoch, walltime=wall)
        w.add_tf2_scalar("epoch_learning_rate", 1e-3 / epoch, epoch, walltime=wall, dtype=DT_DOUBLE)
        w.add_tf2_scalar("images_seen", 128 * epoch, epoch, walltime=wall, dtype=DT_INT64)
    w.write(event(T0 + 104, 3, summary=summary(tensor_value("loss_fp16", half_tensor(0.25)))))
    w.write(event(T0 + 104, 3, summary=summary(tensor_value("notes", string_tensor("lr warmup done"), plugin="text"))))
    w.close()

    # multi: two files (the training restarted from a checkpoint at step
    # 10) and a subdirectory, as add_scalars("loss", {"val": …}) makes.
    d = os.path.join(out, "multi")
    w = EventWriter(d, start=T0 + 200, host="fixture", pid=1)
    for step in range(0, 12):
        w.add_scalar("loss", 2.0 - step * 0.1, step, walltime=T0 + 200 + step)
    w.close()
    w = EventWriter(d, start=T0 + 300, host="fixture", pid=2)
    for step in range(10, 15):
        w.add_scalar("loss", 1.5 - step * 0.05, step, walltime=T0 + 300 + step)
    w.close()
    w = EventWriter(os.path.join(d, "loss_val"), start=T0 + 200, host="fixture", pid=1)
    for step in (5, 10):
        w.add_scalar("loss", 1.9 - step * 0.1, step, walltime=T0 + 200 + step)
    w.close()

    # damaged: a record with one data byte flipped (skipped), then good
    # records, then a torn last record (waited for).
    d = os.path.join(out, "damaged")
    os.makedirs(d, exist_ok=True)
    recs = [record(event(T0 + 400, file_version="brain.Event:2"))]
    for step in range(1, 6):
        recs.append(record(event(T0 + 400 + step, step, summary=summary(simple_value("loss", step / 10)))))
    bad = bytearray(recs[2])
    bad[20] ^= 0x01  # inside the data of step 2
    recs[2] = bytes(bad)
    torn = record(event(T0 + 406, 6, summary=summary(simple_value("loss", 0.6))))
    with open(os.path.join(d, "events.out.tfevents.%010d.fixture.3.0" % int(T0 + 400)), "wb") as f:
        f.write(b"".join(recs) + torn[: len(torn) - 7])


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "fixtures":
        fixtures(sys.argv[2])
    elif len(sys.argv) == 3 and sys.argv[1] == "crc":
        print(crc32c(sys.argv[2].encode()), masked_crc(sys.argv[2].encode()))
    else:
        sys.exit("usage: tbwriter.py fixtures DIR | crc TEXT")
