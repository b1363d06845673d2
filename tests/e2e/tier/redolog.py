# SPDX-License-Identifier: GPL-2.0-or-later
"""Archived redo logs with headers a test chooses, in the layout tier/oracle-header.h
parses (block 0, and Oracle's kcrfh fields in block 1 with its XOR checksum)."""

import calendar
import datetime
import random
import struct

T0 = calendar.timegm((2026, 12, 1, 0, 0, 0))
BLOCK = 512


def kcrf_time(t):
    d = datetime.datetime.fromtimestamp(t, datetime.timezone.utc)
    return (((((d.year - 1988) * 12 + d.month - 1) * 31 + d.day - 1) * 24 + d.hour) * 60 + d.minute) * 60 + d.second


def redo_log(dbid, name, thread, seq, low_scn, next_scn, blocks=2048, damaged=False, t0=None):
    """An archived log: Oracle's block 0 and kcrfh block 1, then redo-like bytes (seeded by its identity).

    Its time range: t0 (default T0) plus a tenth of a second per SCN."""
    t0 = T0 if t0 is None else t0
    b0 = bytearray(BLOCK)
    b0[1] = 0x22
    struct.pack_into("<III", b0, 20, BLOCK, blocks - 1, 0)
    struct.pack_into("<I", b0, 4, 0xffc00000)
    b1 = bytearray(BLOCK)
    b1[0], b1[1] = 0x01, 0x22
    struct.pack_into("<II", b1, 4, 1, seq)
    struct.pack_into("<I", b1, 24, dbid)
    b1[28:36] = name.ljust(8).encode()
    struct.pack_into("<II", b1, 40, blocks - 1, BLOCK)
    struct.pack_into("<H", b1, 50, 2)
    struct.pack_into("<I", b1, 160, 1153923201)
    struct.pack_into("<H", b1, 176, thread)
    struct.pack_into("<IHxxI", b1, 180, low_scn & 0xffffffff, low_scn >> 32, kcrf_time(t0 + low_scn // 10))
    struct.pack_into("<IHxxI", b1, 192, next_scn & 0xffffffff, next_scn >> 32, kcrf_time(t0 + next_scn // 10))
    x = 0
    for i in range(0, BLOCK, 2):
        x ^= struct.unpack_from("<H", b1, i)[0]
    struct.pack_into("<H", b1, 14, x)
    if damaged:
        b1[300] ^= 0xff
    rng = random.Random("%d/%d/%d/%d" % (dbid, thread, seq, next_scn))
    return bytes(b0) + bytes(b1) + rng.randbytes((blocks - 2) * BLOCK)
