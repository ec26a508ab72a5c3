"""A team deployment on loopback: three MCP server instances on one PostgreSQL ledger, nginx in front.

300 concurrent research calls through the balancer, runs collected through another instance than the one that
started them, named tokens (the caller on each run, spend per caller, revocation without a restart), /healthz.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import anyio
import httpx2
import pytest

from pydantic_ai_perplexity._ledger import Ledger
from pydantic_ai_perplexity.emulator import Emulator
from support.postgres import fresh_schema
from support.scale import LEGACY, MODERN, Outcome, Topology, call_tool, creates, ledger_rows, write_atomically

pytestmark = [pytest.mark.compat, pytest.mark.anyio]  # nginx in front of the instances

TOKENS = {'alice': 'tok-alice-2f9c', 'bob': 'tok-bob-77e1', 'carol': 'tok-carol-c0de'}
CALLS = 300


@dataclass
class Team:
    topology: Topology
    ledger_url: str
    tokens_file: Path


@pytest.fixture(scope='module')
def team(tmp_path_factory: pytest.TempPathFactory, nginx_binary: str, emu: Emulator) -> Iterator[Team]:
    workdir = tmp_path_factory.mktemp('team')
    tokens_file = workdir / 'tokens'
    tokens_file.write_text(''.join(f'{name}:{token}\n' for name, token in TOKENS.items()))
    with (
        fresh_schema() as url,
        Topology(
            workdir,
            base_url=emu.base_url,
            api_key=emu.api_key,
            ledger_url=url,
            nginx=nginx_binary,
            PERPLEXITY_MCP_TOKENS_FILE=str(tokens_file),
            PERPLEXITY_MCP_TOKENS='ops:tok-ops-9a41',
            PERPLEXITY_WAIT_SECONDS='3',
        ) as topology,
    ):
        yield Team(topology, url, tokens_file)


def client() -> httpx2.AsyncClient:
    limits = httpx2.Limits(max_connections=CALLS + 50, max_keepalive_connections=CALLS + 50)
    return httpx2.AsyncClient(timeout=90, limits=limits)


async def test_300_concurrent_research_calls_through_the_balancer_all_succeed(team: Team, emu: Emulator) -> None:
    before = creates(emu.requests)
    outcomes: list[Outcome] = [Outcome(status=0)] * CALLS
    callers = ['alice', 'bob', 'carol']
    async with client() as http:

        async def one(n: int) -> None:
            outcomes[n] = await call_tool(
                http,
                team.topology.url,
                'perplexity_research',
                {'query': f'How do heat pumps work in cold climates? (question {n})', 'effort': 'fast'},
                token=TOKENS[callers[n % 3]],
                era=MODERN if n % 2 else LEGACY,
                progress=f'call-{n}',
            )

        with anyio.fail_after(90):
            async with anyio.create_task_group() as tg:
                for n in range(CALLS):
                    tg.start_soon(one, n)
        failed = [o for o in outcomes if not o.ok]
        assert not failed, f'{len(failed)} of {CALLS} calls failed, e.g. {failed[:3]}'
        # A call still waiting after the wait budget hands off; the balancer sends its collection to any instance.
        handed_off = [o.structured['response_id'] for o in outcomes if o.structured['status'] != 'completed']
        for response_id in handed_off:
            args = {'response_id': response_id, 'wait_seconds': 30}
            collected = await call_tool(
                http, team.topology.url, 'perplexity_research_result', args, token=TOKENS['alice']
            )
            assert collected.ok and collected.structured['status'] == 'completed', collected
    # Exactly one run per call: nothing lost, nothing started twice.
    assert creates(emu.requests) - before == CALLS
    ids = {o.structured['response_id']: callers[n % 3] for n, o in enumerate(outcomes)}
    rows = {r['response_id']: r for r in ledger_rows(team.ledger_url) if r['response_id'] in ids}
    assert len(rows) == CALLS
    assert all(r['status'] == 'completed' and r['origin'] == 'mcp' for r in rows.values())
    assert all(rows[i]['caller'] == caller for i, caller in ids.items())
    # The balancer spread the calls over the three instances.
    assert team.topology.nginx is not None
    served = Counter(
        ports[-1] for method, _, status, ports in team.topology.nginx.access() if method == 'POST' and status == 200
    )
    assert set(served) == {i.port for i in team.topology.instances} and min(served.values()) >= CALLS // 10, served


async def test_a_run_started_through_one_instance_is_collected_and_listed_through_the_others(team: Team) -> None:
    first, second, third = team.topology.instances
    token = TOKENS['carol']
    async with client() as http:
        question = {'query': 'Survey heat pumps in Europe [[emulate: duration=450]]'}  # 4.5 s, over the 3 s wait
        started = await call_tool(http, first.url, 'perplexity_research', question, token=token)
        assert started.ok and started.structured['status'] != 'completed' and 'next' in started.structured
        response_id = started.structured['response_id']
        listed = await call_tool(http, third.url, 'perplexity_research_list', {'limit': 50}, token=token)
        assert listed.ok and response_id in listed.text
        collected = await call_tool(
            http,
            second.url,
            'perplexity_research_result',
            {'response_id': response_id, 'wait_seconds': 30},
            token=token,
        )
        assert collected.ok and collected.structured['status'] == 'completed', collected
        assert collected.structured['answer'] and collected.structured['sources']


async def test_named_tokens_attribute_runs_and_a_revoked_one_is_refused_everywhere_without_a_restart(
    team: Team,
) -> None:
    topology = team.topology
    pids = [i.proc.pid for i in topology.instances]
    urls = [topology.url, *(i.url for i in topology.instances)]
    question = {'query': 'What does the EU AI Act regulate?', 'effort': 'fast'}
    async with client() as http:
        for name, token in (('bob', TOKENS['bob']), ('ops', 'tok-ops-9a41')):
            outcome = await call_tool(http, topology.url, 'perplexity_research', question, token=token)
            assert outcome.ok, outcome
            with Ledger(team.ledger_url) as ledger:
                record = ledger.get(outcome.structured['response_id'])
            assert record is not None and record.caller == name
        assert (await call_tool(http, topology.url, 'perplexity_research_list', {}, token='tok-nobody')).status == 401
        assert (await call_tool(http, topology.url, 'perplexity_research_list', {})).status == 401

        # Revoke bob and add dave: every instance reads the file again on its next request.
        kept = {name: token for name, token in TOKENS.items() if name != 'bob'}
        write_atomically(team.tokens_file, ''.join(f'{n}:{t}\n' for n, t in {**kept, 'dave': 'tok-dave-5b'}.items()))
        for url in urls:
            assert (await call_tool(http, url, 'perplexity_research_list', {}, token=TOKENS['bob'])).status == 401
            for token in (TOKENS['alice'], 'tok-dave-5b', 'tok-ops-9a41'):
                assert (await call_tool(http, url, 'perplexity_research_list', {}, token=token)).ok
    assert [i.proc.pid for i in topology.instances] == pids and all(i.proc.poll() is None for i in topology.instances)
    # Spend per caller adds up to the whole.
    with Ledger(team.ledger_url) as ledger:
        spend = {name: ledger.spent_usd(caller=name) for name in ('alice', 'bob', 'carol', 'ops')}
        assert all(value > 0 for value in spend.values()), spend
        assert sum(spend.values()) == pytest.approx(ledger.spent_usd())


async def test_healthz_answers_through_the_balancer_and_on_each_instance(team: Team) -> None:
    urls = [team.topology.health_url, *(i.health_url for i in team.topology.instances)]
    async with client() as http:
        for url in urls:
            reply = await http.get(url)
            assert reply.status_code == 200 and reply.json() == {'status': 'ok', 'ledger': 'ok'}
