"""The text of a simple PDF, for the emulator to quote an attached PDF: the literal strings its pages show.

Enough for PDFs with single-byte text (what matplotlib's `savefig('x.pdf')` and most simple writers produce):
every content stream, Flate-decoded when it is compressed, and in it the `(...)` strings of each text object (`BT`
... `ET`), one line per text object. Fonts with two-byte or custom encodings come out as nothing, and the file is
then cited by name as before. Decoding is bounded, so a small file cannot inflate without limit.
"""

from __future__ import annotations

import re
import zlib

#: The most bytes of decoded content streams read from one file.
MAX_DECODED_BYTES = 1_000_000

_STREAM = re.compile(rb'stream\r?\n(.*?)\r?\nendstream', re.DOTALL)
_TEXT_OBJECT = re.compile(rb'\bBT\b(.*?)\bET\b', re.DOTALL)
_LITERAL = re.compile(rb'\(((?:\\.|[^\\()])*)\)', re.DOTALL)
_ESCAPE = re.compile(rb'\\([0-7]{1,3}|.)', re.DOTALL)
_ESCAPES = {b'n': b'\n', b'r': b'\r', b't': b'\t', b'b': b'\b', b'f': b'\f'}


def pdf_text(data: bytes) -> str | None:
    """The text the PDF's pages show, one line per text object; None when it is no PDF or shows no such text."""
    if not data.startswith(b'%PDF-'):
        return None
    budget = MAX_DECODED_BYTES
    lines: list[str] = []
    for stream in _STREAM.finditer(data):
        content = _decoded(stream.group(1), budget)
        budget -= len(content)
        for block in _TEXT_OBJECT.finditer(content):
            text = b''.join(_unescaped(m.group(1)) for m in _LITERAL.finditer(block.group(1)))
            shown = ''.join(ch for ch in text.decode('latin-1') if ch.isprintable() or ch.isspace())
            line = ' '.join(shown.split())  # a ligature's code (not a character) is dropped
            if line:
                lines.append(line)
        if budget <= 0:
            break
    return '\n'.join(lines) or None


def _decoded(raw: bytes, limit: int) -> bytes:
    """A stream's content: inflated when it is Flate-compressed (at most `limit` bytes), else as it is."""
    try:
        return zlib.decompressobj().decompress(raw, max(limit, 0))
    except zlib.error:
        return raw[: max(limit, 0)]


def _unescaped(literal: bytes) -> bytes:
    def one(match: re.Match[bytes]) -> bytes:
        code = match.group(1)
        if code[:1].isdigit():
            return bytes([int(code, 8) & 0xFF])
        return _ESCAPES.get(code, code if code not in b'\r\n' else b'')

    return _ESCAPE.sub(one, literal)
