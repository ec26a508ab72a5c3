"""A user's own corpus: `Emulator(corpus=DIR)`, `emulator --corpus DIR` and `PERPLEXITY_EMULATOR_CORPUS` search the
pages in a folder (Markdown with front matter, or JSON) instead of the built-in ones; a bad page is refused at start."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import httpx2
import pytest

from pydantic_ai_perplexity.client._models import parse_response
from pydantic_ai_perplexity.emulator import CorpusError, Emulator

WIDGET_MD = """---
url: https://docs.example.com/widgets/calibration
title: Calibrating the Frobnicator widget
date: 2026-03-01
---
The Frobnicator widget is calibrated by turning the left dial until the green lamp lights.
Calibration takes about two minutes and is needed after every firmware update.
"""
PAGES_JSON = [
    {
        'url': 'https://docs.example.com/widgets/warranty',
        'title': 'Frobnicator warranty terms',
        'text': 'The Frobnicator warranty lasts three years and covers the dial and the lamp.',
    }
]


def _folder(tmp_path: Path) -> Path:
    folder = tmp_path / 'pages'
    folder.mkdir()
    (folder / 'calibration.md').write_text(WIDGET_MD, encoding='utf-8')
    (folder / 'warranty.json').write_text(json.dumps(PAGES_JSON), encoding='utf-8')
    (folder / 'notes.txt').write_text('not a page: neither .md nor .json, so never read', encoding='utf-8')
    return folder


def _ask(emu: Emulator, question: str) -> tuple[str, list[str]]:
    headers = {'Authorization': f'Bearer {emu.api_key}'}
    with httpx2.Client(base_url=emu.base_url, headers=headers, timeout=10) as client:
        response = client.post('/v1/agent', json={'input': question, 'effort': 'fast'})
        assert response.status_code == 200, response.text
        body = response.json()
    urls = [r['url'] for item in body['output'] if item['type'] == 'search_results' for r in item['results']]
    return parse_response(body).output_text, urls


def test_an_emulator_given_a_folder_answers_from_its_pages_and_only_them(tmp_path: Path):
    with Emulator(time_scale=0.001, corpus=_folder(tmp_path)) as emu:
        text, urls = _ask(emu, 'How do I calibrate the Frobnicator widget?')
        assert urls[0] == 'https://docs.example.com/widgets/calibration'
        assert 'turning the left dial' in text and re.search(r'\[1\]', text)
        warranty, urls = _ask(emu, 'How long is the Frobnicator warranty?')
        assert urls[0] == 'https://docs.example.com/widgets/warranty' and 'three years' in warranty
        # The built-in pages are not searched: their topics find nothing here.
        nothing, urls = _ask(emu, 'What is the EU AI Act?')
        assert urls == [] and nothing.startswith('I found no sources')


@pytest.mark.parametrize(
    ('name', 'content', 'reason'),
    [
        ('bad.md', 'no front matter here', 'starts with front matter'),
        ('bad.md', '---\ntitle: A page\n---\ntext', '"url" is missing or empty'),
        ('bad.md', '---\nurl: ftp://x.example/a\ntitle: A\n---\ntext', 'is not an http(s) URL'),
        ('bad.json', '{"url": "https://a.example/", "title": "A"}', '"text" is missing or empty'),
        (
            'bad.json',
            '{"url": "https://a.example/", "title": "A", "text": "t", "author": "x"}',
            "unknown field 'author'",
        ),
        ('bad.json', '[1, 2]', 'a page is an object'),
        ('bad.json', '{not json', 'is not valid JSON'),
        ('bad.md', '---\nurl: https://a.example/\ntitle: A\ndate: yesterday\n---\ntext', 'is not a date'),
    ],
)
def test_a_bad_page_is_refused_at_start_with_its_name_and_why(tmp_path: Path, name: str, content: str, reason: str):
    folder = _folder(tmp_path)
    (folder / name).write_text(content, encoding='utf-8')
    with pytest.raises(CorpusError, match=re.escape(reason)) as refused:
        Emulator(corpus=folder)
    assert str(refused.value).startswith(name)


def test_only_regular_files_inside_the_folder_of_bounded_size_are_read(tmp_path: Path):
    folder = _folder(tmp_path)
    outside = tmp_path / 'secret.md'
    outside.write_text(WIDGET_MD.replace('calibration', 'secret'), encoding='utf-8')
    (folder / 'link.md').symlink_to(outside)
    with pytest.raises(CorpusError, match=r'^link\.md: is a symbolic link'):
        Emulator(corpus=folder)
    (folder / 'link.md').unlink()
    os.mkfifo(folder / 'pipe.json')
    with pytest.raises(CorpusError, match=r'^pipe\.json: is a FIFO, socket or device, not a regular file'):
        Emulator(corpus=folder)
    (folder / 'pipe.json').unlink()
    (folder / 'huge.md').write_bytes(b'x' * (1024 * 1024 + 1))
    with pytest.raises(CorpusError, match=r'^huge\.md: \d+ bytes, over the 1048576-byte limit'):
        Emulator(corpus=folder)
    (folder / 'huge.md').unlink()
    with pytest.raises(CorpusError, match='does not exist'):
        Emulator(corpus=tmp_path / 'missing')
    empty = tmp_path / 'empty'
    empty.mkdir()
    with pytest.raises(CorpusError, match='holds no page'):
        Emulator(corpus=empty)


@pytest.mark.slow
def test_the_variable_gives_every_emulator_the_folder_and_the_command_refuses_a_bad_one(tmp_path: Path):
    folder = _folder(tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith(('PERPLEXITY_', 'OTEL_', 'LOGFIRE_'))}
    env |= {'PERPLEXITY_STATE_DIR': str(tmp_path / 'state'), 'PERPLEXITY_EMULATOR_TIME_SCALE': '0.005'}
    cli = [sys.executable, '-m', 'pydantic_ai_perplexity.cli']
    done = subprocess.run(
        [*cli, 'research', 'How do I calibrate the Frobnicator widget?', '--effort', 'fast'],
        capture_output=True,
        text=True,
        env=env | {'PERPLEXITY_EMULATOR_CORPUS': str(folder)},
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert '    https://docs.example.com/widgets/calibration' in done.stdout.splitlines()
    (folder / 'bad.md').write_text('no front matter', encoding='utf-8')
    refused = subprocess.run(
        [*cli, 'emulator', '--corpus', str(folder), '--port', '0'], capture_output=True, text=True, env=env, timeout=60
    )
    assert refused.returncode == 2 and 'Error: bad.md: a Markdown page starts with front matter' in refused.stderr


def test_the_built_in_pages_are_a_corpus_folder_in_the_same_format() -> None:
    """The built-in corpus is data shipped in the package (`emulator/corpus/*.md`), read by the code that reads a
    user's folder, in name order: a copy of it is a starting point for one's own pages."""
    from pydantic_ai_perplexity.emulator._corpus import BUILTIN_CORPUS_FOLDER, CORPUS, DEFAULT_CORPUS, load_corpus

    files = sorted(BUILTIN_CORPUS_FOLDER.glob('*.md'))
    assert len(files) == len(CORPUS) >= 30
    assert DEFAULT_CORPUS.docs is CORPUS
    assert load_corpus(BUILTIN_CORPUS_FOLDER).docs == CORPUS
    first = files[0].read_text(encoding='utf-8')
    assert first.startswith(f'---\nurl: {CORPUS[0].url}\ntitle: {CORPUS[0].title}\n')
    assert len({doc.url for doc in CORPUS}) == len(CORPUS)
