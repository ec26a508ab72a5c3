"""A pydantic-deep research agent with Perplexity research in-process.

    uv run python agents/deep_research.py "How are perovskite solar cells made stable?"            # offline
    uv run python agents/deep_research.py "..." --model openai:gpt-5.4                           # a real model

Offline (no `--model`) it runs a scripted model against the built-in emulator: no key, no network. With
`--model`, set the model provider's key and `PERPLEXITY_API_KEY`; without the latter it still uses the emulator.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
from collections.abc import AsyncIterator

from pydantic_deep import DeepAgentDeps, create_deep_agent

from pydantic_ai_perplexity import PerplexityToolset
from pydantic_ai_perplexity.emulator import Emulator
from pydantic_ai_perplexity.testing import scripted_research_model

INSTRUCTIONS = (
    'You are a careful research assistant. Use perplexity_research for questions that need sources; '
    'keep its [n] markers and list the sources you cite.'
)


@contextlib.asynccontextmanager
async def perplexity_endpoint() -> AsyncIterator[dict[str, str | None]]:
    """The real API when a key is set, else the emulator."""
    if os.environ.get('PERPLEXITY_API_KEY'):
        yield {'api_key': None, 'base_url': None}
        return
    async with Emulator() as emu:
        yield {'api_key': emu.api_key, 'base_url': emu.base_url}


async def main(question: str, model: str | None, effort: str, state_dir: str | None) -> str:
    async with perplexity_endpoint() as endpoint:
        toolset = PerplexityToolset(
            effort=effort, ledger=state_dir and os.path.join(state_dir, 'ledger.sqlite3'), **endpoint
        )
        agent = create_deep_agent(
            model=model or scripted_research_model(),
            instructions=INSTRUCTIONS,
            toolsets=[toolset],
            include_execute=False,
            include_skills=False,
            web_search=False,
            web_fetch=False,
        )
        async with agent:
            result = await agent.run(question, deps=DeepAgentDeps())
        return str(result.output)


if __name__ == '__main__':
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('question')
    parser.add_argument('--model', help='a pydantic-ai model name, e.g. openai:gpt-5.4 (default: offline script)')
    parser.add_argument('--effort', default='medium', choices=['fast', 'low', 'medium', 'high', 'xhigh'])
    parser.add_argument('--state-dir', help='where the run ledger lives (default: PERPLEXITY_STATE_DIR)')
    args = parser.parse_args()
    print(asyncio.run(main(args.question, args.model, args.effort, args.state_dir)))
