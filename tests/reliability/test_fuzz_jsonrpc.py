"""Bad input on the MCP wire: raw JSON-RPC lines to the stdio server and raw bodies to the HTTP server.

Lines that are not JSON, JSON that is not JSON-RPC, wrong types, unknown methods, huge and odd ids, deep nesting,
`params` that is not an object, huge and non-finite numbers, lone surrogates (escaped and raw), control and escape
sequences, long ids, and well-formed `tools/call`s whose arguments come from each tool's `inputSchema` or are junk;
over stdio and HTTP, in both protocol eras. The oracle: every request whose id can be read is answered exactly once
with that id (a line that cannot be read as a request gets at most one answer, with id null; notifications none),
stdout never carries anything but JSON-RPC, nothing puts a traceback on stderr, the process never dies, and it still
serves a normal `tools/list` and `tools/call` afterwards.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from pydantic_ai_perplexity.emulator import Emulator
from pydantic_ai_perplexity.mcp.server._jsonrpc import shallow
from support.mcp_servers import DEADLINE, MCP_HEADERS, HttpServer, RawServer, server_env, text_of
from support.reliability import (
    arguments_from_schema,
    assert_well_formed,
    json_values,
    record,
    rpc_messages,
    tool_call,
)

# MCP servers fuzzed over both transports: seconds per property.
pytestmark = pytest.mark.slow

EXAMPLES = 200
FUZZ = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None)
TOOLS = ['perplexity_research', 'perplexity_research_result', 'perplexity_research_cancel',
         'perplexity_research_list', 'perplexity_search']  # fmt: skip
METHODS = [
    'initialize', 'ping', 'tools/list', 'tools/call', 'resources/list', 'resources/read', 'resources/templates/list',
    'prompts/list', 'prompts/get', 'completion/complete', 'logging/setLevel', 'server/discover',
    'notifications/initialized', 'notifications/cancelled', 'notifications/progress',
    'notifications/roots/list_changed', 'sampling/createMessage', 'tools/call/extra', '', 'rpc.discover',
]  # fmt: skip
_tallies: dict[str, Counter[str]] = {}


# -- strategies ----------------------------------------------------------------------------------------------------

ids = st.one_of(
    st.integers(min_value=-(2**100), max_value=2**100),
    st.text(max_size=30),
    st.floats(allow_nan=False, allow_infinity=False),
    st.none(),
    st.booleans(),
    json_values(max_leaves=4),
)


def params_for(method: str) -> Any:
    if method == 'tools/call':
        return st.fixed_dictionaries(
            {'name': st.sampled_from(TOOLS) | st.text(max_size=20)},
            optional={'arguments': json_values(), '_meta': json_values(max_leaves=4)},
        )
    if method == 'resources/read':
        uri = st.sampled_from(
            ['skill://perplexity-research/SKILL.md', 'perplexity://runs/resp_nope', 'file:///etc/passwd']
        )
        return st.fixed_dictionaries({'uri': uri | st.text(max_size=30)})
    if method == 'notifications/cancelled':
        return st.fixed_dictionaries({'requestId': ids}, optional={'reason': st.text(max_size=20)})
    return json_values()


# Values that broke servers before: control and escape sequences, lone surrogates, long and huge values.
CONTROL = st.sampled_from(
    ['\x1b]0;TITLE\x07', '\x1b]8;;https://evil.example\x1b\\link\x1b]8;;\x1b\\', '\x1b[2J\x1b[H', '\x9b31m', '\x00',
     '\x7f', '\u202e', '\u200b\ufeff', '\r', '\x85', '\u2028']
)  # fmt: skip
SURROGATES = st.text(st.characters(categories=['Cs']), min_size=1, max_size=3)
hostile_text = st.one_of(
    CONTROL,
    SURROGATES,
    st.tuples(st.text(max_size=10), SURROGATES | CONTROL, st.text(max_size=10)).map(''.join),
    st.integers(1_000, 100_000).map(lambda n: 'i' * n),
)
NUMBERS = st.sampled_from(
    [1e30, -1e30, 1.7976931348623157e308, float('inf'), float('-inf'), float('nan'), 2**63, -(2**63) - 1, 10**400, -0.0]
)
hostile_values = st.one_of(hostile_text, NUMBERS, st.booleans(), st.none(), json_values(max_leaves=3))
hostile_ids = st.one_of(hostile_text, st.integers(-(2**200), 2**200), st.sampled_from([2**63, -(2**63), 0, -1]))
NOT_OBJECTS = st.one_of(
    st.booleans(), NUMBERS, hostile_text, st.text(max_size=10), st.lists(hostile_values, max_size=3)
)
hostile_params = st.one_of(
    NOT_OBJECTS,
    st.fixed_dictionaries(
        {},
        optional=dict.fromkeys(('name', 'uri', 'arguments', '_meta', 'cursor', 'protocolVersion'), hostile_values),
    ),
)


def hostile_messages() -> Any:
    """Requests with a readable id whose method, params or id carry the values above."""
    return st.fixed_dictionaries(
        {'jsonrpc': st.just('2.0'), 'id': hostile_ids, 'method': st.sampled_from(METHODS) | hostile_text},
        optional={'params': hostile_params},
    )


def escaped(value: Any) -> bytes:
    """ASCII JSON: lone surrogates and controls as `\\uXXXX` escapes (what most clients' encoders write)."""
    return json.dumps(value, ensure_ascii=True).encode()


def messages() -> Any:
    """JSON-RPC messages: well-formed requests with any method and params, notifications, and junk envelopes."""
    valid_ids = st.integers(min_value=-(2**100), max_value=2**100) | st.text(max_size=30)
    method = st.sampled_from(METHODS) | st.text(max_size=20)
    request = method.flatmap(
        lambda m: st.fixed_dictionaries(
            {'jsonrpc': st.just('2.0'), 'id': valid_ids, 'method': st.just(m)}, optional={'params': params_for(m)}
        )
    )
    notification = method.flatmap(
        lambda m: st.fixed_dictionaries(
            {'jsonrpc': st.just('2.0'), 'method': st.just(m)}, optional={'params': params_for(m)}
        )
    )
    junk = st.sampled_from(METHODS).flatmap(
        lambda m: st.fixed_dictionaries(
            {'jsonrpc': st.just('2.0') | json_values(max_leaves=2), 'method': st.just(m) | json_values(max_leaves=2)},
            optional={'id': ids, 'params': params_for(m), 'result': json_values(), 'error': json_values()},
        )
    )
    return st.one_of(request, request, notification, junk)


def dumps(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False).encode('utf-8', 'surrogatepass')


def _nested(depth: int) -> bytes:
    return b'[' * depth + b']' * depth


def _deep_params(depth: int) -> bytes:
    return (
        b'{"jsonrpc":"2.0","id":"deep","method":"ping","params":{"a":'
        + b'{"a":' * depth
        + b'1'
        + b'}' * (depth + 1)
        + b'}'
    )


SURROGATE = (
    b'{"jsonrpc":"2.0","id":"lone","method":"tools/call","params":{"name":"perplexity_research",'
    b'"arguments":{"query":"\\ud800 What is the EU AI Act?"}}}'
)
lines = st.one_of(
    messages().map(dumps),
    messages().map(dumps),
    messages().map(dumps),
    json_values().map(dumps),
    st.binary(max_size=120),
    messages().map(dumps).flatmap(lambda line: st.integers(0, len(line)).map(lambda cut: line[:cut])),  # truncated
    st.integers(1, 100_000).map(_nested),
    st.integers(1, 5_000).map(_deep_params),
    st.just(SURROGATE),
    st.integers(0, 2).map(
        lambda n: b'{"jsonrpc":"2.0","id":1e999,"method":"ping","x":"' + b'y' * (200_000 * n) + b'"}'
    ),
    hostile_messages().map(escaped),
    hostile_messages().map(escaped),
    hostile_messages().map(dumps),  # raw: a lone surrogate is then invalid UTF-8
    st.sampled_from(['1e999', '-1e999', 'NaN', 'Infinity', '-Infinity', '1' + '0' * 5000, '1e-999']).flatmap(
        lambda number: st.sampled_from(
            [
                b'{"jsonrpc":"2.0","id":"num","method":"ping","params":{"a":%s}}' % number.encode(),
                b'{"jsonrpc":"2.0","id":"num","method":"tools/call","params":%s}' % number.encode(),
                b'{"jsonrpc":"2.0","id":%s,"method":"ping"}' % number.encode(),
            ]
        )
    ),
).map(lambda line: line.replace(b'\n', b' ').replace(b'\r', b' '))  # one line each: newlines split messages


def expectation(line: bytes, *, stdio: bool = True) -> tuple[str, Any]:
    """What must answer `line`: ('one', id) exactly one reply with that id; ('error', None) exactly one error with
    id null; ('maybe', id) at most one reply, with that id or null; ('none', None) none."""
    if stdio and not line.strip(b' \t\r\x0b\x0c'):
        return 'none', None  # a blank line separates nothing: it is skipped (a blank HTTP body is a parse error)
    try:
        value = json.loads(line)
    except RecursionError:  # valid JSON may nest deeper than a parser's stack: its envelope is still readable
        try:
            value = shallow(line.decode())
        except ValueError:
            return 'error', None
    except ValueError:
        return 'error', None
    if not isinstance(value, dict):
        return 'maybe', None
    request_id = value.get('id')
    is_id = isinstance(request_id, int | str) and not isinstance(request_id, bool)
    if value.get('jsonrpc') == '2.0' and isinstance(value.get('method'), str) and is_id:
        if 'result' in value or 'error' in value:  # may also read as a response to the server: no reply then
            return 'maybe', request_id
        return 'one', request_id
    return 'maybe', request_id if is_id else None


def check_replies(line: bytes, replies: list[dict[str, Any]], kind: str, request_id: Any) -> str:
    for reply in replies:
        assert_well_formed(reply)
    assert len(replies) <= (0 if kind == 'none' else 1), (line[:300], replies)
    if kind in ('one', 'error'):
        assert len(replies) == 1, (line[:300], kind)
    if not replies:
        return 'no reply'
    [reply] = replies
    if kind == 'one':  # a request whose id can be read: answered with that id, whatever else is wrong with it
        assert reply['id'] == request_id, (line[:300], reply)
    else:
        assert reply['id'] in (request_id, None), (line[:300], reply)
    if kind == 'error' or reply['id'] is None:
        assert 'error' in reply, (line[:300], reply)
    if 'error' in reply:
        return f'error {reply["error"]["code"]}'
    return 'result'


# -- stdio ---------------------------------------------------------------------------------------------------------


class StdioWire:
    """One server process fed one line at a time; after each, a ping barrier proves it is alive and in step."""

    def __init__(self, server: RawServer, modern: bool = False) -> None:
        self.server = server
        self.n = 0
        self.modern = modern  # the 2026-07-28 era has no ping and needs its envelope on every request

    def exchange(self, line: bytes, kind: str, request_id: Any) -> list[dict[str, Any]]:
        self.n += 1
        barrier = f'barrier-{self.n}'
        self.server.send(line + b'\n')
        ping: dict[str, Any] = {'jsonrpc': '2.0', 'id': barrier, 'method': 'ping'}
        if self.modern:
            ping.update(method='tools/list', params={'_meta': MODERN_META})
        self.server.send(ping)
        replies: list[dict[str, Any]] = []
        deadline = time.monotonic() + DEADLINE
        barrier_seen = False
        # Until the barrier is answered, and (for a request) its own reply came too: calls run concurrently.
        while not barrier_seen or (kind in ('one', 'error') and not replies):
            message = self.server.next_message(timeout=max(0.0, deadline - time.monotonic()))
            if 'method' in message:  # the server's own notifications and requests
                continue
            if message.get('id') == barrier:
                result = message.get('result')
                assert (len(result['tools']) == len(TOOLS)) if self.modern else result == {}, message
                barrier_seen = True
            else:
                replies.append(message)
        return replies


@pytest.fixture(scope='module')
def stdio(logged_fast: Emulator, module_state: Path) -> Iterator[StdioWire]:
    server = RawServer(server_env(logged_fast, module_state, PERPLEXITY_WAIT_SECONDS='10'))
    server.initialize()
    yield StdioWire(server)
    assert server.proc.poll() is None, b''.join(server.stderr)[-3000:]  # it never died
    still_serves(server)
    assert server.close() == 0
    for raw in server.raw_stdout:  # stdout carried JSON-RPC and nothing else
        assert_well_formed(json.loads(raw))
    assert b'Traceback' not in b''.join(server.stderr), b''.join(server.stderr)[-3000:]


MODERN = '2026-07-28'
MODERN_META = {
    'io.modelcontextprotocol/protocolVersion': MODERN,
    'io.modelcontextprotocol/clientCapabilities': {},
    'io.modelcontextprotocol/clientInfo': {'name': 'fuzz', 'version': '1'},
}


@pytest.fixture(scope='module')
def stdio_modern(logged_fast: Emulator, module_state: Path) -> Iterator[StdioWire]:
    """A stdio server in the 2026-07-28 era: its first request carries the per-request envelope, no initialize."""
    server = RawServer(server_env(logged_fast, module_state, PERPLEXITY_WAIT_SECONDS='10'))
    assert [t['name'] for t in server.request('tools/list', {'_meta': MODERN_META})['result']['tools']] == TOOLS
    yield StdioWire(server, modern=True)
    assert server.proc.poll() is None, b''.join(server.stderr)[-3000:]
    found = server.request('tools/call', {'name': 'perplexity_search', 'arguments': {'query': 'EU AI Act'},
                                         '_meta': MODERN_META})  # fmt: skip
    assert found['result'].get('isError') is not True and '[1]' in text_of(found['result'])
    assert server.close() == 0
    for raw in server.raw_stdout:
        assert_well_formed(json.loads(raw))
    assert b'Traceback' not in b''.join(server.stderr), b''.join(server.stderr)[-3000:]


def still_serves(server: RawServer) -> None:
    tools = server.request('tools/list')['result']['tools']
    assert [t['name'] for t in tools] == TOOLS
    found = server.call('perplexity_search', {'query': 'EU AI Act'})
    assert found.get('isError') is not True and '[1]' in text_of(found)
    done = server.call('perplexity_research', {'query': 'What does the EU AI Act regulate?', 'effort': 'fast'})
    assert done['structuredContent']['status'] == 'completed'


@pytest.fixture(scope='module')
def logged_fast() -> Iterator[Emulator]:
    with Emulator(time_scale=0) as emu:
        yield emu


#: Always sent, whatever Hypothesis draws: a lone surrogate, nesting far past any parser's stack, a 400-digit id.
EDGES = (
    SURROGATE,
    _nested(100_000),
    _deep_params(5_000),
    b'{"jsonrpc":"2.0","id":' + b'9' * 400 + b',"method":"ping"}',
    b'{"jsonrpc":"2.0","id":"false-params","method":"tools/call","params":false}',
    b'{"jsonrpc":"2.0","id":7,"method":"ping","params":1e30}',
    b'{"jsonrpc":"2.0","id":"\\ud800","method":"tools/list","params":"x"}',
    b'{"jsonrpc":"2.0","id":"' + b'L' * 100_000 + b'","method":"ping","params":[1]}',
    b'{"jsonrpc":"2.0","id":"\\u001b]0;TITLE\\u0007","method":"prompts/get","params":{"name":"\\u009b31m"}}',
)


@FUZZ
@example(line=EDGES[0])
@example(line=EDGES[1])
@example(line=EDGES[2])
@example(line=EDGES[3])
@example(line=EDGES[4])
@example(line=EDGES[5])
@example(line=EDGES[6])
@example(line=EDGES[7])
@example(line=EDGES[8])
@given(line=lines)
def test_raw_lines_to_the_stdio_server(stdio: StdioWire, line: bytes) -> None:
    kind, request_id = expectation(line)
    outcome = check_replies(line, stdio.exchange(line, kind, request_id), kind, request_id)
    _tallies.setdefault('stdio lines', Counter())[outcome] += 1


@settings(FUZZ, max_examples=EXAMPLES // 2)
@example(line=EDGES[0])
@example(line=EDGES[3])
@given(line=lines)
def test_raw_lines_to_the_stdio_server_in_the_modern_era(stdio_modern: StdioWire, line: bytes) -> None:
    kind, request_id = expectation(line)
    outcome = check_replies(line, stdio_modern.exchange(line, kind, request_id), kind, request_id)
    _tallies.setdefault('stdio lines (2026-07-28)', Counter())[outcome] += 1


@FUZZ
@given(data=st.data())
def test_tool_calls_with_fuzzed_arguments_to_the_stdio_server(stdio: StdioWire, data: st.DataObject) -> None:
    schemas = stdio_schemas(stdio)
    name = data.draw(st.sampled_from(TOOLS), label='tool')
    arguments = data.draw(arguments_from_schema(schemas[name]) | json_values(), label='arguments')
    call = tool_call(name, arguments, f'call-{stdio.n}')
    [reply] = stdio.exchange(dumps(call), 'one', call['id'])
    _tallies.setdefault('stdio tools/call', Counter())[tool_outcome(reply, call['id'])] += 1


_schemas: dict[str, dict[str, Any]] = {}


def stdio_schemas(stdio: StdioWire) -> dict[str, dict[str, Any]]:
    if not _schemas:
        tools = stdio.server.request('tools/list')['result']['tools']
        _schemas.update({t['name']: t['inputSchema'] for t in tools})
    return _schemas


def tool_outcome(reply: dict[str, Any], request_id: Any) -> str:
    """A `tools/call` answer: a result (a tool error is `isError` with text), or a JSON-RPC error for bad params."""
    assert_well_formed(reply)
    assert reply['id'] == request_id, reply
    if 'error' in reply:
        assert reply['error']['code'] in (-32602, -32600), reply
        return f'error {reply["error"]["code"]}'
    result = reply['result']
    assert isinstance(result['content'], list) and result['content'], reply
    text = text_of(result)
    assert text.strip() and 'Traceback' not in text, text
    return 'tool error' if result.get('isError') else 'result'


# -- HTTP ----------------------------------------------------------------------------------------------------------


@pytest.fixture(scope='module')
def http(logged_fast: Emulator, module_state: Path) -> Iterator[tuple[HttpServer, httpx2.Client]]:
    server = HttpServer(server_env(logged_fast, module_state, PERPLEXITY_WAIT_SECONDS='10'))
    client = httpx2.Client(timeout=DEADLINE, headers=MCP_HEADERS)
    yield server, client
    assert server.proc.poll() is None, b''.join(server.stderr)[-3000:]
    tools = rpc_messages(client.post(server.url, json={'jsonrpc': '2.0', 'id': 1, 'method': 'tools/list'}))
    assert [t['name'] for t in tools[0]['result']['tools']] == TOOLS
    done = rpc_messages(
        client.post(server.url, json=tool_call('perplexity_research', {'query': 'What is the EU AI Act?'}))
    )
    assert done[-1]['result']['structuredContent']['status'] == 'completed'
    client.close()
    server.stop()
    assert not any(b'Traceback' in line for line in server.stderr), b''.join(server.stderr)[-3000:]


def era_headers(line: bytes, era: str) -> dict[str, str]:
    """The 2026-07-28 routing headers for `line` (what a modern client sends), as far as they can be written."""
    if era != 'modern':
        return {}
    headers = {'MCP-Protocol-Version': MODERN}
    try:
        body = json.loads(line)
    except (ValueError, RecursionError):
        return headers
    if not isinstance(body, dict):
        return headers
    params = body.get('params') if isinstance(body.get('params'), dict) else {}
    for header, value in (('Mcp-Method', body.get('method')), ('Mcp-Name', params.get('name', params.get('uri')))):
        if isinstance(value, str) and value.isascii() and value.isprintable() and len(value) < 1000:
            headers[header] = value
    return headers


def post_line(
    http: tuple[HttpServer, httpx2.Client], line: bytes, era: str = 'legacy'
) -> tuple[int, list[dict[str, Any]]]:
    server, client = http
    reply = client.post(server.url, content=line, headers=era_headers(line, era))
    assert reply.status_code < 500, (line[:300], reply.status_code, reply.text[:500])
    kind = reply.headers.get('content-type', '')
    if reply.status_code >= 400 and not kind.startswith(('application/json', 'text/event-stream')):
        return reply.status_code, []
    return reply.status_code, [m for m in rpc_messages(reply) if 'method' not in m]


@FUZZ
@example(line=EDGES[0], era='legacy')
@example(line=EDGES[1], era='legacy')
@example(line=EDGES[2], era='legacy')
@example(line=EDGES[3], era='legacy')
@example(line=EDGES[4], era='legacy')
@example(line=EDGES[4], era='modern')
@example(line=EDGES[5], era='modern')
@example(line=EDGES[6], era='legacy')
@example(line=EDGES[7], era='modern')
@example(line=EDGES[8], era='legacy')
@given(line=lines, era=st.sampled_from(['legacy', 'modern']))
def test_raw_bodies_to_the_http_server(http: tuple[HttpServer, httpx2.Client], line: bytes, era: str) -> None:
    kind, request_id = expectation(line, stdio=False)
    status, replies = post_line(http, line, era)
    if status == 413:  # over the 1 MiB limit
        outcome = 'HTTP 413'
    elif status == 202:  # a notification or a response: accepted, nothing to answer
        assert not replies and kind != 'error', (line[:300], status)
        outcome = 'HTTP 202 (no reply due)'
    else:
        outcome = f'HTTP {status} ' + check_replies(line, replies, kind, request_id)
    _tallies.setdefault('http bodies', Counter())[outcome] += 1


@FUZZ
@given(data=st.data())
def test_tool_calls_with_fuzzed_arguments_to_the_http_server(
    http: tuple[HttpServer, httpx2.Client], stdio: StdioWire, data: st.DataObject
) -> None:
    schemas = stdio_schemas(stdio)
    name = data.draw(st.sampled_from(TOOLS), label='tool')
    arguments = data.draw(arguments_from_schema(schemas[name]) | json_values(), label='arguments')
    call = tool_call(name, arguments, 'call')
    status, [reply] = post_line(http, dumps(call))
    assert status == 200
    _tallies.setdefault('http tools/call', Counter())[tool_outcome(reply, 'call')] += 1


def test_zz_record_what_was_fuzzed(stdio: StdioWire, http: tuple[HttpServer, httpx2.Client]) -> None:
    """Runs last in this file: records the inputs each property sent and how they were answered."""
    for name, surface, case in (
        ('stdio lines', 'mcp-stdio', 'raw JSON-RPC lines (junk, wrong types, unknown methods, huge ids, nesting)'),
        ('stdio lines (2026-07-28)', 'mcp-stdio', 'the same lines in the 2026-07-28 era (no initialize)'),
        ('stdio tools/call', 'mcp-stdio', 'tools/call with arguments from each inputSchema, and junk'),
        ('http bodies', 'mcp-http', 'raw JSON-RPC bodies (junk, wrong types, unknown methods, huge ids, nesting)'),
        ('http tools/call', 'mcp-http', 'tools/call with arguments from each inputSchema, and junk'),
    ):
        tally = _tallies.get(name)
        if tally:
            record('fuzz', surface, case, inputs=sum(tally.values()), outcomes=dict(tally), crashes=0,
                   still_serving=True)  # fmt: skip
