"""A plain pydantic-ai agent that turns Perplexity research into a typed, cited report.

    uv run python agents/research_assistant.py "What is the status of fusion energy pilot plants?"   # offline
    uv run python agents/research_assistant.py "..." --model openai:gpt-5.4                          # a real model

The report is a pydantic model: each finding names the sources it rests on, and only sources the research
actually cited can appear. Offline it uses a scripted model and the built-in emulator.
"""

from __future__ import annotations

import argparse
import asyncio
import os

from pydantic import BaseModel, Field
from pydantic_ai import Agent

from pydantic_ai_perplexity import PerplexityToolset, ResearchResult
from pydantic_ai_perplexity._present.model_text import answer_with_source_numbers
from pydantic_ai_perplexity.emulator import Emulator
from pydantic_ai_perplexity.testing import scripted_research_model


class CitedSource(BaseModel):
    n: int = Field(description='The number the answer uses for this source, as in [n].')
    title: str
    url: str


class ResearchReport(BaseModel):
    """A short cited report."""

    question: str
    summary: str = Field(description='The answer in a few sentences, keeping the [n] markers.')
    sources: list[CitedSource] = Field(description='Every source the summary cites.')
    response_id: str | None = Field(default=None, description='The Perplexity run behind the report.')


def report_from(result: ResearchResult) -> dict[str, object]:
    """How the offline script fills the report: straight from the research result."""
    return ResearchReport(
        question=result.query or '',
        summary=answer_with_source_numbers(result),
        sources=[CitedSource(n=s.n, title=s.title, url=s.url) for s in result.cited_sources],
        response_id=result.response_id,
    ).model_dump()


def build_agent(model: str | None, toolset: PerplexityToolset) -> Agent[None, ResearchReport]:
    return Agent(
        model or scripted_research_model(build_output=report_from),
        output_type=ResearchReport,
        toolsets=[toolset],
        instructions='Research the question with perplexity_research, then report only what the sources support.',
    )


async def main(question: str, model: str | None, effort: str) -> ResearchReport:
    if os.environ.get('PERPLEXITY_API_KEY'):
        toolset = PerplexityToolset(effort=effort)
        async with build_agent(model, toolset) as agent:
            return (await agent.run(question)).output
    async with Emulator() as emu:
        toolset = PerplexityToolset(effort=effort, api_key=emu.api_key, base_url=emu.base_url)
        async with build_agent(model, toolset) as agent:
            return (await agent.run(question)).output


if __name__ == '__main__':
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('question')
    parser.add_argument('--model', help='a pydantic-ai model name, e.g. openai:gpt-5.4 (default: offline script)')
    parser.add_argument('--effort', default='low', choices=['fast', 'low', 'medium', 'high', 'xhigh'])
    args = parser.parse_args()
    print(asyncio.run(main(args.question, args.model, args.effort)).model_dump_json(indent=2))
