"""Files over MCP: a client sends an https URL or the content as a data: URI; a stdio server reads a local path only
inside the folder its operator sets (`PERPLEXITY_MCP_FILES_ROOT`), never outside it, and keeps serving after a
refusal."""

from __future__ import annotations

import base64
from collections.abc import Callable
from pathlib import Path

import pytest

from pydantic_ai_perplexity.emulator import Emulator
from support.mcp_servers import RawServer, server_env, text_of


def _research(server: RawServer, *files: str) -> tuple[bool, str]:
    result = server.call(
        'perplexity_research',
        {'query': 'What do the notes say about heat pumps?', 'effort': 'fast', 'files': list(files)},
    )
    return result.get('isError') is True, text_of(result)


@pytest.mark.slow
def test_a_stdio_server_reads_paths_only_inside_its_files_root(
    raw_server_factory: Callable[..., RawServer], emu: Emulator, tmp_path: Path
) -> None:
    root, outside = tmp_path / 'shared', tmp_path / 'private'
    root.mkdir()
    outside.mkdir()
    (root / 'notes.md').write_text('Field notes. The heat pumps cut emissions by forty percent.', encoding='utf-8')
    (outside / 'secret.txt').write_text('The secret heat pump plan.', encoding='utf-8')
    (root / 'link.txt').symlink_to(outside / 'secret.txt')
    server = raw_server_factory(server_env(emu, tmp_path / 'state', PERPLEXITY_MCP_FILES_ROOT=str(root)))
    server.initialize()

    failed, text = _research(server, 'notes.md')
    assert not failed and 'From the attached file notes.md: Field notes. The heat pumps cut emissions' in text
    for escape in ('../private/secret.txt', str(outside / 'secret.txt'), 'link.txt'):
        failed, text = _research(server, escape)
        assert failed and 'is outside the folder this server reads files from' in text, text
        assert 'secret heat pump plan' not in text
    failed, text = _research(server, 'missing.md')
    assert failed and 'No file' in text
    encoded = base64.b64encode(b'Inline notes: heat pumps are quiet.').decode()
    failed, text = _research(server, f'data:text/plain;base64,{encoded}')
    assert not failed and 'From the attached file file.txt: Inline notes: heat pumps are quiet.' in text
    assert server.close() == 0
    assert b'Traceback' not in b''.join(server.stderr)


@pytest.mark.slow
def test_without_a_files_root_a_path_is_refused_and_urls_still_work(
    raw_server_factory: Callable[..., RawServer], emu: Emulator, tmp_path: Path
) -> None:
    (tmp_path / 'notes.md').write_text('Private notes.', encoding='utf-8')
    server = raw_server_factory(server_env(emu, tmp_path / 'state'))
    server.initialize()
    creates = len([r for r in emu.requests if r.method == 'POST'])
    failed, text = _research(server, str(tmp_path / 'notes.md'))
    assert failed and 'is not an https URL' in text and 'PERPLEXITY_MCP_FILES_ROOT' in text
    assert 'Private notes' not in text
    failed, text = _research(server, 'https://files.example/survey.pdf')
    assert not failed and 'The attached file https://files.example/survey.pdf' in text
    assert len([r for r in emu.requests if r.method == 'POST']) == creates + 1  # the refused path sent nothing
    assert server.close() == 0
