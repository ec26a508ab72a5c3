"""agents/durable_pipeline.py: the traced pipeline as a DBOS workflow, run offline as a script."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip('dbos')

SCRIPT = Path(__file__).parents[2] / 'agents' / 'durable_pipeline.py'


@pytest.mark.slow
def test_the_durable_pipeline_writes_a_cited_report_with_each_run_keyed_by_its_step(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(('PERPLEXITY_', 'LOGFIRE_', 'OTEL_'))}
    env |= {'PERPLEXITY_STATE_DIR': str(tmp_path / 'state'), 'PERPLEXITY_EMULATOR_TIME_SCALE': '0.002'}
    question = 'How do heat pumps work in cold climates?'
    checkout = tmp_path / 'checkout'  # where the script is run from: it must stay empty
    checkout.mkdir()
    done = subprocess.run(
        [sys.executable, str(SCRIPT), question], cwd=checkout, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith(f'# {question}')
    assert '## Sources' in done.stdout and '3 research runs' in done.stdout
    assert (tmp_path / 'state' / 'durable_pipeline.sqlite3').exists()  # the workflow's checkpoints, in the state dir
    assert list(checkout.iterdir()) == []  # nothing left where it was run
    with sqlite3.connect(tmp_path / 'state' / 'ledger.sqlite3') as db:
        keys = [row[0] for row in db.execute('SELECT request_id FROM runs ORDER BY request_id')]
    assert len(keys) == 3 and all(k.startswith('dbos:durable-pipeline-') for k in keys)
