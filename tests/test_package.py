"""The public surface: every exported name resolves, and importing the package stays cheap."""

from __future__ import annotations

import subprocess
import sys

import pydantic_ai_perplexity


def test_every_exported_name_resolves_and_the_list_is_sorted():
    names = list(pydantic_ai_perplexity.__all__)
    assert names == sorted(names, key=str.casefold) or names == sorted(names)
    for name in names:
        assert getattr(pydantic_ai_perplexity, name) is not None, name
    assert pydantic_ai_perplexity.PerplexityError.__module__ == 'pydantic_ai_perplexity'


def test_the_research_function_is_not_shadowed_by_a_module():
    import pydantic_ai_perplexity._core.researcher  # noqa: F401  # importing the module must not rebind the name
    from pydantic_ai_perplexity import research

    assert callable(research) and research.__module__ == 'pydantic_ai_perplexity._core.researcher'


def test_importing_the_package_loads_no_http_stack_agent_framework_or_mcp_sdk():
    code = (
        'import sys, pydantic_ai_perplexity; '
        "print(sorted(m for m in ('httpx2', 'pydantic_ai', 'mcp', 'pydantic_deep', 'logfire') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == '[]'
