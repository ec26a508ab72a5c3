"""Perplexity's Agent API as a research tool for pydantic-ai agents, MCP clients, notebooks and pipelines.

Importing the package is cheap: each public name is imported from its module on first use, so the MCP
server's start-up path never pays for pydantic-ai, and a notebook never pays for the MCP SDK.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from .errors import (
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

if TYPE_CHECKING:
    from .budget import Budget, BudgetWarning, Limits, SpendLine
    from .capabilities import PerplexityResearch, PerplexitySearch
    from .client import PerplexityClient
    from .deep import perplexity_research_subagent
    from .ledger import Ledger, RunRecord
    from .mcp.config import perplexity_mcp_config, perplexity_mcp_toolset
    from .mcp.server import build_mcp_server
    from .offline import use_emulator_if_no_key
    from .researcher import Researcher, research, research_sync
    from .results import Citation, Progress, ResearchResult, Source, Usage
    from .steps import Step
    from .toolset import PerplexityToolset, ResearchProgress, ResearchStepEvent, collect_deferred, resolve_deferred

__version__ = '0.1.0'

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
    'use_emulator_if_no_key',
)

_LAZY = {
    'Budget': '.budget',
    'BudgetWarning': '.budget',
    'Limits': '.budget',
    'SpendLine': '.budget',
    'PerplexityClient': '.client',
    'Researcher': '.researcher',
    'research': '.researcher',
    'research_sync': '.researcher',
    'use_emulator_if_no_key': '.offline',
    'ResearchResult': '.results',
    'Source': '.results',
    'Citation': '.results',
    'Progress': '.results',
    'Step': '.steps',
    'Usage': '.results',
    'Ledger': '.ledger',
    'RunRecord': '.ledger',
    'PerplexityToolset': '.toolset',
    'ResearchProgress': '.toolset',
    'collect_deferred': '.toolset',
    'resolve_deferred': '.toolset',
    'ResearchStepEvent': '.toolset',
    'PerplexityResearch': '.capabilities',
    'PerplexitySearch': '.capabilities',
    'perplexity_mcp_config': '.mcp.config',
    'perplexity_mcp_toolset': '.mcp.config',
    'perplexity_research_subagent': '.deep',
    'build_mcp_server': '.mcp.server',
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
    value = getattr(import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
