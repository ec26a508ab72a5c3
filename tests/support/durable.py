"""Helpers of the durable tests: worker processes, waiting with a deadline, reading what DBOS and the emulator saw."""

from __future__ import annotations

import base64
import json
import os
import pickle
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pydantic_ai_perplexity.durable import START_STEP
from pydantic_ai_perplexity.emulator import Emulator

WORKER = Path(__file__).with_name('durable_worker.py')
DEADLINE = 60.0
CREATE_PATHS = ('/v1/agent', '/v1/responses')


def creates(emu: Emulator) -> int:
    return sum(1 for r in emu.requests if r.method == 'POST' and r.path in CREATE_PATHS and r.status == 200)


def wait_for(what: str, check: Callable[[], Any], *, deadline: float = DEADLINE, proc: Any = None) -> Any:
    """Poll `check` until it returns something truthy; fail naming `what` at the deadline or if `proc` exits."""
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        found = check()
        if found:
            return found
        if proc is not None and proc.poll() is not None:
            pytest.fail(f'the worker exited ({proc.returncode}) before {what}:\n{log_of(proc)}')
        time.sleep(0.05)
    pytest.fail(f'timed out after {deadline} s waiting for {what}')


def worker(mode: str, directory: Path, emu: Emulator, *extra: str, env: dict[str, str] | None = None) -> Any:
    environment = {
        **os.environ,
        'PERPLEXITY_API_KEY': emu.api_key,
        'PERPLEXITY_BASE_URL': emu.base_url,
        'PERPLEXITY_STATE_DIR': str(directory / 'state'),
        **(env or {}),
    }
    environment.pop('PERPLEXITY_BUDGET_USD', None)
    log = directory / f'worker-{time.monotonic_ns()}.log'
    with log.open('w') as out:
        proc = subprocess.Popen(
            [sys.executable, str(WORKER), mode, str(directory), *extra],
            env=environment,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    proc.log = log  # type: ignore[attr-defined]
    return proc


def log_of(proc: Any) -> str:
    return proc.log.read_text()[-3000:]


def started_runs(directory: Path) -> list[str]:
    """The response ids the start steps checkpointed so far (in step order), as DBOS recorded them."""
    path = directory / 'dbos.sqlite3'
    if not path.exists():
        return []
    try:
        with sqlite3.connect(f'file:{path}?mode=ro', uri=True, timeout=5) as db:
            rows = db.execute(
                'SELECT output FROM operation_outputs WHERE function_name = ? AND output IS NOT NULL '
                'ORDER BY function_id',
                (START_STEP,),
            ).fetchall()
    except sqlite3.OperationalError:  # the schema is not there yet
        return []
    return [pickle.loads(base64.b64decode(row[0]))['response_id'] for row in rows]


def spans(directory: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for path in directory.glob('spans-*.jsonl') for line in path.read_text().splitlines()]
