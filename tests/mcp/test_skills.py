"""The skill through the MCP Skills extension (SEP-2640: `skills/list`, `skills/get`, declared in the capabilities of
both eras), and the research tools' `outputSchema`, whose `data` is typed so that strict validators accept it."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from pydantic_ai_perplexity.emulator import Emulator
from support.mcp_servers import RawServer, server_env

SKILL_URI = 'skill://perplexity-research/SKILL.md'
EXTENSION = 'io.modelcontextprotocol/skills'


@pytest.fixture(scope='module')
def server(emu: Emulator, state_dir: Path) -> Iterator[RawServer]:
    process = RawServer(server_env(emu, state_dir, PERPLEXITY_WAIT_SECONDS='20'))
    reply = process.initialize('2025-11-25')
    assert reply['result']['capabilities']['extensions'] == {EXTENSION: {}}
    yield process
    process.kill()


@pytest.mark.slow
def test_skills_list_names_the_resource_with_its_size_digest_and_frontmatter(server: RawServer) -> None:
    listed = server.request('skills/list')['result']
    assert listed['cacheScope'] == 'public' and listed['ttlMs'] > 0
    [skill] = listed['skills']
    text = server.request('resources/read', {'uri': SKILL_URI})['result']['contents'][0]['text']
    data = text.encode('utf-8')
    assert skill['uri'] == SKILL_URI
    assert skill['resources'] == [
        {'uri': SKILL_URI, 'digest': 'sha256:' + hashlib.sha256(data).hexdigest(), 'size': len(data)}
    ]
    assert skill['frontmatter']['name'] == 'perplexity-research'
    assert f'description: {skill["frontmatter"]["description"]}\n' in text.split('---')[1]
    assert server.request('skills/get', {'uri': SKILL_URI})['result']['skill'] == skill


def test_skills_get_of_an_unknown_skill_says_which_there_is(server: RawServer) -> None:
    error = server.request('skills/get', {'uri': 'skill://nope/SKILL.md'})['error']
    assert error['code'] == -32602 and SKILL_URI in error['message'] and 'nope' in error['message']
    assert server.request('ping')['result'] == {}  # and the server goes on


def test_the_data_field_has_a_real_schema_and_a_structured_answer_passes_it(server: RawServer) -> None:
    tools = {t['name']: t for t in server.request('tools/list')['result']['tools']}
    for name in ('perplexity_research', 'perplexity_research_result'):
        data = tools[name]['outputSchema']['properties']['data']
        assert data['type'] == 'object' and data['description']
    # An output the API returns for an output_type: its root is an object.
    # Live fact: cfdude/mcp-perplexity-pro tests/fixtures/agent_structured_bad_root_400.json, captured 2026-10-09
    schema: dict[str, Any] = tools['perplexity_research']['outputSchema']
    jsonschema.Draft202012Validator.check_schema(schema)
    untyped = [k for k, v in schema['properties'].items() if not {'type', 'anyOf', '$ref'} & set(v)]
    assert untyped == []  # what strict validators (the MCP Inspector's strict mode) warn about
    result = server.call('perplexity_research', {'query': 'What does the EU AI Act regulate?', 'effort': 'fast'})
    structured = result['structuredContent'] | {'data': {'summary': 'a regulation', 'year': 2024}}
    jsonschema.Draft202012Validator(schema).validate(structured)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft202012Validator(schema).validate(structured | {'data': ['not', 'an', 'object']})
