"""A research subagent for pydantic-deep's `create_deep_agent`: Perplexity in place of the built-in web search.

```python
from pydantic_deep import create_deep_agent
from pydantic_ai_perplexity._pydantic_ai.deep import perplexity_research_subagent

agent = create_deep_agent(model, subagents=[perplexity_research_subagent()], web_search=False, web_fetch=False)
```

The config is named `research`, so it takes the place of pydantic-deep's built-in `research` subagent (the one that
searches with DuckDuckGo); `web_search=False, web_fetch=False` keep those tools from every agent, subagents
included, so that the web is researched only through Perplexity. Long runs are collected under pydantic-deep's default
`StuckLoopDetection`: each hand-off asks for the next `poll` number, so consecutive collects never repeat.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from .._core.tool_spec import INSTRUCTIONS

if TYPE_CHECKING:
    from pydantic_ai.models import Model
    from pydantic_deep.types import SubAgentConfig  # pyright: ignore[reportMissingTypeStubs]

    from .toolset import PerplexityToolset

__all__ = ('RESEARCH_SUBAGENT_DESCRIPTION', 'perplexity_research_subagent')

RESEARCH_SUBAGENT_DESCRIPTION = (
    'Research agent for questions about the world that need current web sources: it researches them with '
    'Perplexity (searching, reading pages, writing a cited answer) and returns the answer with its numbered sources. '
    'Give it the question in full, with any context it needs.'
)

_INSTRUCTIONS = f"""\
You are a research agent. Answer the question you are given from the live web, with sources.

{INSTRUCTIONS}

## How to work

1. Pick the effort by the question: `fast` for a single fact, `low` or `medium` for a question that needs a few \
sources, `high` for a survey.
2. A research call may hand back a `response_id` while the run is still going: collect it with \
perplexity_research_result, passing the `poll` number the hand-off gives each time, until the answer comes back. \
Long runs take several collects; that is expected, not a loop.
3. For a follow-up on what a run found, pass its `response_id` as `previous_response_id`.
4. Return the answer with its [n] markers and the cited sources (title and url). If the research failed, say so."""


def perplexity_research_subagent(
    toolset: PerplexityToolset | None = None,
    *,
    name: str = 'research',
    model: str | Model | None = None,
    description: str = RESEARCH_SUBAGENT_DESCRIPTION,
) -> SubAgentConfig:
    """A pydantic-deep subagent config that researches with `toolset` (by default a `PerplexityToolset()` from the
    environment); named `research`, it replaces pydantic-deep's built-in research subagent. `model` defaults to the
    parent agent's."""
    if toolset is None:
        from .toolset import PerplexityToolset

        toolset = PerplexityToolset()
    config: dict[str, Any] = {
        'name': name,
        'description': description,
        'instructions': _INSTRUCTIONS,
        'toolsets': [toolset],
    }
    if model is not None:
        config['model'] = model
    return cast('SubAgentConfig', config)
