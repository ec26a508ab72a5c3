"""Every fault the emulator can inject, through the CLI: `python -m pydantic_ai_perplexity.cli research ...`.

One process per fault, all at once against one emulator and one ledger. A result goes to stdout (`--json`), a
failure is one clear `Error:` line on stderr with exit code 1 and no traceback; every run the API started is in
the ledger; every research step is reported once on stderr; no retry starts a second billed run.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from pydantic_ai_perplexity._ledger import Ledger
from pydantic_ai_perplexity.emulator import Emulator
from support.mcp_servers import DEADLINE
from support.reliability import (
    FAULTS,
    CreateLog,
    assert_attempt_kept,
    check_outcome,
    cli_env,
    describe,
    expected_steps,
    query_for,
    record,
    start_cli,
    stream_gets,
    upstream_runs,
)

STEP_LINE = re.compile(r'^  \[\s*\d+\.\d+s\] (.*)$')


#: One fault of each kind (a process each costs a second of CPU): create retried, create failed, malformed body,
#: stream cut and resumed, retrieve failed, failed and incomplete runs, several at once.
CLI_FAULTS = tuple(
    f
    for f in FAULTS
    if f.name in ('429x2', '503x1', '500x1', 'malformed', 'drop@3', '500x2@retrieve', 'fail', 'incomplete')
    or (f.drops and f.attempts > 1)
)


@pytest.mark.slow
def test_every_kind_of_fault_through_the_cli(logged: tuple[Emulator, CreateLog], module_state: Path) -> None:
    emu, log = logged
    # Only start-up time: Logfire's pydantic plugin records nothing here (see `mcp.server._skip_idle_logfire_plugin`).
    env = cli_env(emu, module_state, PYDANTIC_DISABLE_PLUGINS='logfire-plugin')
    processes = [
        start_cli(['research', query_for(f'cli-{i}', fault), '--effort', 'fast', '--json', '--wait', '30'], env)
        for i, fault in enumerate(CLI_FAULTS)
    ]
    outputs = [p.communicate(timeout=DEADLINE) for p in processes]
    for i, (fault, process, (out, err)) in enumerate(zip(CLI_FAULTS, processes, outputs, strict=True)):
        stdout, stderr = out.decode(), err.decode()
        assert 'Traceback' not in stderr, stderr
        if fault.outcome == 'error':
            assert process.returncode == 1 and stdout == '', (fault, stdout, stderr)
            [message] = [line for line in stderr.splitlines() if line.startswith('Error: ')]
            check_outcome(fault, 'failed', 'Research failed: ' + message.removeprefix('Error: '))
        else:
            # A run that ended failed or incomplete is a result (on stdout) with exit status 1.
            assert process.returncode == (0 if fault.outcome == 'completed' else 1), (fault, stderr)
            result = json.loads(stdout)
            assert result['status'] == fault.outcome, (fault, result)
        creates, billed = log.matching(f'cli-{i}'), log.billed(f'cli-{i}')
        assert len(creates) == fault.attempts, (fault, creates)
        assert len(billed) == fault.billed, (fault, creates)  # never a second billed run
        steps = 0
        for create in billed:
            response_id = create.response_id
            assert response_id is not None and response_id in upstream_runs(emu)
            assert result['response_id'] == response_id
            with Ledger(module_state / 'ledger.sqlite3') as ledger:
                row = ledger.get(response_id)
            assert row is not None and row.origin == 'cli' and row.status == fault.outcome
            reported = [m[1] for line in stderr.splitlines() if (m := STEP_LINE.match(line))]
            assert reported == [step for step, _ in expected_steps(emu, response_id)], fault  # each step once
            steps = len(reported)
            if fault.drops:
                assert stream_gets(emu, response_id) >= 2
        if fault.outcome == 'error':
            with Ledger(module_state / 'ledger.sqlite3') as ledger:
                assert assert_attempt_kept(ledger.list(limit=500), f'cli-{i}').origin == 'cli'
        text = stdout if fault.outcome != 'error' else stderr
        record(
            'faults', 'cli', fault.name,
            outcome=describe(fault, text), attempts=len(creates), billed=len(billed), events_once=steps, lost=0,
        )  # fmt: skip
