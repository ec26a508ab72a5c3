"""A scripted model for running research agents offline: in our examples, notebooks and tests, and in yours.

`scripted_research_model()` is a pydantic-ai `FunctionModel` that behaves like a disciplined researcher: it
calls `perplexity_research` with the user's question, collects a hand-off with `perplexity_research_result`
until the run is done, and answers with what came back (or fills the agent's output type from the
`ResearchResult` in the tool's metadata). It reads the tools' results in-process (`PerplexityToolset`) and over MCP
(where pydantic-ai hands the model the structured result). Paired with the emulator it needs no key and no network.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable
from typing import Any, cast

from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel

from ._domain.results import ResearchResult
from .client._models import field_of

__all__ = ('scripted_research_model',)

# Matches a hand-off in rendered text and inside JSON (where the quotes arrive escaped, over MCP).
_HANDOFF_ID = re.compile(r'response_id=\\?"(resp_[^"\\]+)')
#: The poll number a hand-off asks the next collect to pass (each differs, so no loop detection fires on a long run).
_HANDOFF_POLL = re.compile(r'\bpoll=(\d+)')
_SPOTLIGHT = re.compile(r'<</?web-[0-9a-f]+>>')

ReportBuilder = Callable[[ResearchResult], dict[str, Any]]


def _user_prompt(messages: list[ModelMessage]) -> str:
    for message in messages:
        if isinstance(message, ModelRequest):
            for part in message.parts:
                if part.part_kind == 'user-prompt' and isinstance(part.content, str):
                    return part.content
    return ''


def _last_return(messages: list[ModelMessage]) -> ToolReturnPart | None:
    if messages and isinstance(messages[-1], ModelRequest):
        for part in reversed(messages[-1].parts):
            if isinstance(part, ToolReturnPart):
                return part
    return None


def _calls(messages: list[ModelMessage], tool: str) -> int:
    return sum(
        1
        for m in messages
        if isinstance(m, ModelResponse)
        for p in m.parts
        if isinstance(p, ToolCallPart) and p.tool_name == tool
    )


def _from_structured(
    content: dict[str, Any], messages: list[ModelMessage], collect: str, max_collects: int
) -> ModelResponse:
    """The next move from a structured (MCP) result: collect a hand-off, or answer with the cited sources."""
    if content.get('next') and content.get('response_id') and _calls(messages, collect) < max_collects:
        args: dict[str, Any] = {'response_id': content['response_id']}
        if isinstance(content.get('poll'), int):
            args['poll'] = content['poll']
        return ModelResponse(parts=[ToolCallPart(collect, args)])
    answer = _SPOTLIGHT.sub('', str(content.get('answer') or ''))
    if not answer:
        return ModelResponse(parts=[TextPart(str(content))])
    return ModelResponse(parts=[TextPart(f'{answer}\n\nSources:\n{_cited_lines(content)}')])


def _cited_lines(content: dict[str, Any]) -> str:
    """The cited sources of a structured result, one `[n] title — url` line each (markers of spotlighting removed)."""
    sources: list[Any] = content.get('sources') or []
    return '\n'.join(
        f'[{s["n"]}] {_SPOTLIGHT.sub("", str(s.get("title") or ""))} — {s["url"]}'
        for s in cast('list[dict[str, Any]]', sources)
        if s.get('cited')
    )


def scripted_research_model(
    *,
    effort: str | None = None,
    tool_prefix: str = '',
    build_output: ReportBuilder | None = None,
    max_collects: int = 20,
    collect_wait_seconds: float | None = None,
) -> FunctionModel:
    """A `FunctionModel` that researches the user's question with the Perplexity tools, then answers.

    Args:
        effort: The effort to ask for (the toolset's default when `None`).
        tool_prefix: A prefix the tools carry (e.g. when reached through a prefixed MCP toolset).
        build_output: For agents with a structured output type: the output tool's arguments from the result.
        max_collects: Give up collecting a handed-off run after this many calls.
        collect_wait_seconds: The `wait_seconds` to ask for when collecting (the tool's default when `None`).
    """
    research, collect = f'{tool_prefix}perplexity_research', f'{tool_prefix}perplexity_research_result'

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        last = _last_return(messages)
        if last is None:
            args: dict[str, Any] = {'query': _user_prompt(messages)}
            if effort:
                args['effort'] = effort
            return ModelResponse(parts=[ToolCallPart(research, args)])
        content: Any = last.content
        if isinstance(content, dict):  # over MCP, pydantic-ai gives the model the structured result
            return _from_structured(cast('dict[str, Any]', content), messages, collect, max_collects)
        text = last.model_response_str()
        handoff = _HANDOFF_ID.search(text)
        collects = _calls(messages, collect)
        if handoff and collects < max_collects:
            collect_args: dict[str, Any] = {'response_id': handoff.group(1)}
            if poll := _HANDOFF_POLL.search(text):
                collect_args['poll'] = int(poll.group(1))
            if collect_wait_seconds is not None:
                collect_args['wait_seconds'] = collect_wait_seconds
            return ModelResponse(parts=[ToolCallPart(collect, collect_args)])
        result = field_of(last.metadata, 'research_result')
        if build_output is not None and info.output_tools and isinstance(result, ResearchResult):
            return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, build_output(result))])
        if isinstance(result, ResearchResult) and result.done:
            from ._present.model_text import answer_with_source_numbers

            sources = '\n'.join(f'[{s.n}] {s.title} — {s.url}' for s in result.cited_sources)
            return ModelResponse(parts=[TextPart(f'{answer_with_source_numbers(result)}\n\nSources:\n{sources}')])
        return ModelResponse(parts=[TextPart(text)])

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str | DeltaToolCalls]:
        response = respond(messages, info)
        for index, part in enumerate(response.parts):
            if isinstance(part, TextPart):
                yield part.content
            elif isinstance(part, ToolCallPart):
                yield {index: DeltaToolCall(part.tool_name, part.args_as_json_str(), tool_call_id=part.tool_call_id)}

    return FunctionModel(respond, stream_function=stream, model_name='scripted-researcher')
