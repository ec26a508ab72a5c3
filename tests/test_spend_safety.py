"""Nothing lost, nothing phantom: a create the API answered is in the ledger with its id whatever cancels the caller,
and input that cannot be sent is refused before anything is reserved.

Through the ways in where each case was found: the Python API (asyncio and anyio cancellation, timeouts), a toolset
in a real pydantic-ai Agent, and the CLI in a subprocess interrupted with SIGINT; on SQLite and PostgreSQL.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from pydantic_ai_perplexity import InvalidArgumentError, PerplexityToolset, Researcher
from pydantic_ai_perplexity._ledger import RESERVED, Ledger, RunRecord
from pydantic_ai_perplexity.emulator import Emulator

pytestmark = pytest.mark.anyio

CREATE_PATHS = ('/v1/agent', '/v1/responses')
#: Each create is answered this many real seconds late, so the caller can be cancelled while it is in flight.
SLOW = '[[emulate: slow=1]]'


@pytest.fixture
def target(ledger_target: str) -> str:
    """The ledger of the test, on each engine (`ledger_target`)."""
    return ledger_target


def creates(emu: Emulator) -> int:
    return sum(1 for r in emu.requests if r.method == 'POST' and r.path in CREATE_PATHS and r.status == 200)


def rows(target: str) -> list[RunRecord]:
    with Ledger(target) as ledger:
        return ledger.list(limit=100)


class Sent:
    """Set once `count` create requests have gone out on the wire (an httpx event hook)."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.seen = 0
        self.event = anyio.Event()

    async def __call__(self, request: httpx2.Request) -> None:
        if request.method == 'POST' and request.url.path in CREATE_PATHS:
            self.seen += 1
            if self.seen >= self.count:
                self.event.set()


async def cancel_during_create(researcher: Researcher, sent: Sent, how: str, questions: list[str]) -> list[Any]:
    """Research `questions` at once and cancel every call, `how`, while their creates are in flight."""
    if how == 'task.cancel':
        tasks = [asyncio.ensure_future(researcher.run(q)) for q in questions]
        await sent.event.wait()
        for task in tasks:
            task.cancel()
        return await asyncio.gather(*tasks, return_exceptions=True)
    if how == 'asyncio.wait_for':

        async def one(q: str) -> Any:
            return await asyncio.wait_for(researcher.run(q), timeout=0.3)  # the create takes a second

        return await asyncio.gather(*(one(q) for q in questions), return_exceptions=True)
    assert how == 'anyio.move_on_after'
    outcomes: list[Any] = []
    async with anyio.create_task_group() as tg:
        for q in questions:

            async def one(q: str = q) -> None:
                with anyio.move_on_after(0.3) as scope:
                    outcomes.append(await researcher.run(q))
                if scope.cancelled_caught:
                    outcomes.append(asyncio.CancelledError())

            tg.start_soon(one)
    return outcomes


@pytest.mark.slow
@pytest.mark.parametrize('budget', [None, 20.0])
@pytest.mark.parametrize('how', ['task.cancel', 'asyncio.wait_for', 'anyio.move_on_after'])
async def test_a_create_the_api_answered_is_in_the_ledger_with_its_id_whatever_cancels_the_caller(
    target: str, how: str, budget: float | None
) -> None:
    """Before: of 12 creates cancelled in flight, none was bound to its id (12 reserved rows, or none at all)."""
    questions = [f'What is solar power? ({i}) {SLOW}' for i in range(4)]
    sent = Sent(len(questions))
    with Emulator(time_scale=0.01) as emu:
        async with (
            httpx2.AsyncClient(event_hooks={'request': [sent]}) as http,
            Researcher(
                api_key=emu.api_key,
                base_url=emu.base_url,
                ledger=target,
                budget_usd=budget,
                effort='fast',
                http_client=http,
            ) as researcher,
        ):
            outcomes = await cancel_during_create(researcher, sent, how, questions)
            await researcher.flush()
        made = creates(emu)
    assert all(isinstance(o, (asyncio.CancelledError, TimeoutError)) for o in outcomes), outcomes
    recorded = rows(target)
    assert made == len(questions)
    assert sorted(r.status for r in recorded) == ['queued'] * len(questions)  # bound, none left reserved
    assert all(r.response_id.startswith('resp_') for r in recorded)


@pytest.mark.parametrize('argument', ['query', 'instructions'])
async def test_a_lone_surrogate_is_refused_before_any_reservation(emulator: Emulator, target: str, argument: str):
    """Before: a UnicodeEncodeError escaped after a $17.55 `high` reservation, which then stayed held for ever."""
    async with Researcher(
        api_key=emulator.api_key, base_url=emulator.base_url, ledger=target, budget_usd=50, effort='high'
    ) as researcher:
        given = {'instructions': 'Be brief \udcff.'} if argument == 'instructions' else {}
        query = 'What is solar \ud800 power?' if argument == 'query' else 'What is solar power?'
        with pytest.raises(InvalidArgumentError, match='lone surrogate') as caught:
            await researcher.run(query, **given)
        await researcher.flush()
    assert caught.value.argument == argument
    assert rows(target) == []
    assert creates(emulator) == 0


def _returns(messages: list[ModelMessage]) -> list[ToolReturnPart]:
    return [p for m in messages if isinstance(m, ModelRequest) for p in m.parts if isinstance(p, ToolReturnPart)]


async def test_a_models_query_with_a_lone_surrogate_is_a_retry_prompt_and_reserves_nothing(
    emulator: Emulator, target: str
):
    calls = [  # the arguments as the model's JSON: a lone surrogate escaped, as a model can write it
        [ToolCallPart('perplexity_research', '{"query": "Heat pumps \\udcff in cold climates"}')],
        [ToolCallPart('perplexity_research', {'query': 'Heat pumps in cold climates'})],
        'done',
    ]

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        step = calls[min(sum(isinstance(m, ModelResponse) for m in messages), len(calls) - 1)]
        return ModelResponse(parts=[TextPart(step)] if isinstance(step, str) else list(step))

    toolset = PerplexityToolset(
        api_key=emulator.api_key, base_url=emulator.base_url, ledger=target, budget_usd=50, effort='high'
    )
    result = await Agent(FunctionModel(respond), toolsets=[toolset]).run('go')
    first, second = _returns(result.all_messages())
    assert first.outcome == 'retried' and 'lone surrogate' in str(first.content), first.content
    assert second.outcome == 'success'
    recorded = rows(target)
    assert len(recorded) == 1 and recorded[0].status != RESERVED and recorded[0].response_id.startswith('resp_')
    assert creates(emulator) == 1


async def test_an_agent_run_cancelled_while_its_tool_creates_the_run_leaves_it_bound(target: str) -> None:
    """A toolset in a real pydantic-ai Agent, the agent's run given up (`asyncio.wait_for`) during the create."""
    sent = Sent(1)
    calls = [[ToolCallPart('perplexity_research', {'query': f'Heat pumps in cold climates {SLOW}'})], 'done']

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        step = calls[min(sum(isinstance(m, ModelResponse) for m in messages), len(calls) - 1)]
        return ModelResponse(parts=[TextPart(step)] if isinstance(step, str) else list(step))

    with Emulator(time_scale=0.01) as emu:
        async with httpx2.AsyncClient(event_hooks={'request': [sent]}) as http:
            toolset = PerplexityToolset(
                api_key=emu.api_key, base_url=emu.base_url, ledger=target, effort='fast', http_client=http
            )
            agent = Agent(FunctionModel(respond), toolsets=[toolset])
            task = asyncio.ensure_future(agent.run('go'))
            await sent.event.wait()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            await toolset.researcher.flush()
        made = creates(emu)
    recorded = rows(target)
    assert made == 1
    assert [r.status for r in recorded] == ['queued'] and recorded[0].response_id.startswith('resp_')


def _poll_ledger(target: str, process: subprocess.Popen[bytes], found: Callable[[RunRecord], bool]) -> None:
    """Wait (polling the ledger, with a deadline) until a row is `found`, failing if the command ends first."""
    from support.cli import TIMEOUT

    deadline = time.monotonic() + TIMEOUT
    while not any(found(r) for r in rows(target)):
        assert time.monotonic() < deadline and process.poll() is None, 'no such row before the deadline'
        time.sleep(0.02)


@pytest.mark.compat  # signals or kills a process
def test_ctrl_c_while_the_cli_creates_the_run_leaves_it_in_the_ledger_with_its_id(tmp_path: Path, target: str) -> None:
    from support.cli import COMMAND, TIMEOUT, cli_env

    with Emulator(time_scale=0.01) as emu:
        env = cli_env(tmp_path, PERPLEXITY_API_KEY=emu.api_key, PERPLEXITY_BASE_URL=emu.base_url)
        env['PERPLEXITY_LEDGER_URL'] = target
        args = [*COMMAND, 'research', f'What is solar power? {SLOW}', '--effort', 'fast']
        with subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as process:
            _poll_ledger(target, process, lambda r: r.status == RESERVED)
            process.send_signal(signal.SIGINT)  # the create is in flight: answered a second late
            _, stderr = process.communicate(timeout=TIMEOUT)
        made = creates(emu)
    assert process.returncode == 130, stderr
    recorded = rows(target)
    assert made == 1
    assert len(recorded) == 1 and recorded[0].response_id.startswith('resp_'), recorded
    assert f'Run {recorded[0].response_id} goes on server-side' in stderr.decode()  # the notice names the run


# --- emulated runs never block anything -------------------------------------------------------------------------


@pytest.mark.slow
def test_an_offline_run_abandoned_with_no_wait_costs_nothing_and_the_next_one_is_admitted(
    tmp_path: Path, target: str
) -> None:
    """Before: an `xhigh` run left by `--no-wait` on the built-in emulator held $49.58 of fake spend for ever, and the
    next offline run under a $50 cap was refused as already spent."""
    from support.cli import COMMAND, TIMEOUT, cli_env

    env = cli_env(tmp_path, PERPLEXITY_BUDGET_USD='50', PERPLEXITY_LEDGER_URL=target)
    left = subprocess.run(
        [*COMMAND, 'research', 'What is solar power?', '--effort', 'xhigh', '--no-wait'],
        env=env, capture_output=True, text=True, timeout=TIMEOUT,
    )  # fmt: skip
    assert left.returncode == 0, left.stderr
    response_id = left.stdout.strip()
    with Ledger(target) as ledger:
        record = ledger.get(response_id)
        assert record is not None and record.emulated
        assert (record.status, record.cost_usd) == ('cancelled', 0.0)
        assert ledger.spent_usd() == 0.0
    again = subprocess.run(
        [*COMMAND, 'research', 'How do heat pumps work?', '--effort', 'xhigh', '--json'],
        env=env, capture_output=True, text=True, timeout=TIMEOUT,
    )  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert 'Budget exceeded' not in again.stderr


@pytest.mark.compat  # signals or kills a process
def test_ctrl_c_on_an_offline_run_ends_it_at_no_cost(tmp_path: Path, target: str) -> None:
    from support.cli import COMMAND, TIMEOUT, cli_env

    env = cli_env(
        tmp_path, PERPLEXITY_BUDGET_USD='50', PERPLEXITY_EMULATOR_TIME_SCALE='0.5', PERPLEXITY_LEDGER_URL=target
    )
    args = [*COMMAND, 'research', 'What is solar power?', '--effort', 'xhigh']
    with subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as process:
        _poll_ledger(target, process, lambda r: r.response_id.startswith('resp_'))
        process.send_signal(signal.SIGINT)  # the run goes on (an xhigh run lasts minutes at this scale)
        _, stderr = process.communicate(timeout=TIMEOUT)
    assert process.returncode == 130, stderr
    (record,) = rows(target)
    assert (record.status, record.cost_usd, record.emulated) == ('cancelled', 0.0, True), record
    with Ledger(target) as book:
        assert book.spent_usd() == 0.0


async def test_jobs_reconcile_ends_the_runs_of_an_emulator_that_is_gone_at_no_cost(target: str) -> None:
    """Rows an older version left from a built-in emulator: `reconcile` (hence `jobs reconcile`) clears them."""
    from pydantic_ai_perplexity._core.reconcile import reconcile
    from pydantic_ai_perplexity.client import PerplexityClient

    with Emulator(time_scale=0.01) as gone:
        async with Researcher(
            api_key=gone.api_key, base_url=gone.base_url, ledger=target, budget_usd=50, effort='xhigh', wait_seconds=0
        ) as researcher:
            handed = await researcher.run('What is solar power?')
    with Ledger(target) as ledger:
        held = ledger.get(handed.response_id)
        assert held is not None and held.status in ('queued', 'in_progress')
        assert ledger.spent_usd() == held.estimate_usd > 10  # an `xhigh` reservation, held as spend until it ends
        with Emulator(time_scale=0.01) as live:
            async with PerplexityClient(api_key=live.api_key, base_url=live.base_url) as client:
                updated = await reconcile(ledger, client)
        assert updated[handed.response_id].status == 'cancelled'
        assert ledger.get(handed.response_id).cost_usd == 0.0  # type: ignore[union-attr]
        assert ledger.spent_usd() == 0.0


# --- cancelled runs are settled, never held -------------------------------------------------------------------------


def _cancelled_like_the_live_capture(response_id: str) -> Any:
    """A cancelled run as the API reports it: partial output, `error.code` cancelled, `usage: null`.

    Live fact: cfdude/mcp-perplexity-pro tests/fixtures/agent_background_cancelled.json, captured 2026-10-09.
    """
    from pydantic_ai_perplexity.client._models import Response

    return Response.model_validate(
        {
            'id': response_id,
            'object': 'response',
            'status': 'cancelled',
            'model': 'medium',
            'background': True,
            'error': {'code': 'cancelled', 'message': 'cancelled', 'type': 'cancelled'},
            'incomplete_details': {'reason': 'cancelled'},
            'output': [
                {
                    'type': 'search_results',
                    'queries': ['crates.io packages downloads statistics'],
                    'results': [{'id': 1, 'title': 'The Cargo Book', 'url': 'https://doc.rust-lang.org/cargo/'}],
                }
            ],
            'usage': None,
        }
    )


async def test_a_cancelled_run_without_usage_is_charged_its_reservation_and_settled(target: str) -> None:
    """The rule (docs/ledger.md): the API bills the steps a cancelled run ran but reports `usage: null`, so the run is
    charged its reservation, the most it can have spent, and its row is settled (a cost, not an estimate held open)."""
    from datetime import UTC, datetime

    from pydantic_ai_perplexity import ResearchResult
    from pydantic_ai_perplexity._core.reconcile import CANCELLED_UNBILLED, record_finished

    with Ledger(target) as ledger:
        now = datetime.now(UTC)
        record = RunRecord(created_at=now, query='q', origin='api', effort='medium', estimate_usd=2.79, api='api.x')
        token = ledger.reserve(record, cap_usd=None)
        ledger.bind(token, 'resp_5e673b76-3ae9-4a96-abd8-46a85b8108df', status='in_progress')
        result = ResearchResult.from_response(
            _cancelled_like_the_live_capture('resp_5e673b76-3ae9-4a96-abd8-46a85b8108df')
        )
        assert result.cost_usd is None
        record_finished(ledger, result)
        settled = ledger.get('resp_5e673b76-3ae9-4a96-abd8-46a85b8108df')
        assert settled is not None
        assert (settled.status, settled.cost_usd) == ('cancelled', 2.79)
        assert CANCELLED_UNBILLED in (settled.error or '')
        assert ledger.spent_usd() == pytest.approx(2.79)


async def test_an_emulated_run_cancelled_through_the_api_costs_nothing(emulator: Emulator, target: str) -> None:
    async with Researcher(
        api_key=emulator.api_key, base_url=emulator.base_url, ledger=target, budget_usd=50, effort='high'
    ) as researcher:
        started = await researcher.start('What is solar power? [[emulate: duration=9000]]')
        cancelled = await researcher.cancel(started.response_id)
        await researcher.flush()
    assert cancelled.status == 'cancelled' and cancelled.cost_usd is None
    with Ledger(target) as ledger:
        row = ledger.get(started.response_id)
        assert row is not None and (row.status, row.cost_usd) == ('cancelled', 0.0)
        assert ledger.spent_usd() == 0.0


#: A script that starts a run on its own emulator (the create answered 30 s late) and waits, to be killed meanwhile.
KILLED_MID_CREATE = """
import asyncio, sys
from pydantic_ai_perplexity import Researcher
from pydantic_ai_perplexity.emulator import Emulator

async def main():
    with Emulator(time_scale=0.01) as emu:
        async with Researcher(api_key=emu.api_key, base_url=emu.base_url, ledger=sys.argv[1], effort='low') as r:
            await r.run('What is solar power? [[emulate: slow=30]]')

asyncio.run(main())
"""


@pytest.mark.compat  # signals or kills a process
async def test_a_row_left_by_a_process_killed_mid_create_on_its_emulator_is_ended_at_no_cost(
    tmp_path: Path, target: str
) -> None:
    """Without a budget the row is written before the create: one an emulator's run left must be marked emulated (it
    is asked first), so that it never counts as real spend, and `reconcile` ends it once that emulator is gone."""
    import sys

    from pydantic_ai_perplexity._core.reconcile import reconcile
    from pydantic_ai_perplexity.client import PerplexityClient

    script = tmp_path / 'script.py'
    script.write_text(KILLED_MID_CREATE)
    with subprocess.Popen([sys.executable, str(script), target]) as process:
        try:
            _poll_ledger(target, process, lambda r: r.status == RESERVED)
        finally:
            process.kill()
    (left,) = rows(target)
    assert left.status == RESERVED and left.emulated
    with Ledger(target) as ledger:
        assert ledger.spent_usd(emulated=False) == 0.0  # never real spend
        with Emulator(time_scale=0.01) as live:
            async with PerplexityClient(api_key=live.api_key, base_url=live.base_url) as client:
                await reconcile(ledger, client)  # as `jobs reconcile` does
        ended = ledger.get(left.response_id)
        assert ended is not None and (ended.status, ended.cost_usd) == ('cancelled', 0.0)
        assert ledger.spent_usd() == 0.0
