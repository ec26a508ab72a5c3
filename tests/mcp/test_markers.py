"""Over MCP, a model reads an answer's citation markers renumbered to the sources listed under it, grouped ones too."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pydantic_ai_perplexity.emulator import Emulator
from support.mcp_servers import RawServer, server_env
from support.recordings import EFFORT, QUESTION, RENUMBERED_LINE, grouped_marker_recordings


@pytest.fixture
def replaying(tmp_path: Path) -> Iterator[RawServer]:
    """A server whose upstream replays a run that cites with grouped markers (`[11, 12]`, `[web:12, web:14]`)."""
    with Emulator(replay=grouped_marker_recordings(tmp_path / 'recordings'), time_scale=0.005) as emu:
        process = RawServer(server_env(emu, tmp_path / 'state'))
        process.initialize()
        yield process
        process.kill()


def test_grouped_markers_are_renumbered_in_the_text_and_the_structured_answer(replaying: RawServer) -> None:
    result = replaying.call('perplexity_research', {'query': QUESTION, 'effort': EFFORT}, progress='p-g')
    structured = result['structuredContent']
    assert structured['status'] == 'completed'
    assert [s['n'] for s in structured['sources'] if s['cited']] == [1, 2, 4]
    [block] = result['content']
    for text in (block['text'], structured['answer']):
        assert RENUMBERED_LINE in text  # not [11, 12] under a source list numbered [1] to [4]
        assert '[11' not in text and '[web:' not in text


def test_each_progress_notification_names_the_run(replaying: RawServer) -> None:
    result = replaying.call('perplexity_research', {'query': QUESTION, 'effort': EFFORT}, progress='p-id')
    response_id = result['structuredContent']['response_id']
    notes = [m['params'] for m in replaying._seen if m.get('method') == 'notifications/progress']  # pyright: ignore[reportPrivateUsage]
    mine = [n['message'] for n in notes if n['progressToken'] == 'p-id']
    assert mine[0] == f'started research run {response_id}'
    assert [m.split(' (')[0] for m in mine[1:]] == [
        'searching: What is the EU AI Act?',
        'found 4 results',
        'writing the answer',
    ]
    assert all(m.endswith(f' · {response_id}') for m in mine[1:])  # each step says which run it reports
