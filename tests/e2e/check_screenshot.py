#!/usr/bin/env python3
"""Checks a headless-Chromium screenshot of the leaderboard page.

usage: check_screenshot.py PNG WIDTH HEIGHT

Exit 0 when the PNG has the requested size and shows a rendered table: dark
text, the header row's background (#f0f0f0) and the cell borders (#ccc),
spread over many text lines. Exit 1, saying why, otherwise. Standard library
only, so any python3 can run it.
"""
import struct
import sys
import zlib

# Colours the page's stylesheet (harness/src/scores/leaderboard.cpp) paints.
HEADER_BG = (0xF0, 0xF0, 0xF0)
BORDER = (0xCC, 0xCC, 0xCC)
BYTES_PER_PIXEL = {2: 3, 6: 4}  # colour types Chromium writes: RGB, RGBA


def paeth(a, b, c):
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    if pa <= pb and pa <= pc:
        return a
    return b if pb <= pc else c


def decode_png(path):
    """Returns (width, height, rows): rows of RGB tuples."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG file")
    pos, idat, header = 8, [], None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        elif kind == b"IEND":
            break
        pos += 12 + length
    if header is None:
        raise ValueError("PNG without IHDR")
    width, height, depth, colour, _, _, interlace = header
    if depth != 8 or colour not in BYTES_PER_PIXEL or interlace:
        raise ValueError(f"unsupported PNG layout (depth {depth}, colour type {colour}, interlace {interlace})")
    bpp = BYTES_PER_PIXEL[colour]
    raw = zlib.decompress(b"".join(idat))
    stride = width * bpp
    if len(raw) != height * (stride + 1):
        raise ValueError("PNG image data has the wrong length")
    prev = bytearray(stride)
    rows = []
    for y in range(height):
        start = y * (stride + 1)
        ftype, line = raw[start], bytearray(raw[start + 1:start + 1 + stride])
        if ftype == 1:
            for i in range(bpp, stride):
                line[i] = (line[i] + line[i - bpp]) & 0xFF
        elif ftype == 2:
            line = bytearray((a + b) & 0xFF for a, b in zip(line, prev))
        elif ftype == 3:
            for i in range(stride):
                left = line[i - bpp] if i >= bpp else 0
                line[i] = (line[i] + ((left + prev[i]) >> 1)) & 0xFF
        elif ftype == 4:
            for i in range(stride):
                left = line[i - bpp] if i >= bpp else 0
                upleft = prev[i - bpp] if i >= bpp else 0
                line[i] = (line[i] + paeth(left, prev[i], upleft)) & 0xFF
        elif ftype != 0:
            raise ValueError(f"bad PNG filter type {ftype} in row {y}")
        rows.append([tuple(line[i:i + 3]) for i in range(0, stride, bpp)])
        prev = line
    return width, height, rows


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    path, want_w, want_h = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    try:
        width, height, rows = decode_png(path)
    except (OSError, ValueError, zlib.error) as e:
        sys.exit(f"FAIL: {path}: {e}")
    failures = []
    if (width, height) != (want_w, want_h):
        failures.append(f"size {width}x{height}, expected {want_w}x{want_h}")
    colours, dark, header_bg, border = set(), 0, 0, 0
    dark_rows = []
    for y, row in enumerate(rows):
        row_dark = 0
        for px in row:
            colours.add(px)
            if max(px) < 100:
                row_dark += 1
            elif px == HEADER_BG:
                header_bg += 1
            elif px == BORDER:
                border += 1
        dark += row_dark
        if row_dark:
            dark_rows.append(y)
    total = max(1, width * height)
    # Thresholds sit far below what the two-model page shows (see the test)
    # and far above a blank page or one whose text or stylesheet is missing.
    if len(colours) < 16:
        failures.append(f"only {len(colours)} distinct colours: blank page?")
    if not 0.002 <= dark / total <= 0.5:
        failures.append(f"{dark} dark (text) pixels of {total}: no text, or not a page")
    if header_bg < 2000:
        failures.append(f"{header_bg} header-background (#f0f0f0) pixels: no table header row")
    if border < 1000:
        failures.append(f"{border} border (#ccc) pixels: no table cells")
    text_span = dark_rows[-1] - dark_rows[0] if dark_rows else 0
    if text_span < 200:
        failures.append(f"text spans {text_span} px vertically: the tables did not render")
    print(f"{path}: {width}x{height}, {len(colours)} colours, {dark} dark, {header_bg} header-background, "
          f"{border} border pixels, text over {text_span} px")
    for f in failures:
        print(f"FAIL: {f}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
