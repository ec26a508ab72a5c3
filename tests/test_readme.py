"""Every README snippet marked `<!-- tested -->` runs, offline: the emulator for the API, a scripted model for LLMs.

A snippet names a real model (`'openai:gpt-5.4'`); here pydantic-ai resolves every model name to
`scripted_research_model()`, which researches the question with the Perplexity tools (in-process or over MCP)
and answers with what came back. Everything else in the snippet runs as written.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

import pytest

from pydantic_ai_perplexity import ResearchResult
from pydantic_ai_perplexity.emulator import Emulator
from pydantic_ai_perplexity.testing import scripted_research_model

pytestmark = pytest.mark.anyio

README = Path(__file__).parents[1] / 'README.md'
_BLOCK = re.compile(r'<!-- tested -->\n```python\n(.*?)\n```', re.DOTALL)


def readme_blocks() -> list[tuple[str, str]]:
    """(section heading, code) of each tested block, in order."""
    text = README.read_text(encoding='utf-8')
    blocks: list[tuple[str, str]] = []
    for match in _BLOCK.finditer(text):
        heading = re.findall(r'^## (.+)$', text[: match.start()], flags=re.MULTILINE)[-1]
        blocks.append((heading, match.group(1)))
    return blocks


BLOCKS = readme_blocks()


def test_each_user_has_a_tested_snippet():
    headings = {heading for heading, _ in BLOCKS}
    for user in ('pydantic-ai toolset', 'Deep agents', 'MCP clients', 'Notebooks', 'Pipelines'):
        assert any(user in heading for heading in headings), user


@pytest.fixture
def offline_models(monkeypatch: pytest.MonkeyPatch) -> None:
    import pydantic_ai.models

    monkeypatch.setattr(pydantic_ai.models, 'infer_model', lambda *_, **__: scripted_research_model(effort='fast'))


async def _close_mcp_children(namespace: dict[str, Any]) -> None:
    """pydantic-deep keeps its stdio servers alive after the agent exits; end them as an application would."""
    for value in namespace.values():
        for toolset in value if isinstance(value, list) else [value]:
            transport = getattr(getattr(getattr(toolset, 'wrapped', None), 'client', None), 'transport', None)
            if transport is not None and hasattr(transport, 'close'):
                await transport.close()


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:Default skills directory 'skills' does not exist:UserWarning")
@pytest.mark.parametrize(('heading', 'code'), BLOCKS, ids=[f'{i}-{h.split()[0]}' for i, (h, _) in enumerate(BLOCKS)])
async def test_snippet_runs(
    heading: str, code: str, emulator_env: Emulator, offline_models: None, capfd: pytest.CaptureFixture[str]
):
    namespace: dict[str, Any] = {'__name__': '__readme__'}
    compiled = compile(code, f'README.md ({heading})', 'exec', flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    try:
        outcome = eval(compiled, namespace)
        if outcome is not None:
            await outcome
    finally:
        await _close_mcp_children(namespace)
    out = capfd.readouterr().out
    result = namespace.get('result')
    if 'results' in namespace:  # the pipeline snippet
        assert [r.status for r in namespace['results']] == ['completed', 'completed']
        assert out.count('completed') == 2
    elif 'again' in namespace:  # the follow-up and reuse snippet
        first, second, again = (namespace[name] for name in ('first', 'second', 'again'))
        assert first.status == second.status == 'completed' and second.response_id != first.response_id
        assert again.reused and again.response_id == first.response_id and again.cost_usd == 0
        assert 'True' in out and 'Reused: the same question' in out
    elif isinstance(result, ResearchResult):  # the notebook snippet: the research result renders itself
        assert result.status == 'completed'
        page = result._repr_html_()
        assert all(s.url in page for s in result.cited_sources) and 'pplx-sources' in page
        assert 'searching:' in out  # LiveProgress printed the steps (no notebook front end here)
    else:  # an agent answered with what the research found
        assert 'Sources:' in str(result.output) and 'https://' in str(result.output)
