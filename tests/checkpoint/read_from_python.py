"""Reads a ctgrad checkpoint with nothing but json, struct and numpy, and checks every value."""
import json
import math
import struct
import subprocess
import sys

import numpy as np

path = sys.argv[2]
subprocess.run([sys.argv[1], path], check=True)
with open(path, "rb") as f:
    (n,) = struct.unpack("<Q", f.read(8))
    header = json.loads(f.read(n))
    data = f.read()
dtypes = {"F32": np.float32, "F64": np.float64, "I32": np.int32}
def tensor(name):
    e = header[name]
    begin, end = e["data_offsets"]
    return np.frombuffer(data[begin:end], dtype=dtypes[e["dtype"]]).reshape(e["shape"])

w, b = tensor("enc.w"), tensor("enc.b")
ok = (w.shape == (3, 4) and np.allclose(w.ravel(), np.sin(np.arange(12)), rtol=1e-6, atol=1e-7)
      and np.array_equal(b, np.array([-0.5 * i for i in range(4)], dtype=np.float32))
      and header["__metadata__"]["rng_step"] == "42"
      and json.loads(header["__metadata__"]["config"]) == {"model": "toy"})
print("1 passed, 0 failed" if ok else f"0 passed, 1 failed: {header} {w} {b}")
sys.exit(0 if ok else 1)
