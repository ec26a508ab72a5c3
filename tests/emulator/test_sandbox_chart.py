"""The emulator's sandbox chart (`chart.png`, shared inline), its reading of simple PDFs, and how notebooks and models
are shown a shared picture.

The `share_file` item keeps the live fields (`call_id, file_id, filename, size_bytes, url, error`); only its `url`
differs: the live API gives an API path that needs the key, the emulator the picture as a `data:` URI.
"""

from __future__ import annotations

import base64
import io
import struct
import zlib
from pathlib import Path

import pytest

from pydantic_ai_perplexity import Researcher, ResearchResult
from pydantic_ai_perplexity._present.display import result_to_html, result_to_markdown
from pydantic_ai_perplexity._present.model_text import MAX_INLINE_IMAGE_CHARS, for_model, inline_image
from pydantic_ai_perplexity.client._models import parse_response
from pydantic_ai_perplexity.emulator import Emulator
from pydantic_ai_perplexity.emulator._chart import bar_chart_png
from pydantic_ai_perplexity.emulator._pdf import MAX_DECODED_BYTES, pdf_text

pytestmark = pytest.mark.anyio


def _pdf(*streams: bytes) -> bytes:
    """A PDF skeleton holding these content streams (enough for a reader of page text)."""
    body = b''.join(
        b'%d 0 obj\n<< /Length %d >>\nstream\n%s\nendstream\nendobj\n' % (i, len(s), s)
        for i, s in enumerate(streams, 1)
    )
    return b'%PDF-1.4\n' + body + b'%%EOF\n'


def _png_rows(png: bytes) -> tuple[int, int, list[bytes]]:
    """Width, height and the pixel rows of an 8-bit RGB PNG, every chunk's CRC checked."""
    assert png.startswith(b'\x89PNG\r\n\x1a\n')
    at, chunks = 8, dict[bytes, bytes]()
    while at < len(png):
        (length,) = struct.unpack('>I', png[at : at + 4])
        kind, body = png[at + 4 : at + 8], png[at + 8 : at + 8 + length]
        assert struct.unpack('>I', png[at + 8 + length : at + 12 + length])[0] == zlib.crc32(kind + body)
        chunks[kind] = body
        at += 12 + length
    width, height, depth, colour = struct.unpack('>IIBB', chunks[b'IHDR'][:10])
    assert (depth, colour) == (8, 2) and b'IEND' in chunks
    raw = zlib.decompress(chunks[b'IDAT'])
    stride = 1 + 3 * width
    return width, height, [raw[i * stride + 1 : (i + 1) * stride] for i in range(height)]


def test_the_chart_has_one_bar_per_value_as_tall_as_its_value():
    width, height, rows = _png_rows(bar_chart_png([4, 2, 1]))
    assert (width, height) == (320, 160)
    blue = bytes((0x4C, 0x78, 0xA8))

    def bar_height(x: int) -> int:
        return sum(row[3 * x : 3 * x + 3] == blue for row in rows)

    slot = (width - 24) // 3
    tall, middle, short = (bar_height(12 + i * slot + slot // 2) for i in range(3))
    assert tall > middle > short > 0
    assert abs(middle * 2 - tall) <= 1 and abs(short * 4 - tall) <= 2
    assert bar_height(5) == 0  # the margin stays white


async def test_a_run_asked_for_a_chart_shares_it_as_an_inline_png(emulator: Emulator, tmp_path: Path):
    report = _pdf(b'BT /F1 12 Tf (Battery storage grew to 12 GWh.) Tj ET', b'BT (Battery storage is cheaper.) Tj ET')
    async with Researcher(api_key=emulator.api_key, base_url=emulator.base_url, ledger=tmp_path / 'l.sqlite3') as r:
        result = await r.run(
            'Chart battery storage growth',
            effort='low',
            extra_tools=['sandbox'],
            files=[report],
        )
        plain = await r.run('How many words is this?', effort='low', extra_tools=['sandbox'])
    [run], [shared] = result.sandbox, result.files
    # The counts come from the question and the PDF's text: 'battery' and 'storage' three times each.
    assert run.stdout.startswith('chart.png: battery 3, storage 3, ') and run.exit_code == 0
    assert "plt.savefig('chart.png')" in run.code
    assert shared.filename == 'chart.png' and shared.file_id and shared.error is None
    assert shared.url and shared.url.startswith('data:image/png;base64,')
    png = base64.b64decode(shared.url.split(',', 1)[1])
    assert shared.size_bytes == len(png) and _png_rows(png)[:2] == (320, 160)
    assert '12 GWh' in result.answer  # the PDF's text is quoted under its name
    # A question that asks for no chart keeps the word count, at the live API's path.
    assert plain.files[0].filename == 'word_count.txt'
    assert plain.files[0].url == f'/v1/responses/{plain.response_id}/files/{plain.files[0].file_id}/content'


def test_the_text_of_a_simple_pdf_is_read_compressed_or_not():
    escaped = rb'BT (a \(b\) \101\102 c\\) Tj [(T) -20 (J) 5 (s)] TJ ET'
    assert pdf_text(_pdf(escaped)) == r'a (b) AB c\TJs'
    assert pdf_text(_pdf(zlib.compress(b'BT (packed text) Tj ET'))) == 'packed text'
    assert pdf_text(_pdf(b'0 0 m 10 10 l S')) is None  # no text shown
    assert pdf_text(b'not a pdf (text) Tj') is None


def test_a_pdf_that_inflates_without_limit_is_read_only_so_far():
    bomb = zlib.compress(b'BT (x) Tj ET ' + b' ' * (20 * MAX_DECODED_BYTES) + b'BT (late) Tj ET', 9)
    assert len(bomb) < MAX_DECODED_BYTES // 10
    assert pdf_text(_pdf(bomb, bomb)) == 'x'


@pytest.mark.slow
def test_matplotlib_pdfs_are_read():
    figure = pytest.importorskip('matplotlib.figure')
    page = figure.Figure(figsize=(4, 3))
    page.text(0.1, 0.5, 'Pumped hydro stayed at 30 GWh.')
    buffer = io.BytesIO()
    page.savefig(buffer, format='pdf')
    assert pdf_text(buffer.getvalue()) == 'Pumped hydro stayed at 30 GWh.'


def _shared(url: str) -> ResearchResult:
    response = parse_response(
        {
            'id': 'resp_x',
            'status': 'completed',
            'output': [
                {'type': 'share_file', 'file_id': 'file_1', 'filename': 'c<b>.png', 'size_bytes': 3, 'url': url}
            ],
        }
    )
    return ResearchResult.from_response(response)


PNG_URI = 'data:image/png;base64,' + base64.b64encode(bar_chart_png([1])).decode()


@pytest.mark.parametrize(
    'url',
    [
        'data:image/svg+xml;base64,PHN2ZyBvbmxvYWQ9YWxlcnQoMSk+',  # SVG can carry script
        'data:text/html;base64,PHNjcmlwdD4=',
        'data:image/png;base64,iVBOR" onerror="alert(1)',
        'data:image/png,rawbytes',
        'javascript:alert(1)//data:image/png;base64,AAAA',
        'data:image/png;base64,' + 'A' * MAX_INLINE_IMAGE_CHARS,
        '/v1/responses/resp_x/files/file_1/content',
    ],
)
def test_only_a_bounded_base64_picture_is_shown_inline(url: str):
    assert inline_image(url) == ''
    shown = result_to_html(_shared(url))
    assert '<img' not in shown and 'onerror=' not in shown.replace('onerror=&quot;', '')
    assert 'c&lt;b&gt;.png' in shown


def test_a_shared_picture_is_shown_to_people_and_named_to_models():
    result = _shared(PNG_URI)
    assert inline_image(PNG_URI) == PNG_URI
    shown = result_to_html(result)
    assert f'<img class="pplx-shared-image" src="{PNG_URI}" alt="c&lt;b&gt;.png"' in shown
    assert f'![c\u2039b\u203a.png]({PNG_URI})' in result_to_markdown(result)
    text = for_model(result)
    assert '- c\u2039b\u203a.png (3 bytes) — an inline picture' in text and 'base64' not in text
