"""The notebook view in a real browser: headless Chromium renders an Ops' HTML display to a
PNG (skipped where Chromium is not installed)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("readme_figures",
                                              ROOT / "benchmarks" / "readme_figures.py")
figures = importlib.util.module_from_spec(spec)
spec.loader.exec_module(figures)

pytestmark = pytest.mark.skipif(figures.browser() is None, reason="Chromium is not installed")


def test_chromium_renders_the_seed_derivation(tmp_path):
    from simplegrad.cli import seed_program
    op, _, _ = seed_program(echo=False)
    path = figures.screenshot(op._repr_html_(), tmp_path / "seed.png", 700, 900)
    width, height, pixels = _png_pixels(path.read_bytes())
    assert (width, height) == (700, 900)
    # the order-1 and order-2 blocks are drawn in their fills (render.ORDER_FILLS), and text
    assert {(0xd5, 0xf2, 0xd5), (0xd6, 0xe2, 0xfb)} <= pixels and len(pixels) > 20


def _png_pixels(data: bytes) -> tuple[int, int, set]:
    """Width, height and the set of RGB colours of an 8-bit RGB or RGBA PNG (no PIL needed)."""
    import struct
    import zlib
    assert data.startswith(b"\x89PNG\r\n\x1a\n")
    pos, idat = 8, b""
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        chunk = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            width, height, depth, colour = struct.unpack(">IIBB", chunk[:10])
        elif kind == b"IDAT":
            idat += chunk
        pos += 12 + n
    assert depth == 8 and colour in (2, 6), (depth, colour)
    bpp = 3 if colour == 2 else 4
    raw, stride = zlib.decompress(idat), width * bpp
    prev, pixels = bytearray(stride), set()
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1:start + 1 + stride])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if kind == 1:
                line[i] = (line[i] + a) & 255
            elif kind == 2:
                line[i] = (line[i] + b) & 255
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) \
                    & 255
        pixels.update(tuple(line[i:i + 3]) for i in range(0, stride, bpp))
        prev = line
    return width, height, pixels
