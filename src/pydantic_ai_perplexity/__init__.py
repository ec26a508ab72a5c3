"""Perplexity's Agent API as a research tool for pydantic-ai agents, MCP clients, notebooks and pipelines.

Importing the package is cheap: each public name is imported from its module on first use, so the MCP
server's start-up path never pays for pydantic-ai, and a notebook never pays for the MCP SDK.
"""

from __future__ import annotations

import sys
from importlib import import_module
from typing import TYPE_CHECKING, Any

from ._base.errors import (
    APIConnectionError,
    APIError,
    APIStatusError,
    APITimeoutError,
    AuthenticationError,
    BadRequestError,
    BudgetExceededError,
    ConfigurationError,
    ExternalConnectorError,
    InternalServerError,
    InvalidArgumentError,
    MalformedResponseError,
    NotFoundError,
    PayloadTooLargeError,
    PermissionDeniedError,
    PerplexityError,
    RateLimitError,
    ResearchTimeoutError,
    RetiredEndpointError,
    RunMayHaveStartedError,
)
from ._base.slot import Slot
from ._base.version import __version__

if TYPE_CHECKING:
    from ._core.researcher import Researcher, research, research_sync
    from ._domain.budget import Budget, BudgetWarning, Limits, SpendLine
    from ._domain.options import FunctionTool, ResearchFile, ResearchOptions
    from ._domain.results import Citation, Progress, ResearchResult, Source, Usage
    from ._domain.steps import Step
    from ._ledger import Ledger, RunRecord
    from ._pydantic_ai.capabilities import PerplexityResearch, PerplexitySearch
    from ._pydantic_ai.deep import perplexity_research_subagent
    from ._pydantic_ai.functions import toolset_functions
    from ._pydantic_ai.toolset import (
        PerplexityToolset,
        ResearchProgress,
        ResearchStepEvent,
        collect_deferred,
        resolve_deferred,
    )
    from .client import PerplexityClient
    from .emulator._offline import use_emulator_if_no_key
    from .mcp.clients.config import perplexity_mcp_config, perplexity_mcp_toolset
    from .mcp.server._build import build_mcp_server


__all__ = (
    'APIConnectionError',
    'APIError',
    'APIStatusError',
    'APITimeoutError',
    'AuthenticationError',
    'BadRequestError',
    'Budget',
    'BudgetExceededError',
    'BudgetWarning',
    'Citation',
    'ConfigurationError',
    'ExternalConnectorError',
    'FunctionTool',
    'InternalServerError',
    'InvalidArgumentError',
    'Ledger',
    'Limits',
    'MalformedResponseError',
    'NotFoundError',
    'PayloadTooLargeError',
    'PermissionDeniedError',
    'PerplexityClient',
    'PerplexityError',
    'PerplexityResearch',
    'PerplexitySearch',
    'PerplexityToolset',
    'Progress',
    'RateLimitError',
    'ResearchFile',
    'ResearchOptions',
    'ResearchProgress',
    'ResearchResult',
    'ResearchStepEvent',
    'ResearchTimeoutError',
    'Researcher',
    'RetiredEndpointError',
    'RunMayHaveStartedError',
    'RunRecord',
    'Source',
    'SpendLine',
    'Step',
    'Usage',
    '__version__',
    'build_mcp_server',
    'collect_deferred',
    'perplexity_mcp_config',
    'perplexity_mcp_toolset',
    'perplexity_research_subagent',
    'research',
    'research_sync',
    'resolve_deferred',
    'toolset_functions',
    'use_emulator_if_no_key',
)

_LAZY = {
    'Budget': '._domain.budget',
    'BudgetWarning': '._domain.budget',
    'Limits': '._domain.budget',
    'SpendLine': '._domain.budget',
    'PerplexityClient': '.client',
    'Researcher': '._core.researcher',
    'research': '._core.researcher',
    'research_sync': '._core.researcher',
    'use_emulator_if_no_key': '.emulator._offline',
    'FunctionTool': '._domain.options',
    'ResearchFile': '._domain.options',
    'ResearchOptions': '._domain.options',
    'ResearchResult': '._domain.results',
    'Source': '._domain.results',
    'Citation': '._domain.results',
    'Progress': '._domain.results',
    'Step': '._domain.steps',
    'Usage': '._domain.results',
    'Ledger': '._ledger',
    'RunRecord': '._ledger',
    'PerplexityToolset': '._pydantic_ai.toolset',
    'ResearchProgress': '._pydantic_ai.toolset',
    'collect_deferred': '._pydantic_ai.toolset',
    'resolve_deferred': '._pydantic_ai.toolset',
    'ResearchStepEvent': '._pydantic_ai.toolset',
    'PerplexityResearch': '._pydantic_ai.capabilities',
    'PerplexitySearch': '._pydantic_ai.capabilities',
    'perplexity_mcp_config': '.mcp.clients.config',
    'perplexity_mcp_toolset': '.mcp.clients.config',
    'perplexity_research_subagent': '._pydantic_ai.deep',
    'toolset_functions': '._pydantic_ai.functions',
    'build_mcp_server': '.mcp.server._build',
}


def _wire_reports_to_tracing() -> None:
    import_module('._core.tracing', __name__).watch_wire()


def _durable_when_dbos_is_loaded() -> None:
    if 'dbos' in sys.modules:  # any process running DBOS workflows has it; else research is never durable
        import_module('.durable', __name__)


# What fills each slot a lower layer reads (`_base/slot.py`): the wire's observer, the core's durable runner and the
# domain's display. Run the first time the slot is read empty, so nothing here costs an import until it is needed.
Slot.loader('wire observer', _wire_reports_to_tracing)
Slot.loader('durable runner', _durable_when_dbos_is_loaded)
Slot.loader('display', lambda: import_module('._present.display', __name__))


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
    value = getattr(import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
