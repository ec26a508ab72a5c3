"""The HTTP server as a shared service, one instance at a time: named tokens, /healthz, and SIGTERM hand-off.

The same behaviours behind nginx, with three instances on a PostgreSQL ledger, are in `tests/scale`.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import anyio
import httpx2
import pytest

from pydantic_ai_perplexity._ledger import Ledger
from pydantic_ai_perplexity.emulator import Emulator
from pydantic_ai_perplexity.mcp.server._tokens import TokenConfigError, Tokens, parse_tokens
from support.mcp_servers import DEADLINE, SERVER, server_env
from support.scale import Instance, call_tool, free_port, write_atomically

SECRET = 'tok-never-in-a-message-0123456789'


# -- named tokens -------------------------------------------------------------------------------------------------


def test_tokens_come_from_the_single_variable_the_list_and_a_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    file = tmp_path / 'tokens.json'
    file.write_text(json.dumps({'carol': 'tok-carol'}))
    monkeypatch.setenv('PERPLEXITY_MCP_TOKEN', 'tok-default')
    monkeypatch.setenv('PERPLEXITY_MCP_TOKENS', 'alice:tok-alice, bob:tok-bob')
    monkeypatch.setenv('PERPLEXITY_MCP_TOKENS_FILE', str(file))
    tokens = Tokens.from_config()
    assert tokens is not None
    assert sorted(tokens.names()) == ['alice', 'bob', 'carol', 'default']
    assert [tokens.identify(t) for t in (b'tok-default', b'tok-alice', b'tok-bob', b'tok-carol')] == [
        'default',
        'alice',
        'bob',
        'carol',
    ]
    assert tokens.identify(b'tok-alic') is None and tokens.identify(b'') is None


def test_no_token_configured_means_no_check(monkeypatch: pytest.MonkeyPatch) -> None:
    assert Tokens.from_config() is None


def test_the_file_is_read_again_when_it_changes_and_revoking_one_token_leaves_the_others(tmp_path: Path) -> None:
    file = tmp_path / 'tokens'
    file.write_text('# the team\nalice:tok-alice\nbob:tok-bob\n')
    tokens = Tokens([('PERPLEXITY_MCP_TOKENS', {'ops': 'tok-ops'})], file)
    assert tokens.identify(b'tok-bob') == 'bob'
    write_atomically(file, 'alice:tok-alice\n')
    assert tokens.identify(b'tok-bob') is None
    assert tokens.identify(b'tok-alice') == 'alice' and tokens.identify(b'tok-ops') == 'ops'
    # A file that no longer parses keeps what was read before; once fixed, it is read again.
    write_atomically(file, 'alice tok-alice\n')
    assert tokens.identify(b'tok-alice') == 'alice'
    write_atomically(file, 'alice:tok-alice\ndave:tok-dave\n')
    assert tokens.identify(b'tok-dave') == 'dave'
    # A deleted file revokes every token it held; those from the environment stay.
    file.unlink()
    assert tokens.identify(b'tok-alice') is None and tokens.identify(b'tok-ops') == 'ops'


@pytest.mark.parametrize(
    ('text', 'expected'),
    [
        (f'alice:{SECRET}\nalice:other-token', "the name 'alice' appears twice"),
        (f'alice:{SECRET}\nbob:{SECRET}', "is also the token of 'alice'"),
        (f'al ice:{SECRET}', 'has the name'),
        (f'default:{SECRET}', "the name 'default' is already given elsewhere"),
        ('alice:tok with space', 'empty or contains whitespace'),
        (f'alice {SECRET}', 'entry 1 is not "name:token"'),
        (json.dumps({'alice': 42}), 'is not a string'),
        ('{"alice": ', 'not valid JSON'),
    ],
)
def test_a_misconfiguration_names_the_entry_never_the_token(tmp_path: Path, text: str, expected: str) -> None:
    file = tmp_path / 'tokens'
    file.write_text(text)
    with pytest.raises(TokenConfigError) as caught:
        Tokens([('PERPLEXITY_MCP_TOKEN', {'default': 'tok-default'})], file)
    assert expected in str(caught.value) and SECRET not in str(caught.value)


def test_the_list_variable_takes_name_token_pairs() -> None:
    assert parse_tokens('alice:a:b\n\n# note\nbob:c', 'x') == {'alice': 'a:b', 'bob': 'c'}


@pytest.mark.slow
def test_the_server_refuses_to_start_on_a_tokens_file_it_cannot_use(tmp_path: Path) -> None:
    file = tmp_path / 'tokens'
    file.write_text(f'alice:{SECRET}\nalice:{SECRET}x\n')
    done = subprocess.run(
        [*SERVER, '--transport', 'http', '--port', '0'],
        env=server_env(None, tmp_path, PERPLEXITY_MCP_TOKENS_FILE=str(file)),
        capture_output=True,
        timeout=DEADLINE,
    )
    assert done.returncode == 2
    assert b"the name 'alice' appears twice" in done.stderr and SECRET.encode() not in done.stderr
    missing = subprocess.run(
        [*SERVER, '--transport', 'http', '--port', '0', '--tokens-file', str(tmp_path / 'nope')],
        env=server_env(None, tmp_path),
        capture_output=True,
        timeout=DEADLINE,
    )
    assert missing.returncode == 2 and b'cannot read' in missing.stderr


@pytest.mark.slow
@pytest.mark.anyio
async def test_named_tokens_record_the_caller_and_a_revoked_one_is_refused_without_a_restart(
    emu: Emulator, tmp_path: Path
) -> None:
    file = tmp_path / 'tokens'
    file.write_text('alice:tok-alice-7c1e9a4f\nbob:tok-bob-7c1e9a4f\n')
    env = server_env(
        emu,
        tmp_path,
        PERPLEXITY_MCP_TOKEN='tok-default-7c1e9a4f',
        PERPLEXITY_MCP_TOKENS_FILE=str(file),
        PERPLEXITY_WAIT_SECONDS='20',
    )
    # Named tokens alone protect a non-loopback bind (each strong: 16+ characters, 8+ different ones).
    instance = Instance(env, '--host', '0.0.0.0')
    try:
        instance.wait_listening(DEADLINE)
        question = {'query': 'What does the EU AI Act regulate?', 'effort': 'fast'}
        async with httpx2.AsyncClient(timeout=DEADLINE) as client:
            ids: dict[str, str] = {}
            for token, name in (
                ('tok-alice-7c1e9a4f', 'alice'),
                ('tok-bob-7c1e9a4f', 'bob'),
                ('tok-default-7c1e9a4f', 'default'),
            ):
                outcome = await call_tool(client, instance.url, 'perplexity_research', question, token=token)
                assert outcome.ok, outcome
                ids[name] = outcome.structured['response_id']
            refused = await call_tool(
                client, instance.url, 'perplexity_research', question, token='tok-nobody-7c1e9a4f'
            )
            assert refused.status == 401
            write_atomically(file, 'alice:tok-alice-7c1e9a4f\n')
            revoked = await call_tool(client, instance.url, 'perplexity_research', question, token='tok-bob-7c1e9a4f')
            assert revoked.status == 401
            for token in ('tok-alice-7c1e9a4f', 'tok-default-7c1e9a4f'):
                assert (await call_tool(client, instance.url, 'perplexity_research_list', {}, token=token)).ok
        assert instance.proc.poll() is None  # the same process throughout
    finally:
        instance.stop()
    with Ledger(tmp_path / 'ledger.sqlite3') as ledger:
        for name, response_id in ids.items():
            record = ledger.get(response_id)
            assert record is not None and record.caller == name and record.origin == 'mcp'
        assert ledger.spent_usd(caller='alice') > 0
        assert ledger.spent_usd(caller='alice') + ledger.spent_usd(caller='bob') + ledger.spent_usd(
            caller='default'
        ) == pytest.approx(ledger.spent_usd())


# -- /healthz -----------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_healthz_needs_no_token_and_says_nothing_but_ok(emu: Emulator, tmp_path: Path) -> None:
    instance = Instance(server_env(emu, tmp_path, PERPLEXITY_MCP_TOKEN=SECRET))
    try:
        instance.wait_listening(DEADLINE)
        reply = httpx2.get(instance.health_url, timeout=DEADLINE)
        assert reply.status_code == 200 and reply.json() == {'status': 'ok', 'ledger': 'ok'}
        assert reply.headers['cache-control'] == 'no-store'
        assert httpx2.post(instance.health_url, timeout=DEADLINE).status_code == 405
        assert httpx2.get(instance.url, timeout=DEADLINE).status_code == 401  # the rest still needs the token
    finally:
        instance.stop()


@pytest.mark.slow
def test_healthz_reports_an_unreachable_ledger_without_naming_it(emu: Emulator, tmp_path: Path) -> None:
    url = f'postgresql://research:hunter2@127.0.0.1:{free_port()}/ledger?connect_timeout=1'
    instance = Instance(server_env(emu, tmp_path, PERPLEXITY_LEDGER_URL=url))
    try:
        instance.wait_listening(DEADLINE)
        reply = httpx2.get(instance.health_url, timeout=DEADLINE)
        assert reply.status_code == 503 and reply.json() == {'status': 'unavailable', 'ledger': 'unreachable'}
    finally:
        instance.stop()
    assert 'hunter2' not in ''.join(instance.stderr)


# -- SIGTERM ------------------------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.anyio
async def test_sigterm_hands_off_the_calls_in_flight_and_exits_promptly(emu: Emulator, tmp_path: Path) -> None:
    env = server_env(emu, tmp_path, PERPLEXITY_WAIT_SECONDS='30')
    leaving, staying = Instance(env), Instance(env)
    try:
        leaving.wait_listening(DEADLINE)
        staying.wait_listening(DEADLINE)
        started = 0
        all_started = anyio.Event()

        async def on_progress(message: str) -> None:
            nonlocal started
            if message.startswith('started research run '):
                started += 1
                if started == 3:
                    all_started.set()

        question = {'query': 'A long survey [[emulate: duration=1200]]'}  # 6 s at this emulator's time scale
        outcomes = []
        async with httpx2.AsyncClient(timeout=DEADLINE) as client:

            async def one(n: int) -> None:
                outcome = await call_tool(
                    client, leaving.url, 'perplexity_research', question, progress=f'p{n}', on_progress=on_progress
                )
                outcomes.append((outcome, time.monotonic()))

            async with anyio.create_task_group() as tg:
                for n in range(3):
                    tg.start_soon(one, n)
                with anyio.fail_after(DEADLINE):
                    await all_started.wait()
                signalled = time.monotonic()
                leaving.proc.send_signal(signal.SIGTERM)
            exit_code = await anyio.to_thread.run_sync(lambda: leaving.proc.wait(DEADLINE))
            exited = time.monotonic() - signalled
            # Every call answered, at once, with a hand-off: the run goes on, its id in hand and in the ledger.
            assert len(outcomes) == 3
            for outcome, answered in outcomes:
                assert outcome.ok, outcome
                assert outcome.structured['status'] == 'in_progress' and 'next' in outcome.structured
                assert outcome.structured['response_id'] == outcome.started_id
                assert answered - signalled < 3.0
            assert exited < 10.0 and exit_code == 0  # a requested stop is a success (docs/mcp.md)
            with pytest.raises(httpx2.ConnectError):
                await client.get(leaving.health_url)
            # Any other instance collects them.
            for outcome, _ in outcomes:
                args = {'response_id': outcome.structured['response_id'], 'wait_seconds': 30}
                collected = await call_tool(client, staying.url, 'perplexity_research_result', args)
                assert collected.ok and collected.structured['status'] == 'completed', collected
    finally:
        leaving.stop()
        staying.stop()
    assert 'handing off the calls in flight' in ''.join(leaving.stderr)
