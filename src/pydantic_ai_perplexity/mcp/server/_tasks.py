"""MCP tasks for `perplexity_research`, stateless: the ledger and the API are the task store.

A Perplexity background run already is a task: its id, status, steps and result live upstream, and its row (with the
caller) lives in the ledger. So a task's id is the run's `response_id`, and every task request reads the ledger and
the API afresh: any instance answers for any task, and a task outlives a restart of every instance. A task is the
caller's own (the token's name): another caller gets "task not found", exactly as for an id that never existed.

Both protocol eras, through the MCP SDK's own surfaces and types:

- 2026-07-28: the `io.modelcontextprotocol/tasks` extension (SEP-2663), as an `mcp.server.extension.Extension`:
  `intercept_tool_call` answers a research call with a task (`resultType: "task"`) when the request's capabilities
  declare the extension; `tasks/get` (with the result inlined once done) and `tasks/cancel` are `MethodBinding`s.
- 2025-11-25: the experimental tasks of SEP-1686 (`execution.taskSupport`, `CreateTaskResult`, `tasks/get`,
  `tasks/result`, `tasks/list`, `tasks/cancel`, with `mcp_types`' models). The SDK 2.3 shapes every `tools/call`
  result of that era as a `CallToolResult` (a `CreateTaskResult` has no `content`, so it would fail), and it has no
  hook for the `tasks` capability; so a server middleware (the SDK's `Server.middleware`) answers a task-augmented
  call itself, says `capabilities.tasks` in `initialize` and `execution.taskSupport` in `tools/list`.

A client that asks for no task gets today's plain call, byte for byte.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, cast

import anyio
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.extension import Extension, MethodBinding
from mcp.server.mcpserver import require_client_extension
from mcp.shared.exceptions import MCPError
from mcp_types import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    CallToolRequestParams,
    CallToolResult,
    CancelTaskRequestParams,
    CreateTaskResult,
    GetTaskPayloadRequestParams,
    GetTaskRequestParams,
    ListTasksResult,
    PaginatedRequestParams,
    Task,
    TaskStatus,
    TextContent,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from ..._base.errors import PerplexityError
from ..._core import tool_spec as tools
from ..._ledger import TASK_KEY
from ._failures import error_text
from ._scope import may_reach, request_caller

if TYPE_CHECKING:
    from ..._core.researcher import Researcher
    from ..._domain.results import ResearchResult
    from ..._ledger import RunRecord
    from ...client._models import Response

__all__ = ('EXTENSION', 'LEGACY_TASKS_VERSION', 'POLL_INTERVAL_MS', 'TASK_MARK', 'TTL_MS', 'ResearchTasks')

EXTENSION = 'io.modelcontextprotocol/tasks'
#: The one handshake-era revision with tasks (SEP-1686).
LEGACY_TASKS_VERSION = '2025-11-25'
#: Recorded as the run's `request_id` in the ledger (`request_kind` `task`): this run was started as a task
#: (`tasks/list` lists these).
TASK_MARK = TASK_KEY
#: How long a task is kept, from its creation: a day (the ledger keeps the run longer; the API keeps its result).
TTL_MS = 24 * 3600 * 1000
#: How often a client is asked to poll: a research run takes from seconds (fast) to many minutes (high).
POLL_INTERVAL_MS = 2000
_RELATED = 'io.modelcontextprotocol/related-task'
_PEEK_SECONDS = 1.0
_LULL_SECONDS = 0.05
_LIST_LIMIT = 50

Render = Callable[['ResearchResult'], CallToolResult]
_log = logging.getLogger('pydantic_ai_perplexity.mcp')


def _now() -> str:
    return datetime.now(UTC).isoformat()


def _iso(moment: datetime | None) -> str:
    return moment.astimezone(UTC).isoformat() if moment is not None else _now()


def _caller(ctx: ServerRequestContext[Any, Any]) -> str | None:
    """The caller's name the HTTP front put on the request (its token's), or None (stdio, no tokens)."""
    return request_caller(ctx.request)


def _declared(ctx: ServerRequestContext[Any, Any]) -> bool:
    """Whether this request's client capabilities declare the tasks extension (2026-07-28)."""
    try:
        require_client_extension(ctx, EXTENSION)
    except MCPError:
        return False
    return True


def _not_found() -> MCPError:
    return MCPError(code=INVALID_PARAMS, message='Failed to retrieve task: Task not found')


def _task_status(run_status: str, *, modern: bool) -> TaskStatus:
    """A run's status as a task's: a failed run is `failed` in 2025-11-25, and in 2026-07-28 (where `failed` means a
    JSON-RPC error) a `completed` task whose result reads as the plain call's would."""
    if run_status == 'completed':
        return 'completed'
    if run_status == 'cancelled':
        return 'cancelled'
    if run_status in ('failed', 'incomplete'):
        return 'completed' if modern else 'failed'
    return 'working'


class ResearchTasks(Extension):
    """`perplexity_research` as a task, in both eras; registered by `build_server` (extension and middleware)."""

    identifier = EXTENSION

    def __init__(self, researcher: Callable[[], Awaitable[Researcher]], render: Render) -> None:
        self._researcher = researcher
        self._render = render

    # -- the SDK's surfaces -----------------------------------------------------------------------------------------

    def methods(self) -> Sequence[MethodBinding]:
        legacy = frozenset({LEGACY_TASKS_VERSION})
        return (
            MethodBinding('tasks/get', GetTaskRequestParams, self._get),
            MethodBinding('tasks/cancel', CancelTaskRequestParams, self._cancel),
            MethodBinding('tasks/result', GetTaskPayloadRequestParams, self._result, protocol_versions=legacy),
            MethodBinding('tasks/list', PaginatedRequestParams, self._list, protocol_versions=legacy),
        )

    async def intercept_tool_call(
        self, params: CallToolRequestParams, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        """2026-07-28: a research call from a client that declared the extension becomes a task at once."""
        if params.name != tools.RESEARCH.name or ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            return await call_next(ctx)
        if not _declared(ctx):
            return await call_next(ctx)
        task = await self._create(params.arguments or {}, _caller(ctx))
        if task is None:
            return await call_next(ctx)
        if isinstance(task, CallToolResult):
            return task
        return {'resultType': 'task', **self._modern(task)}

    async def middleware(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        """2025-11-25: the `tasks` capability, `execution.taskSupport`, and a task-augmented research call."""
        if ctx.method == 'initialize':
            return _with_tasks_capability(await call_next(ctx))
        if ctx.protocol_version != LEGACY_TASKS_VERSION:
            return await call_next(ctx)
        if ctx.method == 'tools/list':
            return _with_tasks_listed(await call_next(ctx))
        params: Mapping[str, Any] = ctx.params or {}
        if ctx.method == 'tools/call' and params.get('name') == tools.RESEARCH.name and params.get('task') is not None:
            created = await self._legacy_task(params, ctx)
            if created is not None:
                return created
        return await call_next(ctx)

    async def _legacy_task(
        self, params: Mapping[str, Any], ctx: ServerRequestContext[Any, Any]
    ) -> CreateTaskResult | CallToolResult | None:
        """A task-augmented research call (2025-11-25): its task, the plain call's error, or None to let it answer."""
        arguments = params.get('arguments')
        given = cast('dict[str, Any]', arguments) if isinstance(arguments, dict) else {}
        task = await self._create(given, _caller(ctx))
        if isinstance(task, CallToolResult):
            return task
        if task is not None:
            return CreateTaskResult(task=task)
        return None

    # -- the methods --------------------------------------------------------------------------------------------

    async def _create(self, arguments: Mapping[str, Any], caller: str | None) -> Task | CallToolResult | None:
        """Start the run (recorded in the ledger, with the caller, before this returns) and its task.

        None when the call cannot be a task (bad arguments, no ledger): then the plain call answers, in its own words.
        A run that could not start (budget, API) is the plain call's error result, without a second attempt.
        """
        r = await self._researcher()
        if r.ledger is None:
            return None
        try:
            args = tools.RESEARCH.parse_mcp(arguments)
        except Exception:
            return None
        given = args.model_dump(exclude={'query'}, exclude_none=True)
        try:
            started = await r.start(args.query, caller=caller, request_id=TASK_MARK, **given)
        except Exception as exc:
            if not isinstance(exc, PerplexityError):
                _log.error('Unexpected %s starting a task (masked for the client)', type(exc).__name__, exc_info=exc)
            return CallToolResult(content=[TextContent(type='text', text=error_text(exc))], is_error=True)
        with anyio.CancelScope(shield=True):
            await r.flush()  # durably created: a tasks/get reaching any instance now finds it
        created = _iso(started.created_at)
        return Task(
            task_id=started.response_id,
            status='working',
            status_message=f'Research run {started.response_id} started.',
            created_at=created,
            last_updated_at=created,
            ttl=TTL_MS,
            poll_interval=POLL_INTERVAL_MS,
        )

    async def _record(self, ctx: ServerRequestContext[Any, Any], task_id: str) -> tuple[Researcher, RunRecord]:
        """The caller's own task run, or invalid params ("task not found") for any other id, never saying which."""
        from ..._domain.options import check_id

        r = await self._researcher()
        if r.ledger is None:
            raise _not_found()
        try:
            run_id = check_id(task_id)
        except Exception:
            raise _not_found() from None
        record = await r.ledger.aio.get(run_id)
        if record is None or record.request_kind != 'task' or not may_reach(_caller(ctx), record):
            raise _not_found()
        return r, record

    async def _state(self, r: Researcher, record: RunRecord, *, modern: bool) -> tuple[Task, ResearchResult | None]:
        """The task now, from the API: its status and latest step, and the run's result once it has ended."""
        from ...client._models import TERMINAL_STATUSES

        task_id = record.response_id
        try:
            response = await r.client.retrieve(task_id)
            result: ResearchResult | None = None
            if response.status not in TERMINAL_STATUSES:
                latest = _snapshot_step(response) or await _latest_step(r, task_id)
                message = latest or f'Research run {task_id} is {response.status}.'
            else:
                result = await r.collect(task_id, wait_seconds=0)
                message = f'Research run {task_id} {result.status}.'
        except PerplexityError as exc:
            raise MCPError(code=INTERNAL_ERROR, message=error_text(exc)) from None
        status = _task_status(result.status if result is not None else response.status, modern=modern)
        task = Task(
            task_id=task_id,
            status=status,
            status_message=' '.join(message.split())[:300],
            created_at=_iso(record.created_at),
            last_updated_at=_iso(result.completed_at if result is not None else None),
            ttl=TTL_MS,
            poll_interval=POLL_INTERVAL_MS,
        )
        return task, result

    async def _get(self, ctx: ServerRequestContext[Any, Any], params: GetTaskRequestParams) -> HandlerResult:
        modern = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
        if modern:  # -32021 for a client that did not declare the extension
            require_client_extension(ctx, EXTENSION)
        r, record = await self._record(ctx, params.task_id)
        task, result = await self._state(r, record, modern=modern)
        if not modern:
            return task.model_dump(by_alias=True, mode='json', exclude_none=True)
        answer: dict[str, Any] = {'resultType': 'complete', **self._modern(task)}
        if result is not None and task.status == 'completed':
            answer['result'] = self._render(result).model_dump(by_alias=True, mode='json', exclude_none=True)
        return answer

    async def _cancel(self, ctx: ServerRequestContext[Any, Any], params: CancelTaskRequestParams) -> HandlerResult:
        """Cancel the run upstream (it stops billing), from whichever instance the request reached."""
        modern = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
        if modern:
            require_client_extension(ctx, EXTENSION)
        r, record = await self._record(ctx, params.task_id)
        try:
            with anyio.CancelScope(shield=True):
                await r.cancel(record.response_id)
        except PerplexityError as exc:
            raise MCPError(code=INTERNAL_ERROR, message=error_text(exc)) from None
        if modern:
            return {'resultType': 'complete'}
        task, _ = await self._state(r, record, modern=False)
        return task.model_dump(by_alias=True, mode='json', exclude_none=True)

    async def _result(self, ctx: ServerRequestContext[Any, Any], params: GetTaskPayloadRequestParams) -> HandlerResult:
        """2025-11-25 `tasks/result`: waits for the end of the run, then the plain call's `CallToolResult`."""
        r, record = await self._record(ctx, params.task_id)
        result = await r.collect(record.response_id)
        while not result.done:
            result = await r.collect(record.response_id)
        answer = self._render(result).model_dump(by_alias=True, mode='json', exclude_none=True)
        answer['_meta'] = {**(answer.get('_meta') or {}), _RELATED: {'taskId': record.response_id}}
        return answer

    async def _list(self, ctx: ServerRequestContext[Any, Any], params: PaginatedRequestParams) -> HandlerResult:
        """2025-11-25 `tasks/list`: the caller's tasks, newest first, from the ledger (unfinished ones refreshed)."""
        from ..._core.reconcile import reconcile

        r = await self._researcher()
        if r.ledger is None:
            return ListTasksResult(tasks=[])
        ledger, caller = r.ledger, _caller(ctx)
        records = await ledger.aio.list(caller=caller, request_id=TASK_MARK, limit=_LIST_LIMIT)
        with contextlib.suppress(Exception):
            updated = await reconcile(ledger, r.client, records, timeout=5.0)
            records = [updated.get(rec.response_id, rec) for rec in records]
        return ListTasksResult(
            tasks=[
                Task(
                    task_id=rec.response_id,
                    status=_task_status(rec.status, modern=False),
                    created_at=_iso(rec.created_at),
                    last_updated_at=_iso(rec.updated_at),
                    ttl=TTL_MS,
                    poll_interval=POLL_INTERVAL_MS,
                )
                for rec in records
                if may_reach(caller, rec)
            ]
        )

    @staticmethod
    def _modern(task: Task) -> dict[str, Any]:
        """A task in 2026-07-28's words (`ttlMs`, `pollIntervalMs`)."""
        fields = task.model_dump(by_alias=True, mode='json', exclude_none=True)
        fields.pop('ttl', None)
        fields.pop('pollInterval', None)
        return {**fields, 'ttlMs': task.ttl, 'pollIntervalMs': task.poll_interval}


def _snapshot_step(response: Response) -> str | None:
    """The run's latest step from its running snapshot (the search and fetch items reached so far), or None if the
    snapshot shows none (an API, or an emulator, that keeps `output` empty until the end).

    Live fact: cfdude/mcp-perplexity-pro tests/fixtures/agent_background_in_progress.json, captured 2026-10-09.
    """
    from ..._domain.steps import StepReducer

    steps = [s for s in StepReducer(response.id).snapshot(response, live=True) if s.shown]
    return f'{steps[-1].detail} ({steps[-1].progress.summary()})' if steps else None


async def _latest_step(r: Researcher, task_id: str) -> str | None:
    """The run's latest step, read from its event stream, when its snapshot shows none (`_snapshot_step`).

    Stateless, so the stream is replayed from the start: its backlog arrives at once, and the read stops at the first
    lull (or after a second in all), with the last step seen. None if the stream said nothing in time.
    """
    from ..._domain.steps import StepReducer

    reducer = StepReducer(task_id)
    latest: str | None = None
    stream = r.client.resume(task_id, starting_after=0)
    try:
        with anyio.move_on_after(_PEEK_SECONDS):
            wait = _PEEK_SECONDS
            while True:
                event: Any = None
                with anyio.move_on_after(wait):
                    event = await stream.__anext__()
                if event is None:  # a lull: the backlog is over
                    break
                step = reducer.observe(event)
                if step is not None and step.shown:
                    latest = f'{step.detail} ({step.progress.summary()})'
                wait = _LULL_SECONDS
    except (StopAsyncIteration, PerplexityError):
        pass
    finally:
        with anyio.CancelScope(shield=True), contextlib.suppress(Exception):
            await stream.aclose()
    return latest


def _with_tasks_capability(result: HandlerResult) -> HandlerResult:
    """An `initialize` answer that chose the 2025-11-25 protocol, with the `tasks` capability added."""
    if isinstance(result, dict) and result.get('protocolVersion') == LEGACY_TASKS_VERSION:
        capabilities: dict[str, Any] = dict(result.get('capabilities') or {})
        capabilities['tasks'] = {'list': {}, 'cancel': {}, 'requests': {'tools': {'call': {}}}}
        result = {**result, 'capabilities': capabilities}
    return result


def _with_tasks_listed(result: HandlerResult) -> HandlerResult:
    """A `tools/list` answer with each tool's `execution.taskSupport`."""
    if isinstance(result, dict):
        listed: list[Any] = list(result.get('tools') or [])
        result = {**result, 'tools': [_with_task_support(tool) for tool in listed]}
    return result


def _with_task_support(tool: Any) -> Any:
    """`perplexity_research` says a client may run it as a task; the other tools stay plain calls."""
    if isinstance(tool, dict) and cast('dict[str, Any]', tool).get('name') == tools.RESEARCH.name:
        return {**cast('dict[str, Any]', tool), 'execution': {'taskSupport': 'optional'}}
    return cast(Any, tool)
