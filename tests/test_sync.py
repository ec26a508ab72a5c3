"""Research from scripts: `research_sync` and `Researcher.run_sync` on a loop of their own (refused, in words, inside a
running one), and `use_emulator_if_no_key` from the package root, without the notebook helpers."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pydantic_ai_perplexity import Researcher, research_sync
from pydantic_ai_perplexity.emulator import Emulator


def test_research_sync_runs_a_question_to_its_end(emulator_env: Emulator) -> None:
    result = research_sync('What is the EU AI Act?', effort='fast', wait_seconds=30)
    assert result.done and result.status == 'completed' and result.answer and result.sources and result.emulated


def test_a_researcher_runs_sync_again_and_again(emulator: Emulator) -> None:
    researcher = Researcher(api_key=emulator.api_key, base_url=emulator.base_url, effort='fast')
    first = researcher.run_sync('What is the EU AI Act?')
    second = researcher.run_sync('How do heat pumps work?', recency='year')  # a new loop, the client made again
    assert first.status == second.status == 'completed' and first.response_id != second.response_id
    assert researcher.ledger is not None and {r.response_id for r in researcher.ledger.list()} == {
        first.response_id,
        second.response_id,
    }


@pytest.mark.anyio
async def test_inside_a_running_loop_the_sync_calls_say_to_await(emulator: Emulator) -> None:
    researcher = Researcher(api_key=emulator.api_key, base_url=emulator.base_url, ledger=False)
    with pytest.raises(RuntimeError, match=r'use `await research\(\.\.\.\)` there instead'):
        research_sync('What is the EU AI Act?', api_key=emulator.api_key, base_url=emulator.base_url)
    with pytest.raises(RuntimeError, match=r'use `await researcher\.run\(\.\.\.\)` there instead'):
        researcher.run_sync('What is the EU AI Act?')
    assert emulator.requests == []  # nothing was started


SCRIPT = """\
import sys
from pydantic_ai_perplexity import research_sync, use_emulator_if_no_key
from pydantic_ai_perplexity._core.batch import research_many
import anyio

use_emulator_if_no_key()
print(research_sync('What is the EU AI Act?', effort='fast').status)
results = anyio.run(lambda: research_many(['What is the EU AI Act?', 'How do heat pumps work?'], effort='low'))
print(*(r.status for r in results))
print('notebook loaded' if 'pydantic_ai_perplexity.notebook' in sys.modules else 'no notebook')
"""


def test_a_script_without_a_key_says_in_one_line_that_it_uses_the_emulator(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith('PERPLEXITY_')}
    env |= {'PERPLEXITY_STATE_DIR': str(tmp_path), 'PERPLEXITY_EMULATOR_TIME_SCALE': '0.005'}
    done = subprocess.run(
        [sys.executable, '-c', SCRIPT], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0 and done.stderr.count('Traceback') == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith('No PERPLEXITY_API_KEY set: using the built-in emulator at http://127.0.0.1:')
    assert lines[1:] == ['completed', 'completed completed', 'no notebook']
    assert 'pplx-' not in done.stdout  # the emulator's key is never printed


def test_the_notebook_module_still_offers_it() -> None:
    from pydantic_ai_perplexity import use_emulator_if_no_key
    from pydantic_ai_perplexity.notebook import use_emulator_if_no_key as from_notebook

    assert from_notebook is use_emulator_if_no_key
