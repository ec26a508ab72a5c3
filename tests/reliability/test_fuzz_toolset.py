"""Bad input through the toolset: a real pydantic-ai agent calls the five tools with arguments drawn from each tool's
JSON schema, and with junk (wrong types, unknown keys, any JSON value, text that is not JSON).

Every call ends as a result, a clear failure (`ToolFailed`) or a prompt to fix the call (`ModelRetry` or a
validation retry): never an exception out of the agent run, never a hang, never a traceback in what the model reads.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import anyio.from_thread
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pydantic_ai_perplexity import PerplexityToolset
from pydantic_ai_perplexity.emulator import Emulator
from support.reliability import arguments_from_schema, call_tools, json_values, outcome_of, record, text_of_part

# Hundreds of fuzzed calls, then a check of what they left (the last test reads what the others did).
pytestmark = pytest.mark.slow

EXAMPLES = 200
FUZZ = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None)


class Harness:
    def __init__(self, portal: anyio.from_thread.BlockingPortal, toolset: PerplexityToolset) -> None:
        self.portal = portal
        self.toolset = toolset
        self.schemas: dict[str, dict[str, Any]] = portal.call(tool_schemas, toolset)
        self.outcomes: Counter[str] = Counter()
        self.failed: list[str] = []

    def call(self, name: str, args: Any) -> str:
        async def bounded() -> Any:
            with anyio.fail_after(30):  # a call that hangs is a failure, not a slow test
                return await call_tools(self.toolset, [(name, args)])

        [part] = self.portal.call(bounded)
        outcome, text = outcome_of(part), text_of_part(part)
        assert outcome in ('success', 'failed', 'retry'), (name, args, outcome)
        assert 'Traceback' not in text and text.strip(), (name, args, text)
        self.outcomes[outcome] += 1
        if outcome == 'failed':
            self.failed.append(f'{name}({args!r}): {text}'[:400])
        return outcome


async def tool_schemas(toolset: PerplexityToolset) -> dict[str, dict[str, Any]]:
    """Each tool's parameters as the model sees them."""
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    seen: dict[str, dict[str, Any]] = {}

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.update({t.name: t.parameters_json_schema for t in info.function_tools})
        return ModelResponse(parts=[TextPart('ok')])

    await Agent(FunctionModel(respond), toolsets=[toolset]).run('list your tools')
    return seen


@pytest.fixture(scope='module')
def harness(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Harness]:
    state = tmp_path_factory.mktemp('fuzz-toolset')
    with Emulator(time_scale=0) as emu, anyio.from_thread.start_blocking_portal() as portal:
        toolset = PerplexityToolset(
            api_key=emu.api_key, base_url=emu.base_url, ledger=state / 'ledger.sqlite3', wait_seconds=10
        )
        portal.call(toolset.__aenter__)  # one HTTP client for every example
        try:
            yield Harness(portal, toolset)
        finally:
            portal.call(toolset.__aexit__, None, None, None)


def test_the_five_tools_are_fuzzed(harness: Harness) -> None:
    assert sorted(harness.schemas) == [
        'perplexity_research',
        'perplexity_research_cancel',
        'perplexity_research_list',
        'perplexity_research_result',
        'perplexity_search',
    ]


@FUZZ
@given(data=st.data())
def test_arguments_from_each_tools_schema(harness: Harness, data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(sorted(harness.schemas)), label='tool')
    args = data.draw(arguments_from_schema(harness.schemas[name]), label='arguments')
    harness.call(name, args)


def junk_arguments(names: list[str]) -> Any:
    """Wrong types for the real parameters, unknown keys, any JSON value, or text that is not JSON at all."""
    wrong = st.dictionaries(st.sampled_from(names) | st.text(max_size=12), json_values(), max_size=6)
    # A model's arguments arrive as an object or as raw text: any other JSON value comes as its text.
    other = json_values().map(lambda v: v if isinstance(v, dict) else json.dumps(v))
    return st.one_of(wrong, other, st.text(max_size=80), st.binary(max_size=40).map(lambda b: b.decode('latin-1')))


@FUZZ
@given(data=st.data())
def test_junk_arguments(harness: Harness, data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(sorted(harness.schemas)), label='tool')
    names = list(harness.schemas[name].get('properties', {}))
    harness.call(name, data.draw(junk_arguments(names), label='arguments'))


def test_zz_record_and_still_serving(harness: Harness, tmp_path: Path) -> None:
    """After the fuzzing, the toolset still researches; records how many calls were fuzzed and how they ended."""
    fuzzed = dict(harness.outcomes)
    print('failed calls:', *harness.failed, sep='\n  ')
    assert harness.call('perplexity_research', {'query': 'What does the EU AI Act regulate?'}) == 'success'
    assert sum(fuzzed.values()) >= 2 * EXAMPLES * 0.9, fuzzed
    record(
        'fuzz', 'toolset', 'tool arguments: from each schema, and junk', inputs=sum(fuzzed.values()),
        outcomes=fuzzed, crashes=0, still_serving=True,
    )  # fmt: skip


#: Ids a model (or a page that injected it) might pass to steer a request: dot segments, separators, escapes.
STEERING_IDS = ['.', '..', '../models', '../../search', '..%2f..%2fsearch', '%2e%2e', '?stream=true', '#x', '/', '\\..']


@pytest.mark.anyio
async def test_a_response_id_cannot_steer_a_request_to_another_path(tmp_path: Path) -> None:
    """Collecting or cancelling by id only reaches `/v1/agent/<that id>`: never another endpoint, never a create."""
    with Emulator(time_scale=0) as emu:
        toolset = PerplexityToolset(api_key=emu.api_key, base_url=emu.base_url, ledger=tmp_path / 'l.sqlite3')
        calls = [(tool, {'response_id': rid}) for rid in STEERING_IDS
                 for tool in ('perplexity_research_result', 'perplexity_research_cancel')]  # fmt: skip
        parts = await call_tools(toolset, calls)
        seen = list(emu.requests)
    for (_, args), part in zip(calls, parts, strict=True):
        # No such run: a prompt to check the id. (The emulator redirects a lone "/", seen as `//`: a clear failure.)
        expected = ('retry', 'failed') if args['response_id'] == '/' else ('retry',)
        assert outcome_of(part) in expected, (args, text_of_part(part))
    for request in seen:
        # As the server received it: one segment after /v1/agent/ (percent-escapes decoded), optionally /cancel.
        rest = request.path.removeprefix('/v1/agent/')
        assert request.path.startswith('/v1/agent/') and rest, request
        assert request.method == 'GET' or (request.method == 'POST' and rest.endswith('/cancel')), request
    record('fuzz', 'toolset', 'response ids that try to steer the request (dot segments, separators)',
           inputs=len(calls), outcomes=dict(Counter(outcome_of(p) for p in parts)), crashes=0,
           still_serving=True)  # fmt: skip
