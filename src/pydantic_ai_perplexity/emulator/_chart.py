"""The emulator sandbox's chart: a small bar chart as a PNG, drawn with the standard library (no plotting package).

A run that offers `sandbox` and asks for a chart gets one shared file, `chart.png`, as the live API shares a file
the sandbox wrote (a `share_file` item). The live item's `url` is an API path that needs the key; the emulator
gives the picture itself as a `data:image/png;base64,` URI, so a notebook can show it without any request.
"""

from __future__ import annotations

import base64
import re
import struct
import zlib
from collections import Counter
from collections.abc import Sequence

#: Words a question asks for a chart with.
CHART_WORDS = re.compile(r'\b(chart|plot|graph|visuali[sz]e|diagram)\w*\b', re.IGNORECASE)
_STOP = frozenset(
    'a an and are as at be by chart do does for from how in is it of on or plot show the this to what which with'
    ' figures graph'.split()
)
_WIDTH, _HEIGHT, _MARGIN = 320, 160, 12
_Pixel = tuple[int, int, int]
_BAR: _Pixel = (0x4C, 0x78, 0xA8)
_AXIS: _Pixel = (0x55, 0x55, 0x55)
_WHITE: _Pixel = (0xFF, 0xFF, 0xFF)


def word_counts(texts: Sequence[str], most: int = 6) -> list[tuple[str, int]]:
    """The `most` commonest words of `texts` (longer than two letters, not function words), commonest first."""
    words = [w for text in texts for w in re.findall(r'[a-z][a-z-]{2,}', text.lower()) if w not in _STOP]
    return Counter(words).most_common(most)


def bar_chart_png(values: Sequence[int]) -> bytes:
    """A PNG of one bar per value (heights scaled to the largest) over a baseline; white background."""
    rows: list[list[_Pixel]] = [[_WHITE] * _WIDTH for _ in range(_HEIGHT)]
    top, base = _MARGIN, _HEIGHT - _MARGIN
    for x in range(_MARGIN, _WIDTH - _MARGIN):
        rows[base][x] = _AXIS
    if values:
        slot = (_WIDTH - 2 * _MARGIN) // len(values)
        highest = max(max(values), 1)
        for i, value in enumerate(values):
            left = _MARGIN + i * slot + slot // 6
            right = _MARGIN + (i + 1) * slot - slot // 6
            height = round((base - top) * max(value, 0) / highest)
            for y in range(base - height, base):
                rows[y][left:right] = [_BAR] * (right - left)
    raw = b''.join(b'\x00' + bytes(channel for pixel in row for channel in pixel) for row in rows)
    header = struct.pack('>IIBBBBB', _WIDTH, _HEIGHT, 8, 2, 0, 0, 0)  # 8-bit RGB, no interlace
    return (
        b'\x89PNG\r\n\x1a\n' + _chunk(b'IHDR', header) + _chunk(b'IDAT', zlib.compress(raw, 9)) + _chunk(b'IEND', b'')
    )


def data_uri(png: bytes) -> str:
    """`png` as a `data:image/png;base64,` URI."""
    return 'data:image/png;base64,' + base64.b64encode(png).decode('ascii')


def _chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack('>I', len(body)) + kind + body + struct.pack('>I', zlib.crc32(kind + body) & 0xFFFFFFFF)
