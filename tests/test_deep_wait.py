"""Long runs collected by pydantic-deep agents under their default `StuckLoopDetection` (which stops a tool called
three times in a row with the same arguments, or answering the same thing three times): in process, over MCP, and
through the Perplexity research subagent. Each hand-off asks for the next `poll` number, so no two collects repeat."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any, cast

import anyio
import pytest
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from pydantic_ai_perplexity import PerplexityToolset, ResearchResult, perplexity_research_subagent
from pydantic_ai_perplexity.emulator import Emulator
from pydantic_ai_perplexity.testing import scripted_research_model

pydantic_deep = pytest.importorskip('pydantic_deep')

pytestmark = pytest.mark.anyio

#: A run of 300 emulated seconds: 1.5 s at the emulator's 5 ms a second, several collects at 0.2 s a wait.
LONG = 'What does the EU AI Act require of general-purpose AI models? [[emulate: duration=300]]'
WAIT = 0.2
COLLECT = 'perplexity_research_result'


def _parts(messages: list[ModelMessage]) -> list[Any]:
    return [p for m in messages if isinstance(m, ModelRequest) for p in m.parts]


def _collect_calls(messages: list[ModelMessage]) -> list[dict[str, Any]]:
    return [
        p.args_as_dict()
        for m in messages
        if isinstance(m, ModelResponse)
        for p in m.parts
        if isinstance(p, ToolCallPart) and p.tool_name == COLLECT
    ]


def _deep_agent(model: Any, **kw: Any) -> Any:
    """A pydantic-deep agent with its defaults (stuck-loop detection on) and no web tools of its own."""
    return pydantic_deep.create_deep_agent(
        model=model, include_execute=False, include_skills=False, web_search=False, web_fetch=False, **kw
    )


def _no_loop_retries(messages: list[ModelMessage]) -> None:
    retries = [p for p in _parts(messages) if isinstance(p, RetryPromptPart)]
    assert retries == [], [r.model_response() for r in retries]


@pytest.mark.slow
async def test_a_deep_agent_collects_a_long_run_in_process(emulator: Emulator) -> None:
    toolset = PerplexityToolset(api_key=emulator.api_key, base_url=emulator.base_url, wait_seconds=WAIT)
    agent = _deep_agent(scripted_research_model(effort='medium'), toolsets=[toolset])
    with anyio.fail_after(60):
        result = await agent.run(LONG, deps=pydantic_deep.DeepAgentDeps())
    messages = result.all_messages()
    _no_loop_retries(messages)
    calls = _collect_calls(messages)
    assert len(calls) > 3, calls  # long enough that identical collects would have been stopped
    assert [c['poll'] for c in calls] == list(range(1, len(calls) + 1))
    last = [p for p in _parts(messages) if isinstance(p, ToolReturnPart) and p.tool_name == COLLECT][-1]
    research = last.metadata['research_result']  # type: ignore[index]
    assert isinstance(research, ResearchResult) and research.status == 'completed' and research.poll is None
    assert 'Sources:' in str(result.output)


@pytest.mark.slow
async def test_without_the_poll_number_the_default_detection_abandons_the_wait(emulator: Emulator) -> None:
    """The control: a model that collects with the same arguments each time has the agent run stopped."""
    from pydantic_ai.exceptions import UnexpectedModelBehavior

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        returned = [p for p in _parts(messages) if isinstance(p, ToolReturnPart)]
        if not returned:
            return ModelResponse(parts=[ToolCallPart('perplexity_research', {'query': LONG, 'effort': 'medium'})])
        research = returned[0].metadata['research_result']  # type: ignore[index]
        return ModelResponse(parts=[ToolCallPart(COLLECT, {'response_id': research.response_id})])

    toolset = PerplexityToolset(api_key=emulator.api_key, base_url=emulator.base_url, wait_seconds=WAIT)
    agent = _deep_agent(FunctionModel(respond), toolsets=[toolset])
    with anyio.fail_after(60), pytest.raises(UnexpectedModelBehavior) as info:
        await agent.run(LONG, deps=pydantic_deep.DeepAgentDeps())
    assert 'identical arguments' in str(info.value.__cause__)


@pytest.mark.slow
async def test_a_deep_agent_collects_a_long_run_over_mcp(
    emulator: Emulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pydantic_ai_perplexity.mcp import perplexity_mcp_toolset

    monkeypatch.setenv('PERPLEXITY_BASE_URL', emulator.base_url)
    monkeypatch.setenv('PERPLEXITY_STATE_DIR', str(tmp_path))
    pycache = str(Path(tempfile.gettempdir()) / 'pydantic-ai-perplexity-test-pycache')
    toolset = perplexity_mcp_toolset(api_key=emulator.api_key, wait_seconds=WAIT, env={'PYTHONPYCACHEPREFIX': pycache})
    agent = _deep_agent(scripted_research_model(effort='medium'), toolsets=[toolset])
    with anyio.fail_after(90):
        async with agent:
            result = await agent.run(LONG, deps=pydantic_deep.DeepAgentDeps())
    messages = result.all_messages()
    _no_loop_retries(messages)
    calls = _collect_calls(messages)
    assert len(calls) > 3 and [c['poll'] for c in calls] == list(range(1, len(calls) + 1)), calls
    last = [p for p in _parts(messages) if isinstance(p, ToolReturnPart) and p.tool_name == COLLECT][-1]
    assert isinstance(last.content, dict) and last.content['status'] == 'completed'  # structuredContent
    assert 'Sources:' in str(result.output)


@pytest.mark.slow
async def test_the_research_subagent_replaces_the_built_in_one_and_waits_out_a_long_run(emulator: Emulator) -> None:
    toolset = PerplexityToolset(api_key=emulator.api_key, base_url=emulator.base_url, wait_seconds=WAIT)
    researcher = scripted_research_model(effort='medium')
    assert researcher.function is not None
    script = researcher.function
    subagent_calls: list[ToolCallPart] = []

    collected: list[ResearchResult] = []

    def recorded(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        collected.extend(
            p.metadata['research_result']  # type: ignore[index]
            for p in _parts(messages[-1:])
            if isinstance(p, ToolReturnPart) and p.tool_name == COLLECT
        )
        response = cast('ModelResponse', script(messages, info))
        subagent_calls.extend(p for p in response.parts if isinstance(p, ToolCallPart))
        return response

    subagent = perplexity_research_subagent(toolset, model=FunctionModel(recorded))
    seen: dict[str, Any] = {}

    def lead(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        returned = [p for p in _parts(messages) if isinstance(p, ToolReturnPart) and p.tool_name == 'task']
        if not returned:
            seen['tools'] = {t.name for t in info.function_tools}
            args = {'description': LONG, 'subagent_type': 'research'}
            return ModelResponse(parts=[ToolCallPart('task', args)])
        seen['report'] = str(returned[0].content)
        return ModelResponse(parts=[TextPart('reported')])

    agent = _deep_agent(FunctionModel(lead), subagents=[subagent])
    with anyio.fail_after(60):
        result = await agent.run('Research this with your research subagent.', deps=pydantic_deep.DeepAgentDeps())
    assert result.output == 'reported'
    assert 'perplexity_research' not in seen['tools']  # the lead delegates; only the subagent has the tools
    report = seen['report']
    # The subagent's task text is its prompt (pydantic-deep wraps the question in sections), which the scripted model
    # researches as it is: what matters here is that the run was waited out to its end and reported.
    assert collected[-1].status == 'completed' and 'Sources:' in report, report
    polls = [c.args_as_dict().get('poll') for c in subagent_calls if c.tool_name == COLLECT]
    assert len(polls) > 3 and polls == list(range(1, len(polls) + 1)), polls
    assert 'Try a different approach' not in report and 'different strategy' not in report
