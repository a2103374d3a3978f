#!/usr/bin/env python3
"""How tall the y-axis tick labels of a `readpath plot` PNG are, in pixels
and as a share of the image's height: the figure BENCHMARKS.md records for
`plot` and `plot --slide` (a slide's labels must be read from the back of a
room). Reads the PNG itself (8-bit RGB/RGBA, as rsvg-convert writes it),
finds the first panel's y axis (the leftmost long dark vertical line) and
measures each run of rows with dark pixels just left of it: one run per
tick label, its height the digits' height.

Usage: bench/plot-legibility.py FILE.png
"""
import struct
import sys
import zlib


def read_png(path):
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, w = 8, b"", 0
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, ctype = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and ctype in (2, 6), "8-bit RGB or RGBA only"
            bpp = 3 if ctype == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw = zlib.decompress(idat)
    stride = w * bpp
    rows, prev = [], bytearray(stride)
    for y in range(h):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append([sum(line[x * bpp:x * bpp + 3]) < 450 for x in range(w)])
        prev = line
    return w, h, rows


def main():
    w, h, dark = read_png(sys.argv[1])
    # The y axis: the leftmost column with a dark run of at least a tenth
    # of the image's height.
    axis = None
    for x in range(w // 2):
        run = best = 0
        for y in range(h):
            run = run + 1 if dark[y][x] else 0
            best = max(best, run)
        if best >= h // 10:
            axis = x
            break
    assert axis is not None, "no y axis found"
    # The tick labels sit right-aligned just left of the axis (past its
    # tick marks); the axis' name is further left.
    band = range(max(0, axis - axis // 3), max(0, axis - max(4, axis // 20)))
    runs, start = [], None
    for y in range(h):
        on = any(dark[y][x] for x in band)
        if on and start is None:
            start = y
        elif not on and start is not None:
            runs.append(y - start)
            start = None
    runs = [r for r in runs if r >= 3]
    runs.sort()
    med = runs[len(runs) // 2] if runs else 0
    print(f"{sys.argv[1]}: {w}x{h}, y axis at x={axis}, {len(runs)} tick labels, "
          f"their height median {med} px ({100.0 * med / h:.1f}% of the image's height), "
          f"range {runs[0] if runs else 0}-{runs[-1] if runs else 0} px")


main()
