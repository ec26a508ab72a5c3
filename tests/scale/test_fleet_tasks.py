"""MCP tasks in the team topology: three instances on one PostgreSQL ledger behind nginx (`deploy/nginx.conf`).

A task is polled through nginx (so by whichever instance it picks), every instance is SIGKILLed, a new fleet starts
on the same ledger, and the task is collected through it; another caller never sees it.
"""

from __future__ import annotations

import secrets
from pathlib import Path

import anyio
import pytest
from mcp.shared.exceptions import MCPError

from pydantic_ai_perplexity.emulator import Emulator
from support.mcp_tasks import TaskHandle, Tasks, get_task, http_client
from support.postgres import fresh_schema
from support.scale import Topology, ledger_rows

pytestmark = [pytest.mark.compat, pytest.mark.anyio]  # nginx in front of the instances

ALICE, BOB = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
SLOW = 'What does the EU AI Act regulate? [[emulate: duration=500]]'  # 5 s with this directory's emulator
DEADLINE = 90.0


async def test_a_task_survives_a_killed_fleet_and_is_collected_through_a_new_one(
    tmp_path: Path, nginx_binary: str, emu: Emulator
) -> None:
    env = {'PERPLEXITY_MCP_TOKENS': f'alice:{ALICE},bob:{BOB}', 'PERPLEXITY_WAIT_SECONDS': '20'}
    common = {'base_url': emu.base_url, 'api_key': emu.api_key, 'nginx': nginx_binary}
    with fresh_schema() as url:
        with Topology(tmp_path / 'first', ledger_url=url, **common, **env) as fleet, anyio.fail_after(DEADLINE):
            async with http_client(fleet.url, ALICE, Tasks()) as client:
                handle = await client.session.call_tool(
                    'perplexity_research', {'query': SLOW, 'effort': 'fast'}, allow_claimed=True
                )
                assert isinstance(handle, TaskHandle)
                polls = [await get_task(client, handle.task_id) for _ in range(6)]  # spread over the instances
            for instance in fleet.instances:
                instance.kill()
        assert [p['status'] for p in polls] == ['working'] * 6
        with Topology(tmp_path / 'second', ledger_url=url, **common, **env) as fleet, anyio.fail_after(DEADLINE):
            async with http_client(fleet.url, ALICE, Tasks()) as client:
                while (done := await get_task(client, handle.task_id))['status'] == 'working':
                    await anyio.sleep(0.1)
            async with http_client(fleet.url, BOB, Tasks()) as client:
                with pytest.raises(MCPError) as refused:
                    await get_task(client, handle.task_id)
        rows = [r for r in ledger_rows(url) if r['response_id'] == handle.task_id]
    assert done['status'] == 'completed' and done['result']['structuredContent']['response_id'] == handle.task_id
    assert refused.value.error.code == -32602
    assert len(rows) == 1 and rows[0]['caller'] == 'alice' and rows[0]['status'] == 'completed'
