"""The lean tool list (`mcp --lean`, `PERPLEXITY_MCP_LEAN=1`, `PerplexityToolset(lean=True)`): its size, and that
scripted models reading only the lean schema still research, hand off and collect, in the toolset and over MCP."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import jsonschema
import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from pydantic_ai_perplexity import PerplexityToolset, ResearchResult
from pydantic_ai_perplexity._core.tool_spec import LEAN_TOOLS, TOOLS
from pydantic_ai_perplexity.emulator import Emulator
from pydantic_ai_perplexity.mcp import perplexity_mcp_toolset
from pydantic_ai_perplexity.testing import scripted_research_model
from support import mcp_servers
from support.mcp_servers import DEADLINE, PYCACHE, RawServer, mcp_research_model, server_env

pytestmark = pytest.mark.anyio

#: The bound on the lean `tools/list` (the `tools` array as a client serializes it); the full one is over 8,000.
LEAN_MAX_CHARS = 2500
NAMES = [spec.name for spec in TOOLS]


def listed_tools(server: RawServer) -> list[dict[str, Any]]:
    server.initialize('2025-11-25')  # the era whose list is longest (it adds `execution.taskSupport`)
    return server.request('tools/list')['result']['tools']


def size(tools: list[dict[str, Any]]) -> int:
    """The `tools` array's characters as JSON, with the spaces `json.dumps` puts (more than the compact wire)."""
    return len(json.dumps(tools, ensure_ascii=False))


@pytest.mark.slow
def test_the_lean_list_fits_the_bound_and_the_full_one_stays_the_default(
    state_dir: Path, raw_server_factory: Any
) -> None:
    full = listed_tools(raw_server_factory(server_env(None, state_dir)))
    by_flag = listed_tools(raw_server_factory(server_env(None, state_dir), ['--lean']))
    by_env = listed_tools(raw_server_factory(server_env(None, state_dir, PERPLEXITY_MCP_LEAN='1')))
    assert by_flag == by_env
    assert [t['name'] for t in by_flag] == [t['name'] for t in full] == NAMES
    assert size(by_flag) <= LEAN_MAX_CHARS < 3 * LEAN_MAX_CHARS < size(full)
    research = by_flag[0]
    assert set(research['inputSchema']['properties']) == {'query', 'effort'}
    assert research['inputSchema']['properties']['effort']['enum'] == ['fast', 'low', 'medium', 'high', 'xhigh']
    assert 'perplexity_research_result' in research['description'] and 'outputSchema' not in research
    assert 'outputSchema' in full[0] and 'recency' in full[0]['inputSchema']['properties']


@pytest.mark.slow
def test_the_cli_mcp_command_takes_lean_from_its_flag_and_the_environment(
    state_dir: Path, raw_server_factory: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(mcp_servers, 'SERVER', [sys.executable, '-m', 'pydantic_ai_perplexity.cli', 'mcp'])
    by_flag = listed_tools(raw_server_factory(server_env(None, state_dir), ['--lean']))
    by_env = listed_tools(raw_server_factory(server_env(None, state_dir, PERPLEXITY_MCP_LEAN='1')))
    full = listed_tools(raw_server_factory(server_env(None, state_dir)))
    assert by_flag == by_env and size(by_flag) <= LEAN_MAX_CHARS < size(full)


def test_a_bad_lean_setting_is_refused_in_words(state_dir: Path, raw_server_factory: Any) -> None:
    server = raw_server_factory(server_env(None, state_dir, PERPLEXITY_MCP_LEAN='maybe'))
    assert server.close() == 2
    err = b''.join(server.stderr).decode()
    assert 'PERPLEXITY_MCP_LEAN must be 1 or 0' in err and "'maybe'" in err


def schema_checked(model: FunctionModel, seen: list[str], shown: dict[str, Any]) -> FunctionModel:
    """`model`, whose every tool call must validate against the schemas the model was shown (kept in `shown`)."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        response = model.function(messages, info)  # type: ignore[misc]
        assert isinstance(response, ModelResponse)
        shown.update({tool.name: tool.parameters_json_schema for tool in info.function_tools})
        for part in response.parts:
            if isinstance(part, ToolCallPart):
                jsonschema.validate(part.args_as_dict(), shown[part.tool_name])
                seen.append(part.tool_name)
        return response

    return FunctionModel(respond, model_name='schema-checked')


def returns(messages: list[ModelMessage]) -> list[ToolReturnPart]:
    return [p for m in messages if isinstance(m, ModelRequest) for p in m.parts if isinstance(p, ToolReturnPart)]


async def test_a_scripted_agent_on_the_lean_toolset_researches_hands_off_and_collects(emulator: Emulator) -> None:
    toolset = PerplexityToolset(api_key=emulator.api_key, base_url=emulator.base_url, wait_seconds=0.05, lean=True)
    calls: list[str] = []
    shown: dict[str, Any] = {}
    model = schema_checked(scripted_research_model(effort='high', max_collects=400), calls, shown)
    result = await Agent(model, toolsets=[toolset]).run('A broad survey [[emulate: duration=200]]')
    assert shown == {spec.name: spec.schema for spec in LEAN_TOOLS}
    rets = returns(result.all_messages())
    assert calls[0] == 'perplexity_research' and calls[1:] and set(calls[1:]) == {'perplexity_research_result'}
    assert 'still going' in rets[0].content
    final = rets[-1].metadata['research_result']  # type: ignore[index]
    assert isinstance(final, ResearchResult) and final.done and final.cited_sources
    for source in final.cited_sources:
        assert source.url in result.output
    creates = [r for r in emulator.requests if r.method == 'POST' and r.path.endswith('/v1/agent')]
    assert len(creates) == 1


async def test_a_lean_call_still_checks_every_argument(emulator: Emulator) -> None:
    """An argument the lean schema leaves out is still read and checked, never silently dropped."""
    toolset = PerplexityToolset(api_key=emulator.api_key, base_url=emulator.base_url, lean=True)

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            args = {'query': 'What is the EU AI Act?', 'effort': 'fast', 'recency': 'ever'}
            return ModelResponse(parts=[ToolCallPart('perplexity_research', args)])
        return ModelResponse(parts=[TextPart('done')])

    result = await Agent(FunctionModel(respond), toolsets=[toolset]).run('go')
    [refused] = returns(result.all_messages())
    assert refused.content == "recency must be one of hour, day, week, month, year; got 'ever'."
    assert not [r for r in emulator.requests if r.method == 'POST']  # refused before anything was started


@pytest.mark.slow
async def test_a_scripted_agent_over_lean_mcp_researches_hands_off_and_collects(
    emu: Emulator, state_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv('PERPLEXITY_BASE_URL', emu.base_url)
    monkeypatch.setenv('PERPLEXITY_STATE_DIR', str(state_dir))
    env = {'PYTHONPYCACHEPREFIX': str(PYCACHE), 'PERPLEXITY_MCP_LEAN': '1'}
    toolset = perplexity_mcp_toolset(api_key=emu.api_key, env=env, wait_seconds=0.2)
    calls: list[str] = []
    shown: dict[str, Any] = {}
    model = schema_checked(mcp_research_model(effort='high', max_collects=400), calls, shown)
    agent = Agent(model, toolsets=[toolset])
    with anyio.fail_after(DEADLINE):
        async with agent:
            result = await agent.run('A broad survey [[emulate: duration=200]]')
    assert shown == {spec.name: spec.schema for spec in LEAN_TOOLS}
    rets = returns(result.all_messages())
    assert calls[0] == 'perplexity_research' and set(calls[1:]) == {'perplexity_research_result'}
    assert isinstance(rets[0].content, dict) and rets[0].content['status'] != 'completed' and 'next' in rets[0].content
    final: dict[str, Any] = rets[-1].content  # type: ignore[assignment]
    assert final['status'] == 'completed' and final['sources']
    assert '[1]' in str(result.output) and final['sources'][0]['url'] in str(result.output)
