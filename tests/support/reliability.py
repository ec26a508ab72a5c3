"""Helpers of the reliability suite: the fault table, an emulator that logs every create, the ways in, the report.

Every test of `tests/reliability` talks to loopback only: an in-process `Emulator`, MCP servers and CLI runs as
real subprocesses pointed at it. Tests add rows to the report (`record`) only after their assertions passed; the
session writes them to `benchmarks/results/reliability.json`, which `benchmarks/reliability_report.py` renders as
the README's "Reliability" section.
"""

from __future__ import annotations

import inspect
import json
import os
import platform
import re
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx2

from pydantic_ai_perplexity.emulator import Emulator
from support.mcp_servers import DEADLINE, server_env

ROOT = Path(__file__).resolve().parents[2]
REPORT_PATH = ROOT / 'benchmarks' / 'results' / 'reliability.json'
CLI = [sys.executable, '-m', 'pydantic_ai_perplexity.cli']
TERMINAL = ('completed', 'failed', 'incomplete', 'cancelled')
RID = re.compile(r'resp_[0-9a-f-]{36}')


# -- the report ----------------------------------------------------------------------------------------------------

_rows: list[dict[str, Any]] = []
_lock = threading.Lock()


def record(section: str, surface: str, case: str, **fields: Any) -> None:
    """Add one row to the report: what was done (`case`), through which way in (`surface`), and what it showed."""
    with _lock:
        _rows.append({'section': section, 'surface': surface, 'case': case, **fields})


def write_report(duration_s: float, outcome: dict[str, int], *, complete: bool) -> Path | None:
    """Write the rows gathered in this session (nothing when no reliability test ran).

    Only a session that ran the whole suite writes `reliability.json` (what the README is made from); a part of it
    writes `reliability-partial.json`, so running one file never replaces the full report with a fragment.
    """
    with _lock:
        rows = list(_rows)
    if not rows:
        return None
    path = REPORT_PATH if complete else REPORT_PATH.with_name('reliability-partial.json')
    path.parent.mkdir(parents=True, exist_ok=True)
    report = {
        'generated_at': datetime.now(UTC).isoformat(timespec='seconds'),
        'python': platform.python_version(),
        'platform': f'{platform.system()} {platform.machine()}, {os.cpu_count()} CPUs',
        'duration_s': round(duration_s, 1),
        'tests': outcome,
        'rows': rows,
    }
    path.write_text(json.dumps(report, indent=1) + '\n', encoding='utf-8')
    return path


# -- the faults ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Fault:
    """One fault directive and what a research call that meets it must end in.

    `attempts` is how many create requests reach the emulator, `billed` how many of them start a (billed) run:
    never more than one, whatever was retried.
    """

    directive: str
    outcome: str  # completed | failed | incomplete | error
    attempts: int = 1
    billed: int = 1
    label: str = ''
    drops: bool = False

    @property
    def name(self) -> str:
        return self.label or self.directive.replace(', retry_after=0.01', '')


#: Every fault the emulator can inject into a research call, alone and combined. `retry_after=0.01` only keeps the
#: suite fast (the emulator's default `Retry-After: 0` makes the client back off by half a second).
FAULTS: tuple[Fault, ...] = (
    Fault('429x2, retry_after=0.01', 'completed', attempts=3),
    Fault('503x1, retry_after=0.01', 'completed', attempts=2),
    Fault('500x1', 'error', billed=0),
    Fault('502x1', 'error', billed=0),
    Fault('504x1', 'error', billed=0),
    Fault('malformed', 'error', billed=0),
    Fault('slow=0.3', 'completed'),
    Fault('drop@3', 'completed', drops=True),
    Fault('drop@9', 'completed', drops=True),
    Fault('500x2@retrieve', 'completed'),
    Fault('502x1@retrieve', 'completed'),
    Fault('503x2@retrieve, retry_after=0.01', 'completed'),
    Fault('504x1@retrieve', 'completed'),
    Fault('429x2@retrieve, retry_after=0.01', 'completed'),
    Fault('fail', 'failed'),
    Fault('incomplete', 'incomplete'),
    Fault('mcp', 'completed'),
    Fault('inject', 'completed'),
    Fault('duration=40', 'completed', label='duration=40 (a long run)'),
    Fault('429x1, drop@4, 500x1@retrieve, retry_after=0.01', 'completed', attempts=2, drops=True),
    Fault('503x1, fail, retry_after=0.01', 'failed', attempts=2),
)


def check_outcome(fault: Fault, outcome: str, text: str) -> None:
    """A research call's answer is the fault's outcome: a result with that status, or a clear failure."""
    assert 'Traceback' not in text
    if fault.outcome == 'error':
        assert outcome == 'failed', (fault, text)
        assert text.startswith('Research failed:'), text
        # The create may have reached the API: the failure says a run may exist and was not re-sent.
        assert 'not re-sent' in text or 'not sent again' in text or 'was not retried' in text, text
        return
    assert outcome == 'success', (fault, outcome, text)
    assert f'status: {fault.outcome}' in text, (fault, text)
    assert RID.search(text), text
    if fault.outcome == 'completed':
        assert 'Sources:' in text and '[1]' in text, text
    else:
        assert f'ended {fault.outcome}' in text, text


def describe(fault: Fault, text: str) -> str:
    if fault.outcome != 'error':
        return f'result: {fault.outcome}'
    if status := re.search(r'HTTP (\d{3})', text):
        return f'clear error: HTTP {status[1]}, not re-sent'
    return 'clear error: body not JSON, not re-sent'


def assert_attempt_kept(rows: list[Any], tag: str) -> Any:
    """A create that may have started a run left a row: its question, a reservation, and why."""
    from pydantic_ai_perplexity._ledger import RESERVED, is_provisional

    [row] = [r for r in rows if f'({tag})' in r.query]
    assert is_provisional(row.response_id) and row.status == RESERVED and row.error, row
    return row


def query_for(tag: str, fault: Fault, question: str = 'What does the EU AI Act regulate?') -> str:
    """A question carrying the fault, unique per tag (the emulator counts in-text faults per exact text)."""
    return f'{question} ({tag}) [[emulate: {fault.directive}]]'


# -- an emulator that logs every create ----------------------------------------------------------------------------


@dataclass
class Create:
    """One create request as the emulator saw it: its question, the status answered, the run's id if one started."""

    text: str
    status: int = 0
    response_id: str | None = None


@dataclass
class CreateLog:
    """ASGI middleware in front of the emulator's app: records each create's question, status and run id."""

    app: Any
    creates: list[Create] = field(default_factory=list[Create])

    def matching(self, tag: str) -> list[Create]:
        """The creates whose question carries `(tag)` (as `query_for` writes it)."""
        return [c for c in self.creates if f'({tag})' in c.text]

    def billed(self, tag: str) -> list[Create]:
        """The creates with `(tag)` that started a run (answered 200 with the run's id)."""
        return [c for c in self.matching(tag) if c.status == 200 and c.response_id is not None]

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        is_create = (
            scope['type'] == 'http'
            and scope['method'] == 'POST'
            and scope['path'].rstrip('/') in ('/v1/agent', '/v1/responses')
        )
        if not is_create:
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        while True:
            message = await receive()
            chunks.append(message.get('body', b''))
            if message['type'] != 'http.request' or not message.get('more_body'):
                break
        body = b''.join(chunks)
        try:
            text = _input_text(json.loads(body))
        except ValueError:
            text = body.decode(errors='replace')
        entry = Create(text)
        self.creates.append(entry)
        replayed = False
        answer: list[bytes] = []

        async def replay() -> Any:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {'type': 'http.request', 'body': body, 'more_body': False}
            return await receive()

        async def spy(message: Any) -> None:
            if message['type'] == 'http.response.start':
                entry.status = int(message['status'])
            elif message['type'] == 'http.response.body' and entry.status == 200:
                answer.append(message.get('body', b''))
                if not message.get('more_body'):
                    entry.response_id = _run_id(b''.join(answer))
            await send(message)

        await self.app(scope, replay, spy)


def _input_text(body: Any) -> str:
    value = body.get('input', '') if isinstance(body, dict) else ''
    if isinstance(value, str):
        return value
    return json.dumps(value)


def _run_id(body: bytes) -> str | None:
    try:
        data = json.loads(body)
    except ValueError:  # an event stream, or the `malformed` fault
        for line in body.decode(errors='replace').splitlines():
            if line.startswith('data: ') and '"id"' in line:
                event = json.loads(line[6:])
                return (event.get('response') or {}).get('id')
        return None
    return data.get('id') if isinstance(data, dict) else None


@contextmanager
def logged_emulator(**settings: Any) -> Iterator[tuple[Emulator, CreateLog]]:
    """An emulator (fast time scale unless given) whose every create is logged."""
    settings.setdefault('time_scale', 0.002)
    emu = Emulator(**settings)
    log = CreateLog(emu.app)
    emu.app = log  # served in place of the bare app; the state stays where it was
    with emu:
        yield emu, log


def upstream_runs(emu: Emulator) -> dict[str, Any]:
    """The runs the emulator holds, by id: what the API would bill."""
    app = emu.app.app if isinstance(emu.app, CreateLog) else emu.app
    return app.state.emulator.runs


def script_seqs(emu: Emulator, response_id: str) -> list[int]:
    """The sequence numbers of every event the emulator scripted for a run, in order."""
    return [step.seq for step in upstream_runs(emu)[response_id].steps]


def expected_steps(emu: Emulator, response_id: str) -> list[tuple[str, str]]:
    """The research steps a caller must see for a run, each once: (step, progress summary), from its script."""
    from pydantic_ai_perplexity._domain.steps import StepReducer
    from pydantic_ai_perplexity.client._models import parse_event

    reducer = StepReducer(response_id)
    steps: list[tuple[str, str]] = []
    for step in upstream_runs(emu)[response_id].steps:
        if step.seq == 0:  # `response.created`: waiting starts after it
            continue
        made = reducer.observe(parse_event(step.event))
        if made is not None and made.shown:
            steps.append((made.detail, made.progress.summary()))
    return steps


def mcp_progress_messages(emu: Emulator, response_id: str) -> list[str]:
    """The progress notifications the MCP server must send for a run, in order, each once (after 'started')."""
    from pydantic_ai_perplexity._present.model_text import plain

    return [f'{plain(step, 200)} ({summary}) · {response_id}' for step, summary in expected_steps(emu, response_id)]


def stream_gets(emu: Emulator, response_id: str) -> int:
    """How many stream connections (the first and every resume) were opened on a run."""
    return sum(
        1 for r in emu.requests if r.method == 'GET' and r.path.endswith(response_id) and 'stream=true' in r.query
    )


# -- the toolset ---------------------------------------------------------------------------------------------------


class EventSpy:
    """Wraps a client's `wait` so every event it hands on is recorded by run: to check that each comes once."""

    def __init__(self, client: Any) -> None:
        self.seqs: dict[str, list[int]] = defaultdict(list)
        original = client.wait

        async def wait(response_id: str, *, on_event: Any = None, **kw: Any) -> Any:
            async def spy(event: Any) -> None:
                self.seqs[response_id].append(event.sequence_number)
                if on_event is not None:
                    outcome = on_event(event)
                    if inspect.isawaitable(outcome):
                        await outcome

            return await original(response_id, on_event=spy, **kw)

        client.wait = wait

    def assert_exactly_once(self, emu: Emulator, response_id: str) -> int:
        """Every event of the run from the first one seen reached the caller once, in order; returns the count."""
        seen = self.seqs[response_id]
        assert seen, f'no event of {response_id} was seen'
        assert seen == sorted(set(seen)), f'an event came twice or out of order: {seen}'
        script = script_seqs(emu, response_id)
        assert seen[0] <= script[1], f'events were missed at the start: {seen[:3]} vs {script[:3]}'
        assert seen == [s for s in script if s >= seen[0]], f'events were missed: {seen} vs {script}'
        return len(seen)


async def call_tools(toolset: Any, calls: Sequence[tuple[str, dict[str, Any] | str]]) -> list[Any]:
    """Have a scripted model make `calls` in one response (run concurrently); the parts answering each, in order.

    Each answer is a `ToolReturnPart` (`outcome` success or failed) or a `RetryPromptPart`; anything else the
    tool raised would end the agent run with that exception.
    """
    from pydantic_ai import Agent
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

    parts = [ToolCallPart(name, args, tool_call_id=f'call-{i}') for i, (name, args) in enumerate(calls)]

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(parts=list(parts))
        return ModelResponse(parts=[TextPart('done')])

    result = await Agent(FunctionModel(respond), toolsets=[toolset]).run('go')
    answers = {
        p.tool_call_id: p
        for m in result.all_messages()
        if isinstance(m, ModelRequest)
        for p in m.parts
        if isinstance(p, ToolReturnPart | RetryPromptPart)
    }
    return [answers[p.tool_call_id] for p in parts]


def outcome_of(part: Any) -> str:
    """`success`, `failed` (a clear failure the model reads) or `retry` (a prompt to fix the call)."""
    from pydantic_ai.messages import RetryPromptPart

    if isinstance(part, RetryPromptPart) or part.outcome == 'retried':
        return 'retry'
    return str(part.outcome)


def text_of_part(part: Any) -> str:
    from pydantic_ai.messages import RetryPromptPart

    if isinstance(part, RetryPromptPart):
        return part.model_response()
    return part.content if isinstance(part.content, str) else part.model_response_str()


# -- MCP over HTTP -------------------------------------------------------------------------------------------------


def rpc_messages(reply: httpx2.Response) -> list[dict[str, Any]]:
    """The JSON-RPC messages of an MCP HTTP answer (a JSON body or an SSE stream); asserts each is well-formed."""
    kind = reply.headers.get('content-type', '')
    if kind.startswith('text/event-stream'):
        # SSE lines end at CR or LF only (str.splitlines would also split inside JSON at U+0085 or U+2028).
        lines = reply.text.replace('\r\n', '\n').replace('\r', '\n').split('\n')
        messages = [json.loads(line[5:]) for line in lines if line.startswith('data:')]
    elif reply.content:
        body = json.loads(reply.content)
        messages = body if isinstance(body, list) else [body]
    else:
        messages = []
    for message in messages:
        assert_well_formed(message)
    return messages


def assert_well_formed(message: Any) -> None:
    """A JSON-RPC 2.0 message: a result or an error (with an int code and a message), or a notification."""
    assert isinstance(message, dict) and message.get('jsonrpc') == '2.0', message
    if 'method' in message:
        assert 'id' not in message or message['id'] is not None, message
        return
    assert ('result' in message) != ('error' in message), message
    if 'error' in message:
        error = message['error']
        assert isinstance(error.get('code'), int) and isinstance(error.get('message'), str), message


def final_reply(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """The response among `messages` (the SSE stream may carry progress notifications before it)."""
    [reply] = [m for m in messages if 'method' not in m]
    return reply


def tool_call(name: str, arguments: Any, request_id: Any = 1, **meta: Any) -> dict[str, Any]:
    params: dict[str, Any] = {'name': name, 'arguments': arguments}
    if meta:
        params['_meta'] = meta
    return {'jsonrpc': '2.0', 'id': request_id, 'method': 'tools/call', 'params': params}


# -- the CLI -------------------------------------------------------------------------------------------------------


def start_cli(args: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
    """`python -m pydantic_ai_perplexity.cli <args>` with its output captured."""
    return subprocess.Popen(
        [*CLI, *args], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    )


def cli_env(emu: Emulator, state_dir: Path, **extra: str) -> dict[str, str]:
    return server_env(emu, state_dir, **extra)


# -- fuzzing -------------------------------------------------------------------------------------------------------


def arguments_from_schema(schema: dict[str, Any]) -> Any:
    """A strategy for valid arguments of a tool: an object of its `properties`, every value from its own schema.

    `hypothesis_jsonschema.from_schema` draws each value; the object around them is assembled here, because its
    object generation uses a Hypothesis internal (`many.more`) that the locked Hypothesis no longer has.
    """
    from hypothesis import strategies as st
    from hypothesis_jsonschema import from_schema

    properties: dict[str, Any] = schema.get('properties', {})
    required = set(schema.get('required', ()))
    values = {name: from_schema(_without_annotations(sub)) for name, sub in properties.items()}
    return st.fixed_dictionaries(
        {k: v for k, v in values.items() if k in required},
        optional={k: v for k, v in values.items() if k not in required},
    )


def _without_annotations(schema: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in schema.items() if k not in ('default', 'description', 'title', 'examples')}


def json_values(max_leaves: int = 12) -> Any:
    """Any JSON value: nested lists and objects of junk, huge numbers, unicode."""
    from hypothesis import strategies as st

    leaves = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(2**80), max_value=2**80),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(max_size=40),
    )
    return st.recursive(
        leaves,
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
        max_leaves=max_leaves,
    )


# -- waiting -------------------------------------------------------------------------------------------------------


def until(check: Callable[[], Any], timeout: float = DEADLINE, what: str = 'condition') -> Any:
    """Poll `check` until it returns something truthy; fail at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f'{what} not met within {timeout} s'
        time.sleep(0.01)


def percentile(values: Sequence[float], q: float) -> float:
    """The q-quantile (0..1) of `values`, nearest rank."""
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]
