"""Follow-ups: a run continues an earlier one's context (`previous_response_id`) from Python and through an agent's
tool, and falls back, said in the result and the model's text, to the earlier question as context when the API no
longer knows the earlier run."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from pydantic_ai_perplexity import BadRequestError, InvalidArgumentError, PerplexityToolset, Researcher, ResearchResult
from pydantic_ai_perplexity._core.researcher import _unknown_previous  # pyright: ignore[reportPrivateUsage]
from pydantic_ai_perplexity._core.tool_spec import RESEARCH
from pydantic_ai_perplexity.emulator import Emulator

pytestmark = pytest.mark.anyio

FIRST = 'What does the EU AI Act require of general-purpose AI models?'
SECOND = 'And when do those obligations apply?'


@asynccontextmanager
async def creates() -> AsyncIterator[tuple[httpx2.AsyncClient, list[dict[str, Any]]]]:
    """An HTTP client that keeps the body of every create request it sends."""
    bodies: list[dict[str, Any]] = []

    async def keep(request: httpx2.Request) -> None:
        if request.method == 'POST' and request.url.path.endswith('/v1/agent'):
            bodies.append(json.loads(request.content))

    async with httpx2.AsyncClient(event_hooks={'request': [keep]}) as http:
        yield http, bodies


async def test_a_follow_up_continues_the_earlier_run(emulator: Emulator) -> None:
    async with creates() as (http, bodies):
        async with Researcher(
            api_key=emulator.api_key, base_url=emulator.base_url, effort='fast', http_client=http
        ) as r:
            first = await r.run(FIRST)
            second = await first.follow_up(SECOND, researcher=r)
    assert first.done and second.done and second.status == 'completed' and second.answer
    assert second.response_id != first.response_id and second.notes == []
    assert 'previous_response_id' not in bodies[0]
    assert bodies[1]['previous_response_id'] == first.response_id and bodies[1]['input'] == SECOND


async def test_an_earlier_run_the_api_no_longer_knows_goes_along_as_context_and_the_result_says_so(
    tmp_path: Path,
) -> None:
    ledger = tmp_path / 'ledger.db'
    with Emulator(time_scale=0.005) as gone:  # the earlier run's API: stopped afterwards, its runs with it
        async with Researcher(api_key=gone.api_key, base_url=gone.base_url, effort='fast', ledger=ledger) as r:
            first = await r.run(FIRST, instructions='Answer in two sentences.')
    with Emulator(time_scale=0.005) as emu:
        async with creates() as (http, bodies):
            async with Researcher(
                api_key=emu.api_key, base_url=emu.base_url, effort='fast', ledger=ledger, http_client=http
            ) as r:
                second = await first.follow_up(SECOND, researcher=r, instructions='Cite the article numbers.')
    assert second.done and second.status == 'completed' and second.answer
    [note] = second.notes
    assert first.response_id in note and 'could not be continued' in note and 'question was given as context' in note
    assert 'its answer is no longer available' in note
    refused, sent = bodies  # the continuation the API refused, then the run with the context
    assert refused['previous_response_id'] == first.response_id
    assert 'previous_response_id' not in sent and sent['input'] == SECOND
    assert FIRST in sent['instructions'] and sent['instructions'].endswith('Cite the article numbers.')
    from pydantic_ai_perplexity._present.model_text import for_model, structured_for_model

    assert f'Note: {note}' in for_model(second)
    assert structured_for_model(second)['notes'] == [note]


async def test_a_follow_up_of_a_run_nobody_knows_is_refused_in_words(emulator: Emulator) -> None:
    unknown = 'resp_00000000-0000-4000-8000-000000000000'
    async with Researcher(api_key=emulator.api_key, base_url=emulator.base_url, effort='fast') as r:
        with pytest.raises(InvalidArgumentError) as info:
            await r.run(SECOND, previous_response_id=unknown)
        still = await r.run(FIRST)  # nothing was lost: the researcher goes on
    assert info.value.argument == 'previous_response_id' and 'ask the question in full' in str(info.value)
    assert still.done and r.ledger is not None and r.ledger.list(status='reserved') == []


def test_a_bare_400_for_the_previous_run_is_recognised_as_live_sends_it() -> None:
    # Live fact: cfdude/mcp-perplexity-pro tests/fixtures/agent_chat_bad_previous_response_400.json, captured
    # 2026-10-09: an unknown previous_response_id is a 400 `invalid_request` "invalid request" with no `param`.
    live = BadRequestError(
        'refused',
        status_code=400,
        error_type='invalid_request',
        body={'error': {'message': 'invalid request', 'type': 'invalid_request', 'code': 400}},
    )
    other = BadRequestError(
        'refused',
        status_code=400,
        error_type='invalid_request',
        body={'error': {'message': 'validation failed: max_steps must be >= 1', 'type': 'invalid_request'}},
    )
    assert _unknown_previous(live) and not _unknown_previous(other)


def test_the_tool_offers_previous_response_id_and_checks_it() -> None:
    assert 'previous_response_id' in RESEARCH.schema['properties']
    args = RESEARCH.parse({'query': 'q', 'previous_response_id': 'x' * 500})
    with pytest.raises(InvalidArgumentError) as info:  # checked as every option is, before anything is sent
        Researcher(api_key='pplx-test', ledger=False).build_request(previous_response_id=args.previous_response_id)
    assert info.value.argument == 'previous_response_id' and 'previous_response_id is 500 characters' in str(info.value)


def test_a_result_never_started_has_nothing_to_follow_up() -> None:
    never = ResearchResult(response_id='', status='failed', error='refused by the budget')
    with pytest.raises(InvalidArgumentError, match='ask the question in full'):
        never.follow_up_sync(SECOND, researcher=Researcher(api_key='pplx-test', ledger=False))


def _returns(messages: list[ModelMessage]) -> list[ToolReturnPart]:
    return [p for m in messages if isinstance(m, ModelRequest) for p in m.parts if isinstance(p, ToolReturnPart)]


async def test_an_agent_asks_a_follow_up_through_the_tool(emulator: Emulator) -> None:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        done = _returns(messages)
        if not done:
            return ModelResponse(parts=[ToolCallPart('perplexity_research', {'query': FIRST, 'effort': 'fast'})])
        if len(done) == 1:
            earlier = done[0].metadata['research_result'].response_id  # type: ignore[index]
            args = {'query': SECOND, 'effort': 'fast', 'previous_response_id': earlier}
            return ModelResponse(parts=[ToolCallPart('perplexity_research', args)])
        return ModelResponse(parts=[TextPart('done')])

    async with creates() as (http, bodies):
        toolset = PerplexityToolset(api_key=emulator.api_key, base_url=emulator.base_url, http_client=http)
        result = await Agent(FunctionModel(respond), toolsets=[toolset]).run(FIRST)
    first, second = (r.metadata['research_result'] for r in _returns(result.all_messages()))  # type: ignore[index]
    assert first.done and second.done and second.status == 'completed' and second.notes == []
    assert [b.get('previous_response_id') for b in bodies] == [None, first.response_id]
