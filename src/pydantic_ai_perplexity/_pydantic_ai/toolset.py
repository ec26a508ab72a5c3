"""`PerplexityToolset`: Perplexity research as a pydantic-ai toolset, for `Agent(...)` and `create_deep_agent(...)`.

The five tools share one `Researcher` (so one HTTP client, one ledger, one budget) and the model-facing
rendering of `_present/model_text.py`, exactly as the MCP server does. A long run never turns into a timeout that would
invite the model to pay for it again: at the wait budget the tool returns a hand-off with the run's
`response_id`, to be collected with `perplexity_research_result`, or (with `defer=True`) ends the agent run
with a deferred tool call that `resolve_deferred` answers later, from this process or another.

Every tool name a model reads (instructions, descriptions, hand-offs, refusals) is the name it calls the tool by:
`.prefixed('web')` renames them all. A budget refusal reaches the model as text and the application through
`on_refusal`.
"""

from __future__ import annotations

import copy
import inspect
import os
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal, TypeVar, cast

try:
    from pydantic_ai import (
        CallDeferred,
        CapabilityEvent,
        CustomEvent,
        FunctionToolset,
        ModelRetry,
        RunContext,
        Tool,
        ToolFailed,
        ToolReturn,
    )
    from pydantic_ai.messages import InstructionPart
    from pydantic_ai.tools import DeferredToolRequests, DeferredToolResults, ToolDefinition
    from pydantic_ai.toolsets import AbstractToolset, PrefixedToolset, ToolsetTool
    from pydantic_ai.toolsets.function import FunctionToolsetTool
except ImportError as _exc:  # pragma: no cover - depends on the environment
    from .._base.errors import install_hint

    raise ImportError(f'PerplexityToolset needs pydantic-ai: install it ({install_hint("pydantic-ai")}).') from _exc

from pydantic import BaseModel

from .._base.errors import BudgetExceededError, PerplexityError
from .._core import tool_spec as tools
from .._core.functions import local_functions
from .._core.researcher import Researcher
from .._domain.budget import Budget
from .._domain.options import FunctionTool, ResearchOptions
from .._domain.results import ResearchResult
from .._domain.steps import Step
from .._ledger import Ledger, OnBudget
from .._present import model_text as render
from ..client._params import McpTool
from .functions import toolset_functions

__all__ = (
    'RESPONSE_ID_KEY',
    'OnRefusal',
    'PerplexityToolset',
    'ResearchProgress',
    'ResearchStepEvent',
    'collect_deferred',
    'resolve_deferred',
)

#: The key of a deferred research call's run id in `DeferredToolRequests.metadata[tool_call_id]`.
RESPONSE_ID_KEY = 'response_id'

#: What the application hears of a budget refusal: a callback (sync or async) given the `BudgetExceededError`,
#: or `'raise'` to end `agent.run` with it. Either way nothing was started or billed.
OnRefusal = Callable[[BudgetExceededError], Awaitable[None] | None] | Literal['raise']


@dataclass(kw_only=True)
class ResearchProgress(CustomEvent):
    """A research step, streamed live to whoever drives the agent (`agent.run_stream_events`, `agent.iter`): the run's
    id, the step's kind (`search`, `results`, `fetch`, `fetched`, `mcp`, `answer`), its description and the counts."""

    response_id: str | None = None
    kind: str = ''
    step: str = ''
    searches: int = 0
    results_seen: int = 0
    pages_fetched: int = 0
    elapsed_s: float = 0.0


@dataclass(kw_only=True)
class ResearchStepEvent(CapabilityEvent, namespace='perplexity', name='research_step'):
    """`ResearchProgress` as the capabilities emit it (pydantic-ai wants capability events from capabilities):
    the same fields, the step's kind as `step_kind`."""

    response_id: str | None = None
    step_kind: str = ''
    step: str = ''
    searches: int = 0
    results_seen: int = 0
    pages_fetched: int = 0
    elapsed_s: float = 0.0

    @classmethod
    def of(cls, progress: ResearchProgress) -> ResearchStepEvent:
        """The capability event of a `ResearchProgress`."""
        return cls(step_kind=progress.kind, **{name: getattr(progress, name) for name in _STEP_FIELDS})


#: The fields `ResearchProgress` and `ResearchStepEvent` share, by name.
_STEP_FIELDS = ('response_id', 'step', 'searches', 'results_seen', 'pages_fetched', 'elapsed_s')


class PerplexityToolset(FunctionToolset[Any]):
    """Perplexity research tools for a pydantic-ai agent.

    ```python
    agent = Agent('openai:gpt-5.4', toolsets=[PerplexityToolset()])
    ```

    Settings are keyword-only; those not given come from the environment when the toolset is built
    (`PERPLEXITY_API_KEY`, `PERPLEXITY_BASE_URL`, `PERPLEXITY_EFFORT`, `PERPLEXITY_WAIT_SECONDS`,
    `PERPLEXITY_BUDGET_USD`, `PERPLEXITY_STATE_DIR`).

    Args:
        api_key: Perplexity API key; defaults to `PERPLEXITY_API_KEY`.
        base_url: API base URL (https, or http to loopback, e.g. the emulator).
        effort: Default effort for `perplexity_research` when the model names none.
        wait_seconds: How long one tool call waits for a run before handing back its `response_id` (default 600).
        budget_usd: Cap on recorded spend; runs that would pass it are refused before they start.
        budget: A `Budget`: windows (day, month, total), a per-run ceiling, per-caller and per-scope limits, `warn_at`.
        on_budget: `'refuse'` (default; `PERPLEXITY_ON_BUDGET`) a run that does not fit the budget, or `'tighten'` it
            to fit (lower limits, said in the result).
        spotlight: Wrap web text in nonce delimiters marking it as data (on by default).
        ledger: A `Ledger`, a path for one, or `False` for none; default under `PERPLEXITY_STATE_DIR`.
        output_type: A pydantic model or JSON schema: research answers come back as that structure.
        mcp_servers: Remote MCP servers (Agent API `mcp` tools) Perplexity may call during research.
        functions: Local functions research runs may call: Python callables, pydantic-ai toolsets (each tool called
            through its toolset with this agent run's `RunContext`), or `FunctionTool`s. The model calling
            `perplexity_research` does not see them; the researcher runs each call and continues the run.
        options: `ResearchOptions` every research call starts from (e.g. `service_tier='flex'`, fallback `models`,
            `files`); the model's arguments override them.
        defer: End the agent run with a deferred call instead of a hand-off when a run outlasts the wait; the run
            id is under `RESPONSE_ID_KEY` in the call's metadata, and `resolve_deferred` answers it.
        on_refusal: Tell the application of a budget refusal (the model reads it as text either way): a callback
            given the `BudgetExceededError`, or `'raise'` to end `agent.run` with it.
        include: Only these of the five tools (by their spec names, e.g. `['perplexity_search']`).
        instructions: The instructions to give instead of the default (tool names as in `tool_spec.py`; each is said
            as the model knows the tool).
        max_answer_chars: Bound on the answer text the model sees; the full result is in the tool metadata.
        lean: Show the tools' lean variant (short descriptions, few arguments: about a quarter of the tokens sent
            with every model request); calls are checked and run exactly as in the full one.
        researcher: Share an existing `Researcher` instead of making one.
        http_client: An `httpx2.AsyncClient` to send requests with.
        id: Toolset id (for durable execution and pydantic-deep's tool search).
    """

    def __init__(
        self,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        effort: str | None = None,
        wait_seconds: float | None = None,
        budget_usd: float | None = None,
        budget: Budget | None = None,
        on_budget: OnBudget | None = None,
        spotlight: bool = True,
        ledger: Ledger | str | os.PathLike[str] | Literal[False] | None = None,
        output_type: type[BaseModel] | dict[str, Any] | None = None,
        mcp_servers: Sequence[McpTool] | None = None,
        functions: Sequence[Callable[..., Any] | FunctionTool | AbstractToolset[Any]] | None = None,
        options: ResearchOptions | None = None,
        defer: bool = False,
        on_refusal: OnRefusal | None = None,
        include: Sequence[str] | None = None,
        instructions: str | None = None,
        max_answer_chars: int = render.DEFAULT_MAX_ANSWER_CHARS,
        researcher: Researcher | None = None,
        http_client: Any = None,
        id: str = 'perplexity',
        lean: bool = False,
    ) -> None:
        super().__init__(id=id, max_retries=2)
        self.researcher = researcher or Researcher(
            api_key=api_key,
            base_url=base_url,
            effort=effort,
            wait_seconds=wait_seconds,
            budget_usd=budget_usd,
            budget=budget,
            on_budget=on_budget,
            ledger=ledger,
            origin='toolset',
            http_client=http_client,
        )
        self.spotlight = spotlight
        self.output_type = output_type
        self.mcp_servers = list(mcp_servers or ())
        #: Local functions research runs may call (toolsets listed afresh for each call, with its `RunContext`).
        self.functions = list(functions or ())
        local_functions([f for f in self.functions if not isinstance(f, AbstractToolset)])  # refused when built
        #: Options every research call starts from (e.g. `service_tier`, fallback `models`, `files`); the model's
        #: arguments override them.
        self.options = options
        self.defer = defer
        self.on_refusal = on_refusal
        self.max_answer_chars = max_answer_chars
        #: Which event a research step is streamed as: `ResearchProgress` (an application's `CustomEvent`), or
        #: `ResearchStepEvent` when a capability owns the toolset.
        self.progress_events: Literal['custom', 'capability'] = 'custom'
        known = [spec.name for spec in tools.TOOLS]
        unknown = [name for name in include or () if name not in known]
        if unknown:
            raise ValueError(f'include names no tool: {", ".join(unknown)}; the tools are {", ".join(known)}.')
        self.include = tuple(include) if include is not None else tuple(known)
        self.instructions_text = instructions if instructions is not None else tools.INSTRUCTIONS
        #: The names the model calls the tools by (changed by `prefixed`).
        self.names = tools.NAMES
        self.lean = lean
        self._add_tools()

    def _add_tools(self) -> None:
        handlers: dict[str, _Handler] = {
            tools.RESEARCH.name: self._research,
            tools.COLLECT.name: self._collect,
            tools.CANCEL.name: self._cancel,
            tools.LIST.name: self._list,
            tools.SEARCH.name: self._search,
        }
        self.tools = {}
        #: Each tool's arguments check, handed to pydantic-ai as its `ToolsetTool.args_validator` (`get_tools`).
        self._checks: dict[str, _SpecCheck] = {}
        for spec in tools.tool_specs(lean=self.lean):
            if spec.name in self.include:
                self.add_tool(_rendered(spec, handlers[spec.name], self.names, self._absent()))
                self._checks[spec.name] = _SpecCheck(spec, self.names)

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        """The tools, each with its spec's check as the arguments validator: a call is checked once, in the
        project's words, before the tool runs."""
        listed = await super().get_tools(ctx)
        return {name: self._checked(tool) for name, tool in listed.items()}

    def tool_for_tool_def(
        self, tool_def: ToolDefinition, *, ctx: RunContext[Any], original_name: str | None = None
    ) -> FunctionToolsetTool[Any]:
        """The tool of a definition `get_tools` made elsewhere (durable execution), checked as `get_tools`'s are."""
        return self._checked(super().tool_for_tool_def(tool_def, ctx=ctx, original_name=original_name))

    def _checked(self, tool: _T) -> _T:
        check = self._checks.get(tool.tool_def.name)
        return replace(tool, args_validator=check) if check is not None else tool

    def _absent(self) -> list[str]:
        return [spec.name for spec in tools.TOOLS if spec.name not in self.include]

    def prefixed(self, prefix: str) -> PrefixedToolset[Any]:
        """The tools named `{prefix}_...`, and every text the model reads naming them so (same researcher)."""
        renamed = copy.copy(self)
        renamed.names = self.names.prefixed(prefix)
        renamed._add_tools()
        return PrefixedToolset(renamed, prefix)

    async def get_instructions(self, ctx: RunContext[Any]) -> list[InstructionPart] | None:
        """The tools' instructions, each tool named as the model knows it and none it lacks (none when
        `instructions=''`)."""
        if not self.instructions_text:
            return None
        text = self.names.say(_without_clauses_naming(self.instructions_text, self._absent()))
        return [InstructionPart(content=text, dynamic=False)]

    async def __aenter__(self) -> PerplexityToolset:
        await self.researcher.__aenter__()
        return self

    async def __aexit__(self, *args: Any) -> bool | None:
        await self.researcher.__aexit__(*args)
        return None

    # -- the tools: each renders its spec in `_core/tool_spec.py` ----------------------------------------------

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        """Every tool's errors, mapped in one place: the model reads `render.error_for_model`'s words."""
        try:
            return await super().call_tool(name, tool_args, ctx, tool)
        except BudgetExceededError as exc:
            if isinstance(self.on_refusal, str):  # 'raise'
                raise
            if self.on_refusal is not None:
                heard = self.on_refusal(exc)
                if inspect.isawaitable(heard):
                    await heard
            raise ToolFailed(render.error_for_model(exc, names=self.names)[0]) from exc
        except PerplexityError as exc:
            text, fixable = render.error_for_model(exc, names=self.names)
            raise (ModelRetry(text) if fixable else ToolFailed(text)) from exc

    async def _research(self, ctx: RunContext[Any], args: Any) -> ToolReturn:
        fixed: dict[str, Any] = {'output_type': self.output_type, 'mcp_servers': self.mcp_servers or None}
        if self.functions:
            fixed['functions'] = await self._functions(ctx)
        if self.options is not None:
            fixed['options'] = self.options
        result = await tools.research(self.researcher, args, on_progress=self._emitter(ctx), **fixed)
        return self._returned(result)

    async def _collect(self, ctx: RunContext[Any], args: Any) -> ToolReturn:
        fixed: dict[str, Any] = {}
        if self.functions:  # a handed-off run waiting for them is answered here
            fixed['functions'] = await self._functions(ctx)
            if self.options is not None and self.options.max_function_calls is not None:
                fixed['max_function_calls'] = self.options.max_function_calls
        return self._returned(await tools.collect(self.researcher, args, on_progress=self._emitter(ctx), **fixed))

    async def _cancel(self, ctx: RunContext[Any], args: Any) -> str:
        return await tools.cancel_text(self.researcher, args)

    async def _list(self, ctx: RunContext[Any], args: Any) -> str:
        return await tools.list_runs(self.researcher, args)

    async def _search(self, ctx: RunContext[Any], args: Any) -> ToolReturn:
        response = await tools.search(self.researcher, args)
        text = render.search_for_model(response, spotlight=self.spotlight)
        meta = {'search': response, 'sources': render.source_refs(response), 'untrusted': True}
        return ToolReturn(return_value=text, metadata=meta)

    async def perplexity_research_cancel(self, response_id: str) -> str:
        """Cancel a run, as the `perplexity_research_cancel` tool does; the text a model would read."""
        return await tools.cancel_text(self.researcher, tools.CANCEL.parse({'response_id': response_id}))

    # -- helpers -----------------------------------------------------------------------------------------------

    async def _functions(self, ctx: RunContext[Any]) -> list[Callable[..., Any] | FunctionTool]:
        """The local functions of one research call: each toolset's tools listed with the agent run's context."""
        found: list[Callable[..., Any] | FunctionTool] = []
        for source in self.functions:
            if isinstance(source, AbstractToolset):
                found.extend(await toolset_functions(cast('AbstractToolset[Any]', source), ctx=ctx))
            else:
                found.append(source)
        return found

    def _emitter(self, ctx: RunContext[Any]) -> Any:
        capability = self.progress_events == 'capability'

        async def on_progress(step: Step) -> None:
            p = step.progress
            event = ResearchProgress(
                response_id=step.response_id,
                kind=step.kind,
                step=step.detail,
                searches=p.searches,
                results_seen=p.results_seen,
                pages_fetched=p.pages_fetched,
                elapsed_s=p.elapsed_s,
            )
            await ctx.emit(ResearchStepEvent.of(event) if capability else event)

        return on_progress

    def _returned(self, result: ResearchResult) -> ToolReturn:
        if not result.done and self.defer:
            raise CallDeferred(metadata={RESPONSE_ID_KEY: result.response_id, 'progress': result.progress.summary()})
        return self.tool_return(result)

    def tool_return(self, result: ResearchResult, *, names: tools.ToolNames | None = None) -> ToolReturn:
        """A research result as the tool returns it: the model's text (naming tools as `names`, default the
        toolset's); the full result and its `{url, title}` sources in the metadata, for an application to render
        citations from."""
        text = render.for_model(
            result, spotlight=self.spotlight, max_answer_chars=self.max_answer_chars, names=names or self.names
        )
        meta = {'research_result': result, 'sources': render.source_refs(result.sources), 'untrusted': True}
        return ToolReturn(return_value=text, metadata=meta)


_Handler = Callable[[RunContext[Any], Any], Awaitable[Any]]
_T = TypeVar('_T', bound='ToolsetTool[Any]')
#: The one keyword a checked call's arguments reach the tool under: the spec's parsed arguments.
_ARGS = '\x00checked'


class _SpecCheck:
    """A tool's arguments validator (pydantic-ai's `ToolsetTool.args_validator`): `ToolSpec.parse`, once per call.

    pydantic-ai would otherwise check the arguments against the schema itself and show the model pydantic's own
    messages; the spec checks them instead, in the project's words, the same as over MCP. A refusal is a retry (or a
    failure, when the model cannot fix it), as pydantic-ai treats a validation error.
    """

    def __init__(self, spec: tools.ToolSpec, names: tools.ToolNames) -> None:
        self.spec = spec
        self.names = names

    def validate_json(self, input: str | bytes | bytearray, **_: Any) -> dict[str, Any]:
        return self.validate_python(input.decode(errors='replace') if not isinstance(input, str) else input)

    def validate_python(self, input: Any, **_: Any) -> dict[str, Any]:
        given = cast(object, input)
        if isinstance(given, dict):
            fields = cast('dict[str, Any]', given)
            # Arguments checked before, and sent across a durable boundary, come back under `_ARGS`.
            given = fields[_ARGS] if list(fields) == [_ARGS] else fields
        try:
            return {_ARGS: self.spec.parse(cast(object, given))}
        except PerplexityError as exc:
            text, fixable = render.error_for_model(exc, names=self.names)
            text = self.names.say(text)  # the tool named as the model calls it
            raise (ModelRetry(text) if fixable else ToolFailed(text)) from exc


def _rendered(spec: tools.ToolSpec, handler: _Handler, names: tools.ToolNames, absent: Sequence[str]) -> Tool[Any]:
    """The pydantic-ai tool of a spec: its name, description (naming tools as the model knows them, and none of the
    `absent` ones) and JSON schema; its arguments arrive checked by the spec (`_SpecCheck`)."""

    async def call(ctx: RunContext[Any], **checked: Any) -> Any:
        args: object = checked[_ARGS] if _ARGS in checked else checked
        if not isinstance(args, BaseModel):  # crossed a durable boundary as JSON, or bypassed `get_tools`
            args = spec.parse(args)
        return await handler(ctx, args)

    description = names.say(_without_clauses_naming(spec.description, absent))
    return Tool.from_schema(call, name=spec.name, description=description, json_schema=spec.schema, takes_ctx=True)


#: Where one clause of a text ends: after a `.` or `;`, the whitespace (kept, to join the rest as written).
_CLAUSE = re.compile(r'(?<=[.;])(\s+)')


def _without_clauses_naming(text: str, absent: Sequence[str]) -> str:
    """`text` without the clauses (sentences, `;` parts) that name a tool in `absent`: a model is never pointed at
    a tool it does not have. A clause left ending in `;` before a dropped one ends the sentence instead."""
    if not absent:
        return text
    parts = _CLAUSE.split(text)  # clause, whitespace, clause, ..., clause
    kept: list[str] = []
    for at in range(0, len(parts), 2):
        clause, space = parts[at], parts[at + 1] if at + 1 < len(parts) else ''
        if any(re.search(rf'\b{name}\b', clause) for name in absent):
            if kept and kept[-1].rstrip().endswith(';'):
                body = kept[-1].rstrip()
                kept[-1] = body[:-1] + '.' + kept[-1][len(body) :]
            continue
        kept.append(clause + space)
    return ''.join(kept).strip()


async def resolve_deferred(
    requests: DeferredToolRequests,
    *,
    toolset: PerplexityToolset | None = None,
    researcher: Researcher | None = None,
    wait_seconds: float | None = None,
) -> DeferredToolResults:
    """Wait for the research runs behind deferred calls and build the results to resume the agent with.

    Works from any process: each call's run id is in its metadata (`RESPONSE_ID_KEY`), and the run is collected
    from the API (and recorded in the ledger) by `researcher`, `toolset`'s, or one made from the environment.

    ```python
    result = await agent.run(question, output_type=[str, DeferredToolRequests])
    if isinstance(result.output, DeferredToolRequests):
        results = await resolve_deferred(result.output)
        result = await agent.run(message_history=result.all_messages(), deferred_tool_results=results)
    ```
    A run still going after `wait_seconds` is answered with its hand-off text, naming the collect tool by the
    prefix the deferred call carried, so the model can collect it. Calls that are not research runs (no run id) are
    left out, for the application to answer.
    """
    if toolset is None:
        toolset = PerplexityToolset(researcher=researcher or Researcher(origin='toolset'))
    results = DeferredToolResults()
    async with toolset.researcher:  # shared: closes its client only when its last user leaves
        for call in requests.calls:
            response_id = requests.metadata.get(call.tool_call_id, {}).get(RESPONSE_ID_KEY)
            if not isinstance(response_id, str):
                continue
            result = await toolset.researcher.collect(response_id, wait_seconds=wait_seconds)
            # A run still going is handed back naming the collect tool as the model called this one (its prefix).
            names = toolset.names.calling(call.tool_name)
            results.calls[call.tool_call_id] = toolset.tool_return(result, names=names)
    return results


async def collect_deferred(
    toolset: PerplexityToolset, requests: DeferredToolRequests, *, wait_seconds: float | None = None
) -> DeferredToolResults:
    """`resolve_deferred` with `toolset`'s researcher and rendering (kept for existing code)."""
    return await resolve_deferred(requests, toolset=toolset, wait_seconds=wait_seconds)
