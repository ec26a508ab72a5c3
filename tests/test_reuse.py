"""Reuse: the same question with the same options, asked again inside `reuse_within`, is served from the finished run
in the ledger (in another process too, on SQLite and PostgreSQL), marked `reused`, and never created or billed twice."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx2
import pytest

from pydantic_ai_perplexity import InvalidArgumentError, Ledger, Researcher
from pydantic_ai_perplexity._present.model_text import for_model, structured_for_model
from pydantic_ai_perplexity.emulator import Emulator
from support.postgres import ledger_target

QUESTION = 'What does the EU AI Act require of general-purpose AI models?'

#: One research call in a process of its own, printing what the test checks.
SCRIPT = """\
import json, sys
from pydantic_ai_perplexity import research_sync

question, api_key, base_url, ledger, effort = sys.argv[1:6]
result = research_sync(
    question, api_key=api_key, base_url=base_url, ledger=ledger, effort=effort, reuse_within=600, wait_seconds=60
)
print(json.dumps({
    'response_id': result.response_id, 'status': result.status, 'reused': result.reused, 'notes': result.notes,
    'cost_usd': result.cost_usd, 'answer': result.answer, 'sources': len(result.sources),
}))
"""


@pytest.fixture(params=['sqlite', 'postgres'])
def ledger(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with ledger_target(request.param, tmp_path) as target:
        yield target


def ask(emu: Emulator, ledger: str, effort: str = 'fast') -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith('PERPLEXITY_')}
    env['PERPLEXITY_STATE_DIR'] = os.environ['PERPLEXITY_STATE_DIR']
    done = subprocess.run(
        [sys.executable, '-c', SCRIPT, QUESTION, emu.api_key, emu.base_url, ledger, effort],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def creates(emu: Emulator) -> int:
    return sum(1 for r in emu.requests if r.method == 'POST' and r.path == '/v1/agent')


@pytest.mark.slow
def test_the_same_question_in_another_process_is_served_from_the_ledger(emulator: Emulator, ledger: str) -> None:
    first = ask(emulator, ledger)
    second = ask(emulator, ledger)
    other = ask(emulator, ledger, effort='low')  # other options: researched
    assert first['status'] == second['status'] == other['status'] == 'completed'
    assert not first['reused'] and first['notes'] == [] and first['cost_usd'] > 0
    assert second['reused'] and second['response_id'] == first['response_id'] and second['cost_usd'] == 0
    assert second['answer'] == first['answer'] and second['sources'] == first['sources']
    [note] = second['notes']
    assert (
        note.startswith('Reused: the same question with the same options was answered') and first['response_id'] in note
    )
    assert not other['reused'] and other['response_id'] != first['response_id']
    assert creates(emulator) == 2  # the reused one was never created
    book = Ledger(ledger)
    try:
        rows = book.list(limit=10)
        assert sorted(r.response_id for r in rows) == sorted([first['response_id'], other['response_id']])
        assert book.spent_usd() == pytest.approx(first['cost_usd'] + other['cost_usd'])  # billed once each
    finally:
        book.close()


def test_a_run_the_api_no_longer_keeps_is_researched_again_and_the_result_says_so(tmp_path: Path) -> None:
    ledger = str(tmp_path / 'ledger.sqlite3')
    with Emulator(time_scale=0.005, retention_seconds=0.5) as emu:
        researcher = Researcher(api_key=emu.api_key, base_url=emu.base_url, effort='fast', ledger=ledger)
        first = researcher.run_sync(QUESTION)
        deadline = time.monotonic() + 30
        headers = {'Authorization': f'Bearer {emu.api_key}'}
        while httpx2.get(f'{emu.base_url}/v1/agent/{first.response_id}', headers=headers).status_code != 404:
            assert time.monotonic() < deadline, 'the emulator kept the run past its retention'
        second = researcher.run_sync(QUESTION, reuse_within=600)
    assert second.status == 'completed' and not second.reused and second.response_id != first.response_id
    [note] = second.notes
    assert first.response_id in note and 'no longer keeps that run (expired): it was researched again' in note
    assert f'Note: {note}' in for_model(second)


def test_outside_the_window_or_without_it_a_question_is_researched(emulator: Emulator, tmp_path: Path) -> None:
    researcher = Researcher(api_key=emulator.api_key, base_url=emulator.base_url, effort='fast', reuse_within=600)
    first = researcher.run_sync(QUESTION)
    again = researcher.run_sync(QUESTION)  # the researcher's window
    fresh = researcher.run_sync(QUESTION, reuse_within=0)  # 0: never, for this call
    later = Researcher(
        api_key=emulator.api_key,
        base_url=emulator.base_url,
        effort='fast',
        reuse_within=600,
        clock=lambda: datetime.now(UTC) + timedelta(seconds=700),  # both runs are 700 s old by its clock
    ).run_sync(QUESTION)
    assert again.reused and again.response_id == first.response_id
    assert not fresh.reused and fresh.response_id != first.response_id
    assert not later.reused and later.response_id not in (first.response_id, fresh.response_id)
    structured = structured_for_model(again)
    assert structured['reused'] is True and structured['notes'] == again.notes
    assert 'Reused: the same question' in for_model(again)
    with pytest.raises(InvalidArgumentError, match='reuse_within=-1 is not a number of seconds'):
        Researcher(api_key=emulator.api_key, base_url=emulator.base_url, reuse_within=-1)
