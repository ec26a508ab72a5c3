"""The MCP server's tools and resources: thin adapters from MCP calls to `Researcher` and `model_text.py`.

Nothing here speaks HTTP or knows Perplexity's wire format. Every call goes to one `Researcher` (which owns the
HTTP client, the ledger and the budget, and reads `PERPLEXITY_API_KEY` / `PERPLEXITY_BASE_URL` when it is made),
and every text a model reads comes from `_present/model_text.py`, exactly as in `PerplexityToolset`. The research
stack is imported on the first tool call, in a worker thread, never at start-up.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import anyio.to_thread
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError
from mcp.server.mcpserver.tools import Tool
from mcp.server.mcpserver.utilities.func_metadata import ArgModelBase, FuncMetadata
from mcp_types import CallToolResult, Icon, TextContent, ToolAnnotations
from pydantic import create_model

from ..._base.errors import InvalidArgumentError, PerplexityError
from ..._base.version import __version__
from ..._core import tool_spec as tools
from ..._core.tool_spec import ResearchOut
from ..._domain.options import check_id
from ..._domain.settings import DEFAULT_MCP_WAIT_SECONDS
from . import _identity as identity
from ._cancels import RemoteCancels, cancel_upstream, request_key
from ._failures import error_text
from ._scope import reach, request_caller
from ._skills import SKILL_URI, SkillsExtension, skill_text
from ._tasks import ResearchTasks

if TYPE_CHECKING:
    from ..._core.researcher import Researcher
    from ..._domain.results import ResearchResult
    from ..._domain.steps import Step

__all__ = ('DEFAULT_WAIT_SECONDS', 'SERVER_NAME', 'Drain', 'build_server', 'caller_of')

_log = logging.getLogger('pydantic_ai_perplexity.mcp')
_T = TypeVar('_T')

#: The server's wait budget when neither `wait_seconds` nor `PERPLEXITY_WAIT_SECONDS` is given (see `settings`).
DEFAULT_WAIT_SECONDS = DEFAULT_MCP_WAIT_SECONDS
SERVER_NAME = identity.SERVER_NAME
RUN_URI = 'perplexity://runs/{response_id}'
_CANCEL_GRACE_SECONDS = 15.0
#: The tools' instructions, as `PerplexityToolset` gives them (both come from `_core/tool_spec.py`).
INSTRUCTIONS = tools.INSTRUCTIONS


class Drain:
    """Hands off every research wait at once when the server shuts down, and any wait that begins afterwards.

    `start()` is called on the event loop's thread (the HTTP server schedules it there on SIGTERM). A wait it cuts
    short answers as a hand-off with its `response_id`, which is in the ledger already, so the run goes on and any
    instance collects it. A run is never cancelled by a shutdown.
    """

    def __init__(self) -> None:
        self.draining = False
        self._waits: set[anyio.CancelScope] = set()

    def start(self) -> None:
        self.draining = True
        for scope in list(self._waits):
            scope.cancel()

    def guard(self) -> _Wait:
        """Around one wait: cut short (the block ends quietly) when the drain starts, at once if it has."""
        return _Wait(self)


class _Wait:
    def __init__(self, drain: Drain) -> None:
        self._drain = drain
        self._scope = anyio.CancelScope()

    def __enter__(self) -> anyio.CancelScope:
        if self._drain.draining:
            self._scope.cancel()
        self._drain._waits.add(self._scope)  # pyright: ignore[reportPrivateUsage]
        return self._scope.__enter__()

    def __exit__(self, *exc_info: Any) -> bool:
        self._drain._waits.discard(self._scope)  # pyright: ignore[reportPrivateUsage]
        return bool(self._scope.__exit__(*exc_info))


def caller_of(ctx: Context[Any, Any]) -> str | None:
    """The caller's name the HTTP front put on the request (its bearer token's), or None (stdio, no tokens)."""
    return request_caller(ctx.request_context.request)


class _Runtime:
    """What the tools share: one `Researcher`, made on the first call (that is when the research stack loads)."""

    def __init__(
        self,
        researcher: Researcher | None,
        wait_seconds: float | None,
        spotlight: bool,
        max_answer_chars: int | None,
        drain: Drain | None = None,
    ) -> None:
        self._researcher = researcher
        self.drain = drain or Drain()
        self._owned = researcher is None
        self._wait_seconds = wait_seconds
        self.spotlight = spotlight
        self.render_options: dict[str, Any] = {'spotlight': spotlight}
        if max_answer_chars is not None:
            self.render_options['max_answer_chars'] = max_answer_chars
        self._lock = anyio.Lock()

    async def researcher(self) -> Researcher:
        if self._researcher is None:
            async with self._lock:
                if self._researcher is None:
                    self._researcher = await anyio.to_thread.run_sync(self._make)
        return self._researcher

    def _make(self) -> Researcher:
        from ..._core.researcher import Researcher
        from ..._domain.settings import wait_budget

        # The MCP way in waits its own budget (55 s unless given or set): refused here, as everywhere, if bad.
        return Researcher(origin='mcp', wait_seconds=wait_budget(given=self._wait_seconds, mcp=True))

    async def aclose(self) -> None:
        if self._owned and self._researcher is not None:
            await self._researcher.aclose()


def _text(text: str, *, error: bool = False, structured: dict[str, Any] | None = None) -> CallToolResult:
    return CallToolResult(content=[TextContent(type='text', text=text)], structured_content=structured, is_error=error)


async def _guarded(work: Callable[[], Awaitable[CallToolResult]]) -> CallToolResult:
    """Run a tool body; a failure becomes an `isError` result with clear text (unexpected ones masked)."""
    try:
        return await work()
    except Exception as exc:
        if not isinstance(exc, PerplexityError):
            _log.error('Unexpected %s in a tool call (masked for the client)', type(exc).__name__, exc_info=exc)
        return _text(error_text(exc), error=True)


_Body = Callable[[Context[Any, Any], Any], Awaitable[CallToolResult]]


def _rendered(spec: tools.ToolSpec, body: _Body) -> Tool:
    """The MCP tool of a spec: its name, description, hints, input schema (`parameters`, what clients see) and output
    schema, declared as the SDK's `Tool` fields; arguments checked by the spec.

    The SDK reads the call with an argument model of untyped fields (so it passes every argument on as sent, without
    its own messages); `ToolSpec.parse_mcp` checks the call, in the project's words.
    """

    async def call(ctx: Context[Any, Any], **arguments: Any) -> CallToolResult:
        async def work() -> CallToolResult:
            return await body(ctx, spec.parse_mcp(arguments))

        return await _guarded(work)

    # Every argument the spec checks, also those a lean schema leaves out: a model that sends one is understood.
    fields: dict[str, Any] = dict.fromkeys(spec.args.model_fields, (Any, None))
    arguments = create_model(f'{spec.name}Arguments', __base__=ArgModelBase, **fields)
    # The lean list has no output schema (most of its size); the structured content is sent all the same.
    output = ResearchOut if spec.structured and not spec.lean else None
    hints = spec.hints
    annotations = ToolAnnotations(
        title=hints.title,
        read_only_hint=hints.read_only,
        destructive_hint=hints.destructive,
        idempotent_hint=hints.idempotent,
        open_world_hint=hints.open_world,
    )
    return Tool(
        fn=call,
        name=spec.name,
        title=None,
        description=spec.description,
        parameters=spec.schema,
        fn_metadata=FuncMetadata(arg_model=arguments, output_model=output),
        is_async=True,
        context_kwarg='ctx',
        annotations=annotations,
    )


def http_request_key(ctx: Context[Any, Any]) -> str | None:
    """The key a research call over HTTP records with its run (`_cancels.request_key`), or None over stdio."""
    scope = getattr(ctx.request_context.request, 'scope', None)
    request_id = ctx.request_context.request_id
    if not isinstance(scope, dict) or isinstance(request_id, bool) or not isinstance(request_id, int | str):
        return None
    return request_key(request_id)


def peer_cancelled(ctx: Context[Any, Any]) -> bool:
    """Whether the client sent `notifications/cancelled` for this call (as opposed to a disconnect or shutdown).

    The SDK records it on the request's dispatch context, which `MCPServer`'s `Context` does not expose yet; if
    that ever moves, this answers False and the run simply goes on (it is never cancelled by mistake).
    """
    from ._sdk import cancel_requested

    return cancel_requested(ctx.request_context.session)


class _Progress:
    """The progress notifications of one call (no-ops without a progress token): one per research step, and a
    heartbeat when none was sent for `every` seconds, so that clients with an idle timeout keep a quiet call.

    Values rise by one per notification: `searching: heat pumps (1 search, 0 results) · resp_…`.
    """

    def __init__(self, ctx: Context[Any, Any], every: float) -> None:
        self._ctx = ctx
        self._every = every
        self._count = 0
        self._last = anyio.current_time()
        self._summary = 'no step yet'
        self.response_id = ''

    async def send(self, message: str) -> None:
        self._last = anyio.current_time()
        count, self._count = self._count, self._count + 1
        with contextlib.suppress(Exception):  # a client that went away must not stop the research
            await self._ctx.report_progress(count, None, message)

    async def step(self, step: Step) -> None:
        from ..._present.model_text import plain

        self.response_id = step.response_id
        self._summary = step.progress.summary()
        await self.send(f'{plain(step.detail, 200)} ({self._summary}) · {step.response_id}')

    async def _beat(self) -> None:
        while True:
            await anyio.sleep(max(0.0, self._last + self._every - anyio.current_time()))
            if anyio.current_time() - self._last >= self._every:
                await self.send(f'still researching ({self._summary}) · {self.response_id or "starting the run"}')

    async def around(self, call: Callable[[], Awaitable[_T]]) -> _T:
        """`call()`, with the heartbeat going while it runs."""
        answer: list[_T] = []
        failure: list[Exception] = []
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._beat)
            try:
                answer.append(await call())
            except Exception as exc:  # raised as it is below, not inside the task group's exception group
                failure.append(exc)
            finally:
                tg.cancel_scope.cancel()
        if failure:
            raise failure[0]
        return answer[0]


def build_server(
    *,
    researcher: Researcher | None = None,
    wait_seconds: float | None = None,
    spotlight: bool = True,
    max_answer_chars: int | None = None,
    drain: Drain | None = None,
    lean: bool | None = None,
    heartbeat_seconds: float | None = None,
    files_root: str | os.PathLike[str] | None = None,
) -> MCPServer[Any]:
    """The `MCPServer` with the five research tools, the skill and the per-run resources (see `build_mcp_server`).

    `files_root`: the one folder whose files a research call may name by path (a stdio server's
    `PERPLEXITY_MCP_FILES_ROOT`); None (always over HTTP): files by https URL or as `data:` URIs only.

    `drain`, started on shutdown, hands off the research calls in flight at once. `lean` lists the tools' lean
    variant (`tools.LEAN_TOOLS`); None reads `PERPLEXITY_MCP_LEAN`. `heartbeat_seconds` bounds the quiet between two
    progress notifications of a waiting call; None reads `PERPLEXITY_MCP_HEARTBEAT_SECONDS` (default 15).
    """
    from ..._domain.settings import mcp_heartbeat, mcp_lean

    specs = tools.tool_specs(lean=mcp_lean(lean))
    heartbeat = mcp_heartbeat(heartbeat_seconds)
    runtime = _Runtime(researcher, wait_seconds, spotlight, max_answer_chars, drain)
    cancels = RemoteCancels(runtime.researcher)

    @asynccontextmanager
    async def lifespan(_: MCPServer[Any]) -> AsyncGenerator[None, None]:
        try:
            yield
        finally:
            with anyio.CancelScope(shield=True):
                await runtime.aclose()

    def rendered(result: ResearchResult) -> CallToolResult:
        """A research result as the client reads it (a plain call's answer, and a task's result)."""
        from ..._present import model_text as render

        text, fields = render.for_model_and_fields(result, **runtime.render_options)
        return _text(text, structured=fields)

    research_tasks = ResearchTasks(runtime.researcher, rendered)  # MCP tasks, both eras (_tasks.py)
    skills = SkillsExtension()  # skills/list and skills/get (_skills.py)

    async def waited(
        ctx: Context[Any, Any],
        r: Researcher,
        call: Callable[[list[str]], Awaitable[ResearchResult]],
        ids: list[str],
        progress: _Progress,
    ) -> CallToolResult:
        """Run a research wait under the drain, with the progress heartbeat; `ids` holds the run's id once known
        (for a hand-off or a cancel)."""
        from ..._domain.results import ResearchResult

        result: ResearchResult | None = None
        with runtime.drain.guard():
            try:
                result = await progress.around(lambda: call(ids))
            except anyio.get_cancelled_exc_class():
                if peer_cancelled(ctx) and ids:
                    # The person stopped the call: stop the run too, or it would go on billing.
                    with anyio.move_on_after(_CANCEL_GRACE_SECONDS, shield=True):
                        await cancel_upstream(r, ids[-1])
                raise
        if result is None:  # the server is shutting down: hand the run off now, for any instance to collect
            result = ResearchResult(response_id=ids[-1], status='in_progress')
        return rendered(result)

    async def research(ctx: Context[Any, Any], args: Any) -> CallToolResult:
        r = await runtime.researcher()
        key = http_request_key(ctx)  # over HTTP, so that a cancel reaching any instance finds the run (_cancels.py)
        progress = _Progress(ctx, heartbeat)

        async def call(ids: list[str]) -> ResearchResult:
            async def started(response_id: str) -> None:
                # The run's id is in the ledger already (`Researcher.run` records it before it waits): from here on,
                # whatever happens to this process (a SIGKILL included), any instance can list and collect it.
                ids.append(response_id)
                progress.response_id = response_id
                await progress.send(f'started research run {response_id}')
                if key is not None:  # a cancel that reached another instance before the run had its id
                    await cancels.check_mark(r, response_id)

            return await tools.research(
                r,
                args,
                on_progress=progress.step,
                on_started=started,
                caller=caller_of(ctx),
                request_id=key,
                files_root=files_root,
            )

        ids: list[str] = []
        answer = await waited(ctx, r, call, ids, progress)
        if key is not None and ids:
            with anyio.CancelScope(shield=True):
                await cancels.answered(r, ids[-1])
        return answer

    async def collect(ctx: Context[Any, Any], args: Any) -> CallToolResult:
        r = await runtime.researcher()
        run_id = check_id(args.response_id)
        await reach(r, caller_of(ctx), run_id)  # another caller's run is "not found" (_scope.py)

        progress = _Progress(ctx, heartbeat)
        progress.response_id = run_id

        async def call(_: list[str]) -> ResearchResult:
            return await tools.collect(r, args, on_progress=progress.step)

        key = http_request_key(ctx)  # the caller's own run: a cancel reaching any instance stops it (_cancels.py)
        claimed = key is not None and await cancels.claim(r, run_id, caller_of(ctx), key)
        answer = await waited(ctx, r, call, [run_id], progress)
        if claimed:
            with anyio.CancelScope(shield=True):
                await cancels.answered(r, run_id)
        return answer

    async def cancel(ctx: Context[Any, Any], args: Any) -> CallToolResult:
        r = await runtime.researcher()
        await reach(r, caller_of(ctx), check_id(args.response_id))  # only the caller's own run (_scope.py)
        return _text(await tools.cancel_text(r, args))

    async def list_runs(ctx: Context[Any, Any], args: Any) -> CallToolResult:
        from ._tokens import shared_list

        r = await runtime.researcher()
        return _text(await tools.list_runs(r, args, caller=caller_of(ctx), shared=shared_list()))

    async def search(ctx: Context[Any, Any], args: Any) -> CallToolResult:
        from ..._present import model_text as render

        response = await tools.search(await runtime.researcher(), args)
        return _text(render.search_for_model(response, spotlight=runtime.spotlight))

    bodies: dict[str, _Body] = {
        tools.RESEARCH.name: research,
        tools.COLLECT.name: collect,
        tools.CANCEL.name: cancel,
        tools.LIST.name: list_runs,
        tools.SEARCH.name: search,
    }
    server: MCPServer[Any] = MCPServer(
        SERVER_NAME,
        title=identity.TITLE,
        description=identity.DESCRIPTION,
        website_url=identity.WEBSITE,
        icons=[Icon.model_validate(icon) for icon in identity.icons()],
        version=__version__,
        instructions=INSTRUCTIONS,
        lifespan=lifespan,
        log_level='WARNING',
        tools=[_rendered(spec, bodies[spec.name]) for spec in specs],
        extensions=[research_tasks, skills],
    )
    server.middleware.append(research_tasks.middleware)
    server.middleware.append(skills.middleware)
    cancels.register(server)

    @server.resource(
        SKILL_URI,
        name='perplexity-research',
        title='Researching with Perplexity',
        description=(
            'How to research well with the perplexity_* tools: choosing the effort, hand-off and collection, '
            'citing with [n], cancelling, and search versus research.'
        ),
        mime_type='text/markdown',
    )
    def skill() -> str:
        return skill_text()

    @server.resource(
        RUN_URI,
        name='perplexity-run',
        title='A research run',
        description=(
            'The full result of a research run in the ledger, as JSON (answer, every source, citations, progress, '
            'cost). Web text in it is not spotlighted: it is data for the application.'
        ),
        mime_type='application/json',
    )
    async def run(response_id: str, ctx: Context[Any, Any]) -> str:
        from ..._base.errors import NotFoundError
        from ..._domain.results import ResearchResult

        try:
            r = await runtime.researcher()
            run_id = check_id(response_id)
            await reach(r, caller_of(ctx), run_id)  # another caller's run is "not found" (_scope.py)
            response = await r.client.retrieve(run_id)
        except Exception as exc:
            # An id that is empty or names no run is the client's to fix: invalid params (-32602), with the reason.
            unknown = isinstance(exc, NotFoundError | InvalidArgumentError)
            raise (ResourceNotFoundError if unknown else ResourceError)(error_text(exc)) from None
        return ResearchResult.from_response(response).model_dump_json(indent=2)

    return server
