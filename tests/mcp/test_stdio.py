"""The server over stdio, spoken to in raw JSON-RPC lines: handshake, robustness, research, progress, errors, cancel.

One server process serves most tests of this module (as one client's pipe would); tests that need another
environment or the end of the pipe start their own.
"""

from __future__ import annotations

import json
import re
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pydantic_ai_perplexity._ledger import Ledger
from pydantic_ai_perplexity.emulator import Emulator
from pydantic_ai_perplexity.mcp.server import _snapshot
from support.mcp_servers import RawServer, eventually, server_env, text_of, upstream_status

HANDSHAKE = json.loads(_snapshot.SNAPSHOT_FILE.read_text(encoding='utf-8'))
EMULATED_NOTE = 'answered by an emulator, not Perplexity; not a real answer'


@pytest.fixture(scope='module')
def server(emu: Emulator, state_dir: Path) -> Iterator[RawServer]:
    process = RawServer(server_env(emu, state_dir))
    process.initialize()
    yield process
    process.kill()


# -- handshake and robustness --------------------------------------------------------------------------------------


def test_handshake_and_tool_list_match_what_the_sdk_answers(emu: Emulator, state_dir: Path) -> None:
    process = RawServer(server_env(emu, state_dir))
    try:
        reply = process.initialize('2025-06-18')
        assert reply['result'] == HANDSHAKE['versions']['2025-06-18']['initialize']
        tools = process.request('tools/list')['result']['tools']
        assert [t['name'] for t in tools] == [
            'perplexity_research',
            'perplexity_research_result',
            'perplexity_research_cancel',
            'perplexity_research_list',
            'perplexity_search',
        ]
        # An unknown (newer) version is answered with the latest handshake version, as the SDK does.
        other = RawServer(server_env(emu, state_dir))
        try:
            assert other.initialize('2099-01-01')['result']['protocolVersion'] == HANDSHAKE['latest']
        finally:
            assert other.close() == 0
    finally:
        assert process.close() == 0


@pytest.mark.anyio
async def test_shipped_handshake_snapshot_is_what_the_sdk_answers() -> None:
    """Regenerate with `uv run --frozen python -m pydantic_ai_perplexity.mcp.server._snapshot` after changing a
    tool, the instructions, the version or the MCP SDK."""
    assert await _snapshot.handshake_snapshot() == HANDSHAKE


def test_tool_annotations_are_honest(server: RawServer) -> None:
    tools = {t['name']: t for t in server.request('tools/list')['result']['tools']}
    research = tools['perplexity_research']['annotations']
    assert research['readOnlyHint'] is False and research['openWorldHint'] is True
    assert research['destructiveHint'] is False
    assert tools['perplexity_research_cancel']['annotations']['destructiveHint'] is True
    for name in ('perplexity_research_result', 'perplexity_research_list', 'perplexity_search'):
        assert tools[name]['annotations']['readOnlyHint'] is True
    assert 'next' in tools['perplexity_research']['outputSchema']['properties']
    assert 'outputSchema' in tools['perplexity_research_result']


@pytest.mark.slow
def test_malformed_lines_get_a_parse_error_and_the_server_reads_on(server: RawServer) -> None:
    server.send(b'this is not json\n')
    assert server.wait_for(lambda m: 'error' in m and m.get('id') is None)['error']['code'] == -32700
    server.send(b'{"jsonrpc": "2.0", "id": 7}\n')  # JSON, but not a JSON-RPC message
    assert server.wait_for(lambda m: m.get('error', {}).get('code') == -32600)['id'] is None
    assert server.request('ping')['result'] == {}


NOT_OBJECTS = [False, 1e30, 'x', [1, 2], 0, None]
MODERN_META = {
    'io.modelcontextprotocol/protocolVersion': '2026-07-28',
    'io.modelcontextprotocol/clientCapabilities': {},
    'io.modelcontextprotocol/clientInfo': {'name': 'raw-test', 'version': '1'},
}


def answers_to(server: RawServer, request_id: Any) -> list[dict[str, Any]]:
    """Every answer to `request_id`, once a ping sent after it came back (answers come in order of completion)."""
    barrier = f'barrier-after-{request_id}'
    server.send({'jsonrpc': '2.0', 'id': barrier, 'method': 'ping'})
    server.wait_for(lambda m: m.get('id') == barrier)
    return [m for m in server._seen if m.get('id') == request_id and 'method' not in m]


@pytest.mark.parametrize('method', ['ping', 'tools/list', 'tools/call', 'resources/read', 'initialize'])
def test_a_request_whose_params_is_not_an_object_is_answered_with_its_id(server: RawServer, method: str) -> None:
    for n, params in enumerate(NOT_OBJECTS):
        request_id = f'{method}-{n}'
        server.send({'jsonrpc': '2.0', 'id': request_id, 'method': method, 'params': params})
        [answer] = answers_to(server, request_id)
        if params is None:  # no params at all: the request stands
            continue
        assert answer['error']['code'] == -32602, answer
        assert '"params" must be an object' in answer['error']['message']
    assert b'Traceback' not in b''.join(server.stderr)


def test_odd_ids_are_answered_with_themselves(server: RawServer) -> None:
    long_id = 'i' * 100_000
    for request_id, line in (
        (long_id, None),
        ('\ud800 lone', b'{"jsonrpc":"2.0","id":"\\ud800 lone","method":"ping"}'),
        ('\x1b]0;title\x07', None),
        (2**80, None),
        (-1, None),
    ):
        server.send(line + b'\n' if line else {'jsonrpc': '2.0', 'id': request_id, 'method': 'ping', 'params': False})
        assert len(answers_to(server, request_id)) == 1, request_id
    assert server.request('ping')['result'] == {}


@pytest.mark.slow
def test_the_modern_era_answers_bad_params_with_the_id_too(
    raw_server_factory: Callable[..., RawServer], emu: Emulator, tmp_path: Path
) -> None:
    process = raw_server_factory(server_env(emu, tmp_path))
    listed = process.request('tools/list', {'_meta': MODERN_META})
    assert len(listed['result']['tools']) == 5  # served in the 2026-07-28 era: no initialize
    for n, params in enumerate(NOT_OBJECTS[:4]):
        process.send({'jsonrpc': '2.0', 'id': n, 'method': 'tools/call', 'params': params})
        [answer] = answers_to(process, n)
        assert answer['error']['code'] == -32602
    unknown = process.request('prompts/get', {'name': 'nope', '_meta': MODERN_META})
    assert unknown['error']['code'] == -32602 and 'nope' in unknown['error']['message']
    assert process.close() == 0
    assert b'Traceback' not in b''.join(process.stderr)


def test_an_unknown_prompt_or_run_is_invalid_params_without_a_traceback(server: RawServer) -> None:
    prompt = server.request('prompts/get', {'name': 'no-such-prompt'})
    assert prompt['error']['code'] == -32602 and 'no-such-prompt' in prompt['error']['message']
    run = server.request('resources/read', {'uri': 'perplexity://runs/resp_00000000-0000-0000-0000-000000000000'})
    assert run['error']['code'] == -32602
    assert 'No research run has that response_id' in run['error']['message']
    assert b'Traceback' not in b''.join(server.stderr)


def test_unknown_method_is_method_not_found(server: RawServer) -> None:
    assert server.request('no/such/method')['error']['code'] == -32601


def test_a_notification_gets_no_reply(server: RawServer) -> None:
    server.send({'jsonrpc': '2.0', 'method': 'notifications/whatever', 'params': {}})
    server.send({'jsonrpc': '2.0', 'id': 'after-notification', 'method': 'ping'})
    assert server.next_message() == {'jsonrpc': '2.0', 'id': 'after-notification', 'result': {}}


def test_eof_during_the_handshake_exits_zero(raw_server_factory: Callable[..., RawServer], tmp_path: Path) -> None:
    process = raw_server_factory(server_env(None, tmp_path))
    process.initialize()
    assert process.request('tools/list')['result']['tools']
    assert process.close() == 0
    assert all(json.loads(line) for line in process.raw_stdout)


# -- research ------------------------------------------------------------------------------------------------------


def test_research_returns_the_answer_with_sources_as_text_and_structured_content(server: RawServer) -> None:
    result = server.call('perplexity_research', {'query': 'What does the EU AI Act regulate?', 'effort': 'fast'})
    assert result.get('isError') is not True
    text = text_of(result)
    structured = result['structuredContent']
    assert structured['status'] == 'completed'
    assert structured['response_id'].startswith('resp_')
    assert structured['sources'] and structured['answer']
    assert '[1]' in text and 'Sources:' in text and f'response_id: {structured["response_id"]}' in text
    assert 'data retrieved from the web' in text  # spotlighted
    assert structured['emulated'] is True and text.splitlines()[-1].endswith('| emulated: ' + EMULATED_NOTE)
    # One answer, rendered once: the text and the structured answer are wrapped in the same delimiters.
    [nonce] = set(re.findall(r'<<web-([0-9a-f]+)>>', text))
    assert structured['answer'].startswith(f'<<web-{nonce}>>') and f'<<web-{nonce}>>' in structured['notice']


@pytest.mark.slow
def test_a_replayed_recording_is_marked_emulated_in_text_and_structured_content(
    raw_server_factory: Callable[..., RawServer], tmp_path: Path
) -> None:
    recordings = Path(__file__).parent.parent / 'emulator' / 'recordings'
    with Emulator(replay=recordings, time_scale=0.002) as replayer:
        process = raw_server_factory(server_env(replayer, tmp_path))
        process.initialize()
        result = process.call('perplexity_research', {'query': 'What is the EU AI Act?', 'effort': 'fast'})
        assert process.close() == 0
    structured = result['structuredContent']
    assert structured['status'] == 'completed' and structured['sources']
    assert structured['emulated'] is True and f'emulated: {EMULATED_NOTE}' in text_of(result)


def test_progress_is_notified_per_research_step(server: RawServer) -> None:
    result = server.call('perplexity_research', {'query': 'How do heat pumps work?', 'effort': 'low'}, progress='p-1')
    assert result['structuredContent']['status'] == 'completed'
    notes = [m['params'] for m in server._seen if m.get('method') == 'notifications/progress']
    mine = [n for n in notes if n['progressToken'] == 'p-1']
    assert mine[0]['message'].startswith('started research run resp_')
    assert any(n['message'].startswith('searching') for n in mine)
    assert [n['progress'] for n in mine] == sorted(n['progress'] for n in mine)
    assert len(mine) >= 3


def test_a_failed_run_is_a_result_not_an_error(server: RawServer) -> None:
    result = server.call('perplexity_research', {'query': 'Anything [[emulate: fail]]', 'effort': 'fast'})
    assert result.get('isError') is not True
    assert result['structuredContent']['status'] == 'failed'
    assert 'ended failed' in text_of(result)


def test_a_bad_argument_is_an_error_with_text_that_says_what_to_fix(server: RawServer) -> None:
    result = server.call('perplexity_research', {'query': 'q', 'domains': ['not a domain']})
    assert result['isError'] is True
    assert 'is not a domain' in text_of(result) and 'Traceback' not in text_of(result)
    unknown = server.call('perplexity_research_result', {'response_id': 'resp_00000000-0000-0000-0000-000000000000'})
    assert unknown['isError'] is True and 'No research run has that response_id' in text_of(unknown)
    limit = server.call('perplexity_research_list', {'limit': 500})
    assert limit['isError'] is True and 'between 1 and 50' in text_of(limit)


@pytest.mark.slow
def test_calls_on_one_pipe_run_concurrently(server: RawServer) -> None:
    slow = {'name': 'perplexity_research', 'arguments': {'query': 'Slow one [[emulate: duration=600]]'}}
    fast = {'name': 'perplexity_search', 'arguments': {'query': 'heat pumps'}}
    server.send({'jsonrpc': '2.0', 'id': 'slow', 'method': 'tools/call', 'params': slow})
    server.send({'jsonrpc': '2.0', 'id': 'fast', 'method': 'tools/call', 'params': fast})
    first = server.wait_for(lambda m: m.get('id') in ('slow', 'fast'))
    assert first['id'] == 'fast'
    assert '[1]' in text_of(first['result'])
    assert server.wait_for(lambda m: m.get('id') == 'slow')['result']['structuredContent']['status'] == 'completed'


def test_list_and_resources_show_runs(server: RawServer) -> None:
    done = server.call('perplexity_research', {'query': 'What is a lithium-ion battery?', 'effort': 'fast'})
    response_id = done['structuredContent']['response_id']
    listed = text_of(server.call('perplexity_research_list', {'limit': 50}))
    assert response_id in listed and 'completed' in listed
    resources = server.request('resources/list')['result']['resources']
    assert any(r['uri'] == 'skill://perplexity-research/SKILL.md' for r in resources)
    templates = server.request('resources/templates/list')['result']['resourceTemplates']
    assert [t['uriTemplate'] for t in templates] == ['perplexity://runs/{response_id}']
    run = server.request('resources/read', {'uri': f'perplexity://runs/{response_id}'})['result']['contents'][0]
    full = json.loads(run['text'])
    assert full['response_id'] == response_id and full['status'] == 'completed' and full['sources']
    skill = server.request('resources/read', {'uri': 'skill://perplexity-research/SKILL.md'})['result']['contents'][0]
    assert 'perplexity_research_result' in skill['text']


def test_cancelled_notification_cancels_the_run_upstream_and_the_ledger_says_so(
    server: RawServer, emu: Emulator, state_dir: Path
) -> None:
    params = {
        'name': 'perplexity_research',
        'arguments': {'query': 'A very long survey [[emulate: duration=20000]]'},
        '_meta': {'progressToken': 'to-cancel'},
    }
    server.send({'jsonrpc': '2.0', 'id': 'to-cancel', 'method': 'tools/call', 'params': params})
    started = server.wait_for(
        lambda m: m.get('method') == 'notifications/progress' and m['params']['progressToken'] == 'to-cancel'
    )
    response_id = started['params']['message'].removeprefix('started research run ')
    assert upstream_status(emu, response_id) in ('queued', 'in_progress')
    server.send({'jsonrpc': '2.0', 'method': 'notifications/cancelled', 'params': {'requestId': 'to-cancel'}})
    eventually(lambda: upstream_status(emu, response_id) == 'cancelled')
    with Ledger(state_dir / 'ledger.sqlite3') as ledger:
        record = eventually(lambda: (r := ledger.get(response_id)) is not None and r.status == 'cancelled' and r)
    assert record.error and 'MCP client cancelled' in record.error
    # The cancelled request is never answered; the pipe goes on serving.
    assert server.request('ping')['result'] == {}
    assert not any(m.get('id') == 'to-cancel' for m in server._seen)


# -- other environments --------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_missing_key_is_a_clear_tool_error_and_the_server_keeps_serving(
    raw_server_factory: Callable[..., RawServer], tmp_path: Path
) -> None:
    process = raw_server_factory(server_env(None, tmp_path))
    process.initialize()
    result = process.call('perplexity_research', {'query': 'Anything at all'})
    assert result['isError'] is True
    text = text_of(result)
    assert 'PERPLEXITY_API_KEY' in text and 'Traceback' not in text
    assert process.call('perplexity_research_list', {})['content'][0]['text'] == 'No research runs recorded yet.'
    assert process.close() == 0


@pytest.mark.slow
def test_a_run_past_the_wait_budget_hands_off_then_is_collected(
    raw_server_factory: Callable[..., RawServer], emu: Emulator, tmp_path: Path
) -> None:
    process = raw_server_factory(server_env(emu, tmp_path, PERPLEXITY_WAIT_SECONDS='0.3'))
    process.initialize()
    handoff = process.call('perplexity_research', {'query': 'Long question [[emulate: duration=300]]'})
    structured = handoff['structuredContent']
    response_id = structured['response_id']
    assert structured['status'] in ('queued', 'in_progress')
    # The hand-off numbers the next collect (`poll`), so that consecutive collects differ (pydantic-deep's loop check).
    assert structured['next'] == f'perplexity_research_result(response_id="{response_id}", poll=1)'
    assert structured['poll'] == 1
    assert 'still going' in text_of(handoff) and 'perplexity_research_result' in text_of(handoff)
    assert 'poll=1' in text_of(handoff)
    assert upstream_status(emu, response_id) != 'cancelled'  # running out of wait never cancels

    def collected() -> dict[str, Any] | None:
        result = process.call('perplexity_research_result', {'response_id': response_id, 'wait_seconds': 60})
        return result if result['structuredContent']['status'] == 'completed' else None

    done = eventually(collected)
    assert done['structuredContent']['sources'] and '[1]' in text_of(done)
    assert process.close() == 0


@pytest.mark.slow
def test_stray_output_goes_to_stderr_and_stdout_carries_only_protocol_frames(
    raw_server_factory: Callable[..., RawServer], emu: Emulator, tmp_path: Path
) -> None:
    # Imported at interpreter start: when the server loads its tools (so, while serving), it prints, writes to
    # fd 1 directly and warns.
    (tmp_path / 'sitecustomize.py').write_text(
        'import os, sys, warnings\n'
        'class Noise:\n'
        '    def find_spec(self, name, path=None, target=None):\n'
        '        if name == "pydantic_ai_perplexity.mcp.server._tools":\n'
        '            sys.meta_path.remove(self)\n'
        '            print("stray print", flush=True)\n'
        '            os.write(1, b"stray fd write\\n")\n'
        '            warnings.warn("stray warning")\n'
        '            print("noise done", file=sys.stderr, flush=True)\n'
        '        return None\n'
        'sys.meta_path.insert(0, Noise())\n',
        encoding='utf-8',
    )
    process = raw_server_factory(server_env(emu, tmp_path, PYTHONPATH=str(tmp_path)))
    process.initialize()
    eventually(lambda: any(b'noise done' in line for line in process.stderr))
    result = process.call('perplexity_research', {'query': 'What is a heat pump?', 'effort': 'fast'})
    assert result['structuredContent']['status'] == 'completed'
    assert process.close() == 0
    assert all(json.loads(line)['jsonrpc'] == '2.0' for line in process.raw_stdout)
    errors = b''.join(process.stderr)
    assert b'stray print' in errors and b'stray fd write' in errors and b'stray warning' in errors


@pytest.mark.slow
def test_a_client_that_vanishes_mid_call_leaves_the_run_going_and_in_the_ledger(
    raw_server_factory: Callable[..., RawServer], emu: Emulator, tmp_path: Path
) -> None:
    process = raw_server_factory(server_env(emu, tmp_path))
    process.initialize()
    params = {
        'name': 'perplexity_research',
        'arguments': {'query': 'Long question [[emulate: duration=400]]'},
        '_meta': {'progressToken': 'gone'},
    }
    process.send({'jsonrpc': '2.0', 'id': 'gone', 'method': 'tools/call', 'params': params})
    started = process.wait_for(lambda m: m.get('method') == 'notifications/progress')
    response_id = started['params']['message'].removeprefix('started research run ')
    assert process.vanish() == 0  # stdin and stdout both gone: the server winds down without the client
    eventually(lambda: upstream_status(emu, response_id) == 'completed')
    with Ledger(tmp_path / 'ledger.sqlite3') as ledger:
        record = ledger.get(response_id)
    assert record is not None and record.origin == 'mcp' and record.status != 'cancelled'


# -- the handshake snapshot and the SDK version it was made with ---------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize('made_with', ['this SDK', 'another SDK'])
def test_the_snapshot_is_used_only_with_the_sdk_version_it_was_made_with(
    raw_server_factory: Callable[..., RawServer], emu: Emulator, tmp_path: Path, made_with: str
) -> None:
    # A snapshot whose tool list is visibly not the server's, planted before the server reads it.
    planted = json.loads(json.dumps(HANDSHAKE))
    for version in planted['versions'].values():
        version['tools/list'] = {'tools': []}
    if made_with == 'another SDK':
        planted['sdk'] = {'mcp': '0.0.1', 'mcp-types': '0.0.1'}
    (tmp_path / 'planted.json').write_text(json.dumps(planted), encoding='utf-8')
    (tmp_path / 'sitecustomize.py').write_text(
        'from pathlib import Path\n'
        'import pydantic_ai_perplexity.mcp.server._stdio as stdio\n'
        f'stdio.HANDSHAKE_FILE = Path({str(tmp_path / "planted.json")!r})\n',
        encoding='utf-8',
    )
    process = raw_server_factory(server_env(emu, tmp_path, PYTHONPATH=str(tmp_path)))
    process.initialize()
    tools = process.request('tools/list')['result']['tools']
    if made_with == 'this SDK':
        assert tools == []  # the front answered from the (planted) snapshot
    else:
        assert len(tools) == 5  # the SDK answered itself
    assert process.close() == 0


# -- signals -------------------------------------------------------------------------------------------------------


@pytest.mark.compat  # signals or kills a process
@pytest.mark.parametrize('sig', [signal.SIGINT, signal.SIGTERM])
def test_a_signal_during_a_call_hands_it_off_records_it_and_exits_promptly(
    raw_server_factory: Callable[..., RawServer], emu: Emulator, tmp_path: Path, sig: signal.Signals
) -> None:
    process = raw_server_factory(server_env(emu, tmp_path))
    process.initialize()
    params = {
        'name': 'perplexity_research',
        'arguments': {'query': 'A long survey [[emulate: duration=20000]]'},
        '_meta': {'progressToken': 'long'},
    }
    process.send({'jsonrpc': '2.0', 'id': 'long', 'method': 'tools/call', 'params': params})
    started = process.wait_for(lambda m: m.get('method') == 'notifications/progress')
    response_id = started['params']['message'].removeprefix('started research run ')
    signalled = time.monotonic()
    process.proc.send_signal(sig)
    reply = process.wait_for(lambda m: m.get('id') == 'long', timeout=15)
    structured = reply['result']['structuredContent']
    assert structured['response_id'] == response_id and structured['status'] in ('queued', 'in_progress')
    assert structured['next'] == f'perplexity_research_result(response_id="{response_id}")'
    # SIGTERM is a requested stop (0); SIGINT an interruption, 130 as shells expect (docs/mcp.md).
    assert process.proc.wait(timeout=15) == (130 if sig == signal.SIGINT else 0)
    assert time.monotonic() - signalled < 15
    process.close()
    assert upstream_status(emu, response_id) in ('queued', 'in_progress')  # a shutdown never cancels a run
    with Ledger(tmp_path / 'ledger.sqlite3') as ledger:
        record = ledger.get(response_id)
    assert record is not None and record.origin == 'mcp' and record.status != 'cancelled'
    assert b'Traceback' not in b''.join(process.stderr)


@pytest.mark.slow
def test_an_sdk_whose_internals_moved_still_serves_through_its_own_stdio_transport(
    raw_server_factory: Callable[..., RawServer], emu: Emulator, tmp_path: Path
) -> None:
    # As if an SDK upgrade had moved what `_sdk` reaches: no runner, no version to trust the snapshot with.
    (tmp_path / 'sitecustomize.py').write_text(
        'import pydantic_ai_perplexity.mcp.server._sdk as sdk\n'
        'sdk.lowlevel = lambda server: None\n'
        'sdk.installed_sdk = lambda: None\n',
        encoding='utf-8',
    )
    process = raw_server_factory(server_env(emu, tmp_path, PYTHONPATH=str(tmp_path)))
    assert process.initialize()['result']['serverInfo']['name'] == 'perplexity'
    assert len(process.request('tools/list')['result']['tools']) == 5
    found = process.call('perplexity_search', {'query': 'heat pumps'})
    assert found.get('isError') is not True and '[1]' in text_of(found)
    assert process.close() == 0
    assert any(b'serving with its own stdio transport' in line for line in process.stderr)
