# SPDX-License-Identifier: MIT
"""A head row's data (daemon/store/head.c, store/pack.h) in Python, for the
benchmarks that write made-up samples into a database: version 1, the
flags and the figures that are not 0 as two bit sets, then those figures,
integers as varints and doubles as their 8 bytes, little-endian."""
import struct

VERSION = 1
# (name, kind) in head.c's order: "u" an integer, "d" a double
FIELDS = [("interval_us", "u"), ("cpu_pct", "d"), ("cpu_time_ns", "u"), ("user_time_ns", "u"),
          ("system_time_ns", "u"), ("rss_bytes", "u"), ("rss_anon_bytes", "u"), ("peak_rss_bytes", "u"),
          ("threads", "u"), ("processes", "u"), ("pss_bytes", "u"), ("pss_anon_bytes", "u"), ("uss_bytes", "u"),
          ("read_bytes", "u"), ("write_bytes", "u"), ("rchar_bytes", "u"), ("wchar_bytes", "u"),
          ("read_bytes_per_s", "d"), ("write_bytes_per_s", "d"), ("netns_rx_bytes", "u"), ("netns_tx_bytes", "u"),
          ("netns_rx_bytes_per_s", "d"), ("netns_tx_bytes_per_s", "d"), ("gpu_mem_bytes", "u"),
          ("gpu_util_pct", "d"), ("energy_j", "d")]
FLAGS = ["has_cpu_pct", "has_rss", "has_peak_rss", "has_pss", "has_pss_anon", "has_io", "has_io_rate", "has_net",
         "has_net_rate", "has_gpu_mem", "has_gpu_util", "has_energy"]


def _varint(v):
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7f) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def _get_varint(b, i):
    v = shift = 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7f) << shift
        shift += 7
        if not c & 0x80:
            return v, i


def pack(s):
    """s: a dict of FIELDS and FLAGS (missing ones 0 and false)."""
    flags = sum(1 << i for i, f in enumerate(FLAGS) if s.get(f))
    present, body = 0, bytearray()
    for i, (name, kind) in enumerate(FIELDS):
        v = s.get(name) or 0
        if kind == "d":
            bits = struct.unpack("<Q", struct.pack("<d", float(v)))[0]
            if bits:
                present |= 1 << i
                body += struct.pack("<Q", bits)
        elif v:
            present |= 1 << i
            body += _varint(int(v))
    return bytes([VERSION]) + _varint(flags) + _varint(present) + bytes(body)


def unpack(b):
    assert b[0] == VERSION
    flags, i = _get_varint(b, 1)
    present, i = _get_varint(b, i)
    s = {f: bool(flags >> k & 1) for k, f in enumerate(FLAGS)}
    for k, (name, kind) in enumerate(FIELDS):
        v = 0
        if present >> k & 1:
            if kind == "d":
                v = struct.unpack("<d", b[i:i + 8])[0]
                i += 8
            else:
                v, i = _get_varint(b, i)
        s[name] = float(v) if kind == "d" else v
    return s
