"""A pydantic-ai toolset as local functions of a research run (`functions=`).

`toolset_functions(toolset)` lists the toolset's tools (`get_tools`) and makes each a `FunctionTool` the core offers a
run as a `function` tool (its name, description and JSON Schema as the toolset defines them); a call the run makes is
checked by the tool's own arguments validator and goes through the toolset's `call_tool`. It lives here, a way in,
because the core never imports pydantic-ai: the `Researcher` only sees the `FunctionTool` protocol.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, replace
from typing import Any

from pydantic import ValidationError

try:
    from pydantic_ai import RunContext
    from pydantic_ai.exceptions import ApprovalRequired, CallDeferred, ModelRetry, ToolFailed
    from pydantic_ai.messages import ToolReturn
    from pydantic_ai.models.test import TestModel
    from pydantic_ai.toolsets import AbstractToolset, ToolsetTool
    from pydantic_ai.usage import RunUsage
except ImportError as _exc:  # pragma: no cover - depends on the environment
    from .._base.errors import install_hint

    raise ImportError(f'toolset_functions needs pydantic-ai: install it ({install_hint("pydantic-ai")}).') from _exc

from .._core.functions import output_text, refusal, validation_problems
from .._domain.options import FunctionTool

__all__ = ('ToolsetFunction', 'toolset_functions')


@dataclass(frozen=True)
class ToolsetFunction:
    """One tool of a pydantic-ai toolset as a local function: offered with its definition, called through the
    toolset (its arguments checked by the tool's validator first)."""

    toolset: AbstractToolset[Any]
    tool_entry: ToolsetTool[Any]
    ctx: RunContext[Any]

    @property
    def name(self) -> str:
        """The tool's name, which the run calls it by."""
        return self.tool_entry.tool_def.name

    def tool(self) -> dict[str, Any]:
        """The `function` tool of the create request, from the tool's definition."""
        definition = self.tool_entry.tool_def
        tool: dict[str, Any] = {
            'type': 'function',
            'name': definition.name,
            'parameters': definition.parameters_json_schema,
        }
        if definition.description:
            tool['description'] = ' '.join(definition.description.split())
        return tool

    async def call(self, arguments: str) -> tuple[str, str | None]:
        """Run one call through the toolset: (the output text, the error if it failed). Arguments that do not fit,
        `ModelRetry`, `ToolFailed` and the tool's exceptions become the output the run reads, never a crash."""
        entry = self.tool_entry
        ctx = replace(self.ctx, tool_name=self.name, retry=0, max_retries=entry.max_retries)
        try:
            args = entry.args_validator.validate_json(arguments or '{}', context=ctx.validation_context)
            if entry.args_validator_func is not None:
                checked = entry.args_validator_func(ctx, **args)
                if inspect.isawaitable(checked):
                    await checked
        except ValidationError as exc:
            return refusal(self.name, f'its arguments do not fit the schema ({validation_problems(exc)})')
        except ModelRetry as exc:
            return refusal(self.name, exc.message)
        except (ToolFailed, CallDeferred, ApprovalRequired) as exc:
            return self._failed(exc)
        try:
            value = await self.toolset.call_tool(self.name, args, ctx, entry)
        except ModelRetry as exc:  # the tool asks for other arguments: the run reads why and may call again
            return f'Error: function {self.name} asks to be called again: {exc.message}', exc.message
        except (CallDeferred, ApprovalRequired) as exc:
            return self._failed(exc, 'it needs an approval or a deferred result, which a research run cannot give')
        except Exception as exc:  # ToolFailed and the tool's own failures: the run reads them, the research goes on
            return self._failed(exc)
        if isinstance(value, ToolReturn):
            value = value.return_value
        return output_text(value), None

    def _failed(self, exc: Exception, why: str | None = None) -> tuple[str, str]:
        error = why or f'{type(exc).__name__}: {exc}'
        return f'Error: function {self.name} failed: {error}', error


async def toolset_functions(
    toolset: AbstractToolset[Any], *, ctx: RunContext[Any] | None = None, deps: Any = None
) -> list[FunctionTool]:
    """The tools of a pydantic-ai toolset (e.g. a `FunctionToolset`) as local functions for `functions=`.

    `ctx` is the `RunContext` the tools are listed and called with (inside an agent's tool, its own: the tools then
    share its `deps`); without it, one is made with `deps` (its `model` is pydantic-ai's `TestModel`: no model runs,
    Perplexity's agent is the caller).

    ```python
    wiki = FunctionToolset([company_wiki])
    result = await research('What is our heat pump policy?', functions=await toolset_functions(wiki))
    ```
    """
    context = ctx if ctx is not None else RunContext(deps=deps, model=TestModel(), usage=RunUsage())
    async with toolset:
        listed = await toolset.get_tools(context)
    return [ToolsetFunction(toolset, entry, context) for entry in listed.values()]
