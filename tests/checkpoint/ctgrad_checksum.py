"""The checksum ctgrad records in a checkpoint's metadata ("ctgrad_checksum"), written from its
definition in checkpoint/safetensors.cpp: FNV-1a-style mixing of 8-byte little-endian words over
the metadata (every key but the checksum's, in byte order), the tensor table (in name order: name,
dtype, rank, dims, begin and end offsets), then the data section. Strings go in preceded by their
length, numbers as u64; a tail shorter than 8 bytes is mixed byte by byte.

    python3 ctgrad_checksum.py FILE           prints the recorded and the recomputed checksum
    python3 ctgrad_checksum.py --reseal FILE  rewrites FILE's checksum to match its content
"""
import json
import struct
import sys

M = (1 << 64) - 1
PRIME = 0x100000001B3
KEY = "ctgrad_checksum"


def checksum(header, data):
    stream = bytearray()

    def string(s):
        stream.extend(struct.pack("<Q", len(s)) + s)

    metadata = header.get("__metadata__", {})
    for k in sorted(metadata, key=lambda s: s.encode()):
        if k != KEY:
            string(k.encode())
            string(metadata[k].encode())
    for name in sorted((n for n in header if n != "__metadata__"), key=lambda s: s.encode()):
        t = header[name]
        string(name.encode())
        string(t["dtype"].encode())
        stream.extend(struct.pack("<Q", len(t["shape"])))
        for d in t["shape"] + list(t["data_offsets"]):
            stream.extend(struct.pack("<Q", d))
    stream += data
    h = 0xCBF29CE484222325
    whole = len(stream) // 8 * 8
    for (w,) in struct.iter_unpack("<Q", bytes(stream[:whole])):
        h = ((h ^ w) * PRIME) & M
        h ^= h >> 29
    for b in stream[whole:]:
        h = ((h ^ b) * PRIME) & M
    return f"{h:016x}"


def read(path):
    raw = open(path, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    return json.loads(raw[8:8 + n]), raw[8 + n:]


def write(path, header, data):
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    open(path, "wb").write(struct.pack("<Q", len(h)) + h + data)


if __name__ == "__main__":
    reseal = sys.argv[1] == "--reseal"
    path = sys.argv[-1]
    header, data = read(path)
    meta = header.setdefault("__metadata__", {})
    if reseal:
        meta[KEY] = checksum(header, data)
        write(path, header, data)
    else:
        print(meta.get(KEY), checksum(header, data))
