"""Local functions a research run may call: Python callables offered to Perplexity's agent as `function` tools.

A run that calls one ends in `requires_action` with `function_call` items; the `Researcher` runs each call here (its
arguments validated against the function's type hints with pydantic), sends the outputs back as
`function_call_output` items on a new request continuing the run (`previous_response_id`), and waits again. This is
how a private database or a company wiki joins web research: the function runs in this process, only its output is
sent. A function that raises, or arguments that do not validate, become the output text the run reads (never a
crash): the model can correct itself.
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast, get_type_hints

import anyio.to_thread
from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from .._base.errors import InvalidArgumentError
from .._domain.options import FunctionTool
from .._domain.results import FunctionCall
from ..client._models import RESERVED_TOOL_NAMES

__all__ = (
    'MAX_OUTPUT_CHARS',
    'LocalFunction',
    'local_functions',
    'output_text',
    'refusal',
    'validation_problems',
    'waiting_note',
)

#: The most characters of one function's output sent back to the run (the rest is cut, and the cut said).
MAX_OUTPUT_CHARS = 20_000
_NAME = re.compile(r'^[A-Za-z0-9_-]{1,64}$')


@dataclass(frozen=True)
class LocalFunction:
    """One callable as the run sees it: its name, description and JSON Schema, and how its calls are checked."""

    name: str
    description: str
    arguments: type[BaseModel]
    fn: Callable[..., Any]

    def tool(self) -> dict[str, Any]:
        """The `function` tool of the create request (Responses style, not nested under `function`)."""
        schema = self.arguments.model_json_schema()
        schema.pop('title', None)
        tool: dict[str, Any] = {'type': 'function', 'name': self.name, 'parameters': schema}
        if self.description:
            tool['description'] = self.description
        return tool

    async def call(self, arguments: str) -> tuple[str, str | None]:
        """Run one call: (the output text sent back, the error if the call failed). Never raises for the call's own
        failures: bad arguments and exceptions become the output the run reads, so that it can correct itself."""
        try:
            given: object = json.loads(arguments) if arguments.strip() else {}
        except ValueError:
            return self._refused('its arguments are not JSON')
        if not isinstance(given, dict):
            return self._refused('its arguments must be a JSON object')
        try:
            checked = self.arguments.model_validate(given)
        except ValidationError as exc:
            return self._refused(f'its arguments do not fit the schema ({validation_problems(exc)})')
        values = {name: getattr(checked, name) for name in type(checked).model_fields}
        try:
            if inspect.iscoroutinefunction(self.fn):
                value = await cast('Callable[..., Awaitable[Any]]', self.fn)(**values)
            else:
                value = await anyio.to_thread.run_sync(lambda: self.fn(**values))
        except Exception as exc:  # the function's own failure: the run reads it, the research goes on
            error = f'{type(exc).__name__}: {exc}'
            return f'Error: function {self.name} failed: {error}', error
        return output_text(value), None

    def _refused(self, why: str) -> tuple[str, str]:
        return refusal(self.name, why)


def refusal(name: str, why: str) -> tuple[str, str]:
    """A call that was not made (its arguments did not fit): the output the run reads, and the error."""
    message = f'function {name} was not called: {why}. Call it again with arguments that fit its schema.'
    return f'Error: {message}', message


def waiting_note(calls: Sequence[FunctionCall]) -> str:
    """What a run left in `requires_action` waits for: the local function calls it asked for, and how to answer."""
    pending = [f'{call.name}({call.arguments})' for call in calls if call.output is None]
    asked = '; '.join(pending) if pending else 'local function outputs'
    return (
        f'The run waits for local functions it called: {asked}. Only a Python caller holding them can answer '
        '(Researcher.collect(response_id, functions=[...])); otherwise cancel it.'
    )


def validation_problems(exc: ValidationError) -> str:
    """The first few problems of a failed validation, on one line (`field: message; ...`)."""
    return '; '.join(
        f'{".".join(map(str, e["loc"])) or "arguments"}: {e["msg"]}' for e in exc.errors(include_url=False)[:5]
    )


def local_functions(functions: Sequence[Callable[..., Any] | FunctionTool]) -> dict[str, FunctionTool]:
    """The functions by name, each checked: a name the API accepts and does not keep for itself, each once, and
    (for a callable, made a `LocalFunction`) parameters with type hints pydantic can validate. A `FunctionTool`
    (e.g. from `toolset_functions`) is taken as it is.

    Raises:
        InvalidArgumentError: naming the function and what to change.
    """
    found: dict[str, FunctionTool] = {}
    for fn in functions:
        if isinstance(fn, FunctionTool):
            _check_name(fn.name, found)
            found[fn.name] = fn
            continue
        if not callable(fn):
            raise InvalidArgumentError(
                f'functions must be Python callables (or a pydantic-ai toolset through toolset_functions); got {fn!r}.',
                argument='functions',
            )
        name = getattr(fn, '__name__', '') or type(fn).__name__
        _check_name(name, found)
        found[name] = LocalFunction(name, _description(fn), _arguments_model(fn, name), fn)
    return found


def _check_name(name: str, found: Mapping[str, object]) -> None:
    """A name the API accepts, not one it keeps for its own tools, and not offered twice."""
    if not _NAME.match(name) or name in RESERVED_TOOL_NAMES:
        raise InvalidArgumentError(
            f'function {name!r} cannot be offered: a name is 1-64 letters, digits, _ or -, and not one the API '
            f'keeps for its own tools ({", ".join(sorted(RESERVED_TOOL_NAMES))}). Rename the function.',
            argument='functions',
        )
    if name in found:
        raise InvalidArgumentError(f'two functions are named {name!r}: names must differ.', argument='functions')


def _description(fn: Callable[..., Any]) -> str:
    """The first paragraph of the docstring, on one line."""
    doc = inspect.getdoc(fn) or ''
    return ' '.join(doc.split('\n\n', 1)[0].split())


def _arguments_model(fn: Callable[..., Any], name: str) -> type[BaseModel]:
    """A pydantic model of the function's parameters, from its type hints (an unhinted parameter takes any JSON)."""
    try:
        signature = inspect.signature(fn)
        hints = get_type_hints(fn)
    except (TypeError, ValueError, NameError) as exc:
        raise InvalidArgumentError(
            f'function {name!r} cannot be offered: its signature cannot be read ({exc}).', argument='functions'
        ) from None
    fields: dict[str, Any] = {}
    for param in signature.parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        if param.kind is param.POSITIONAL_ONLY:
            raise InvalidArgumentError(
                f'function {name!r} cannot be offered: parameter {param.name!r} is positional-only; the run passes '
                'arguments by name.',
                argument='functions',
            )
        default = ... if param.default is param.empty else param.default
        fields[param.name] = (hints.get(param.name, Any), default)
    try:
        return create_model(f'{name}_arguments', __config__=ConfigDict(extra='forbid'), **fields)
    except Exception as exc:  # a hint pydantic cannot validate (an arbitrary class, ...)
        raise InvalidArgumentError(
            f'function {name!r} cannot be offered: its parameters have types pydantic cannot check '
            f'({type(exc).__name__}). Use JSON-like types (str, int, float, bool, lists, dicts, pydantic models).',
            argument='functions',
        ) from None


def output_text(value: Any) -> str:
    """A function's return value as the output text: a string as it is, anything else as JSON; cut when too long."""
    if isinstance(value, str):
        text = value
    elif isinstance(value, BaseModel):
        text = value.model_dump_json()
    else:
        try:
            text = json.dumps(value, ensure_ascii=False, default=str)
        except (TypeError, ValueError):
            text = str(value)
    if len(text) > MAX_OUTPUT_CHARS:
        text = f'{text[:MAX_OUTPUT_CHARS]}\n[output cut: {len(text) - MAX_OUTPUT_CHARS} more characters not sent]'
    return text
