"""Real MCP clients over stdio: the MCP SDK's own client in both eras, pydantic-ai's `MCPToolset`, pydantic-deep."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp_types import TextContent, TextResourceContents
from pydantic_ai import Agent
from pydantic_ai.messages import ModelRequest, ToolReturnPart

from pydantic_ai_perplexity._ledger import Ledger
from pydantic_ai_perplexity.emulator import Emulator
from pydantic_ai_perplexity.mcp import perplexity_mcp_config, perplexity_mcp_toolset
from support.mcp_servers import DEADLINE, PYCACHE, SERVER, mcp_research_model, server_env

pytestmark = pytest.mark.anyio

TOOLS = {
    'perplexity_research',
    'perplexity_research_result',
    'perplexity_research_cancel',
    'perplexity_research_list',
    'perplexity_search',
}


def stdio(emu: Emulator, state_dir: Path, **extra: str) -> StdioServerParameters:
    return StdioServerParameters(command=SERVER[0], args=SERVER[1:], env=server_env(emu, state_dir, **extra))


def returns(messages: list[Any]) -> list[ToolReturnPart]:
    return [p for m in messages if isinstance(m, ModelRequest) for p in m.parts if isinstance(p, ToolReturnPart)]


@pytest.mark.slow
@pytest.mark.parametrize('mode', ['legacy', 'auto'])
async def test_the_sdk_client_researches_in_both_protocol_eras(emu: Emulator, state_dir: Path, mode: str) -> None:
    progress: list[str] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(message or '')

    with anyio.fail_after(DEADLINE):
        async with Client(stdio(emu, state_dir), mode=mode) as client:
            assert client.protocol_version == ('2025-11-25' if mode == 'legacy' else '2026-07-28')
            assert {t.name for t in (await client.list_tools()).tools} == TOOLS
            result = await client.call_tool(
                'perplexity_research',
                {'query': 'What does the EU AI Act regulate?', 'effort': 'fast'},
                progress_callback=on_progress,
            )
            skill = await client.read_resource('skill://perplexity-research/SKILL.md')
    assert not result.is_error
    assert result.structured_content is not None and result.structured_content['status'] == 'completed'
    block = result.content[0]
    assert isinstance(block, TextContent) and 'Sources:' in block.text
    assert progress and progress[0].startswith('started research run resp_')
    content = skill.contents[0]
    assert isinstance(content, TextResourceContents) and 'perplexity_research_result' in content.text


@pytest.mark.slow
async def test_cancelling_a_call_in_the_sdk_client_cancels_the_run(emu: Emulator, state_dir: Path) -> None:
    started = anyio.Event()
    run_id: list[str] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        if message and message.startswith('started research run '):
            run_id.append(message.removeprefix('started research run '))
            started.set()

    with anyio.fail_after(DEADLINE):
        async with Client(stdio(emu, state_dir), mode='legacy') as client:
            async with anyio.create_task_group() as tg:

                async def call() -> None:
                    await client.call_tool(
                        'perplexity_research',
                        {'query': 'A survey that takes long [[emulate: duration=20000]]'},
                        progress_callback=on_progress,
                    )

                tg.start_soon(call)
                await started.wait()
                tg.cancel_scope.cancel()  # the person stops the call: the client sends notifications/cancelled
            with Ledger(state_dir / 'ledger.sqlite3') as ledger:
                while (record := ledger.get(run_id[0])) is None or record.status != 'cancelled':
                    listed = await client.call_tool('perplexity_research_list', {'status': 'cancelled'})
                    assert not listed.is_error
    assert record.error and 'cancelled' in record.error


@pytest.mark.slow
async def test_pydantic_ai_agent_researches_through_the_stdio_toolset(
    emu: Emulator, state_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv('PERPLEXITY_BASE_URL', emu.base_url)
    monkeypatch.setenv('PERPLEXITY_STATE_DIR', str(state_dir))
    toolset = perplexity_mcp_toolset(api_key=emu.api_key, env={'PYTHONPYCACHEPREFIX': str(PYCACHE)})
    agent = Agent(mcp_research_model(effort='fast'), toolsets=[toolset])
    with anyio.fail_after(DEADLINE):
        async with agent:
            result = await agent.run('What does the EU AI Act regulate?')
    research = [r for r in returns(result.all_messages()) if r.tool_name == 'perplexity_research']
    assert research and isinstance(research[0].content, dict)
    structured: dict[str, Any] = research[0].content
    assert structured['status'] == 'completed' and structured['sources']
    assert '[1]' in str(result.output)


async def test_the_stdio_toolset_fails_the_agent_run_loudly_when_the_server_cannot_start() -> None:
    toolset = perplexity_mcp_toolset(command=sys.executable, args=['-c', 'raise SystemExit(3)'], init_timeout=10)
    seen: list[list[str]] = []

    def model(messages: list[Any], info: Any) -> Any:
        from pydantic_ai.messages import ModelResponse, TextPart

        seen.append([t.name for t in info.function_tools])
        return ModelResponse(parts=[TextPart('ran without research')])

    from pydantic_ai.models.function import FunctionModel

    from pydantic_ai_perplexity import ConfigurationError

    with anyio.fail_after(DEADLINE), pytest.raises(ConfigurationError) as caught:
        await Agent(FunctionModel(model), toolsets=[toolset]).run('anything')
    message = str(caught.value)
    assert 'Perplexity MCP server did not start' in message and 'optional=True' in message
    assert seen == []  # the model was never asked without its research tools


async def test_an_optional_stdio_toolset_degrades_to_no_tools_with_one_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    toolset = perplexity_mcp_toolset(
        command=sys.executable, args=['-c', 'raise SystemExit(3)'], init_timeout=10, optional=True
    )
    seen: list[list[str]] = []

    def model(messages: list[Any], info: Any) -> Any:
        from pydantic_ai.messages import ModelResponse, TextPart

        seen.append([t.name for t in info.function_tools])
        return ModelResponse(parts=[TextPart('no research tools today')])

    from pydantic_ai.models.function import FunctionModel

    agent = Agent(FunctionModel(model), toolsets=[toolset])
    with anyio.fail_after(DEADLINE), caplog.at_level('WARNING', logger='pydantic_ai_perplexity.mcp'):
        async with agent:  # entered twice (the agent, then the run): still one warning
            result = await agent.run('anything')
    assert result.output == 'no research tools today' and seen == [[]]
    warnings = [r for r in caplog.records if r.name == 'pydantic_ai_perplexity.mcp']
    assert len(warnings) == 1 and 'unavailable' in warnings[0].getMessage()


@pytest.mark.slow
async def test_pydantic_deep_registry_probe_skills_and_agent(
    emu: Emulator, state_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pydantic_deep import DeepAgentDeps, create_deep_agent
    from pydantic_deep.mcp import MCPRegistry, probe_mcp_server

    monkeypatch.setenv('PERPLEXITY_BASE_URL', emu.base_url)
    monkeypatch.setenv('PERPLEXITY_STATE_DIR', str(state_dir))
    config = perplexity_mcp_config(env={'PYTHONPYCACHEPREFIX': str(PYCACHE)})
    registry = MCPRegistry([config], resolver={'PERPLEXITY_API_KEY': emu.api_key}.get)
    assert registry.status(config) == 'ready'
    with anyio.fail_after(DEADLINE):
        probed = registry.build(config)
        probe = await probe_mcp_server(probed, timeout=DEADLINE)
        await probed.client.transport.close()  # pyright: ignore[reportAttributeAccessIssue]
    assert probe.ok, probe.error
    assert set(probe.tool_names) == TOOLS

    toolsets = registry.build_active()
    agent = create_deep_agent(
        model=mcp_research_model(effort='fast'),
        mcp_servers=toolsets,
        include_execute=False,
        include_skills=False,
        web_search=False,
        web_fetch=False,
    )
    try:
        with anyio.fail_after(DEADLINE):
            async with agent:
                result = await agent.run('What does the EU AI Act regulate?', deps=DeepAgentDeps())
                tools = await toolsets[1].get_tools(_run_context())
                skills = await toolsets[1].call_tool(
                    'perplexity_list_mcp_skills', {}, _run_context(), tools['perplexity_list_mcp_skills']
                )
    finally:
        await toolsets[0].wrapped.client.transport.close()  # pyright: ignore[reportAttributeAccessIssue]
    research = [r for r in returns(result.all_messages()) if r.tool_name == 'perplexity_research']
    assert research and research[0].content['status'] == 'completed'  # type: ignore[index]
    assert 'perplexity-research' in json.dumps(skills, default=str)


def _run_context() -> Any:
    from pydantic_ai import RunContext
    from pydantic_ai.models.test import TestModel
    from pydantic_ai.usage import RunUsage

    return RunContext(deps=None, model=TestModel(), usage=RunUsage())


@pytest.mark.slow
async def test_a_server_set_to_tighten_says_what_it_lowered_in_text_and_structured_content(
    emu: Emulator, tmp_path: Path
) -> None:
    env = {'PERPLEXITY_BUDGET_USD': '1', 'PERPLEXITY_ON_BUDGET': 'tighten'}  # medium does not fit $1 untightened
    with anyio.fail_after(DEADLINE):
        async with Client(stdio(emu, tmp_path, **env)) as client:
            result = await client.call_tool(
                'perplexity_research', {'query': 'How do heat pumps work?', 'effort': 'medium'}
            )
    assert not result.is_error and result.structured_content is not None
    before, after = result.structured_content['tightened']['max_output_tokens']
    assert before == 6144 and after < before
    block = result.content[0]
    assert isinstance(block, TextContent) and f'max_output_tokens 6,144 -> {after:,}' in block.text
