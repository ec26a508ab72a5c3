"""A missing extra is named with the install the README gives (from a checkout), not only the published name."""

from __future__ import annotations

import subprocess
import sys

import pytest

from pydantic_ai_perplexity._base.errors import install_hint
from pydantic_ai_perplexity.mcp.clients import config
from pydantic_ai_perplexity.mcp.server import _build as server


def test_the_hint_names_the_checkout_install_first_and_the_published_one_after():
    assert install_hint('mcp') == (
        'from a checkout: pip install ".[mcp]"; once published: pip install "pydantic-ai-perplexity[mcp]"'
    )


def test_the_mcp_server_without_the_sdk_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    monkeypatch.setattr(server, 'find_spec', lambda name: None if name == 'mcp' else object())
    with pytest.raises(SystemExit) as exited:
        server.serve()
    assert exited.value.code == 2
    assert f'install it ({install_hint("mcp")})' in capsys.readouterr().err


@pytest.mark.parametrize(
    ('make', 'missing', 'extra'),
    [
        (config.perplexity_mcp_config, 'pydantic_deep', 'deep'),
        (config.perplexity_mcp_toolset, 'fastmcp', 'pydantic-ai,mcp'),
    ],
    ids=['perplexity_mcp_config', 'perplexity_mcp_toolset'],
)
def test_the_mcp_helpers_without_their_extra_say_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch, make: object, missing: str, extra: str
):
    monkeypatch.setitem(sys.modules, missing, None)  # `import` of it (or of a submodule) raises ImportError
    for name in [n for n in sys.modules if n.startswith(f'{missing}.')]:
        monkeypatch.setitem(sys.modules, name, None)
    with pytest.raises(ImportError) as caught:
        make()  # type: ignore[operator]
    assert f'pip install ".[{extra}]"' in str(caught.value) and install_hint(extra) in str(caught.value)


def test_the_toolset_without_pydantic_ai_says_how_to_install_it():
    code = "import sys; sys.modules['pydantic_ai'] = None; import pydantic_ai_perplexity._pydantic_ai.toolset"
    done = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert (
        f'ImportError: PerplexityToolset needs pydantic-ai: install it ({install_hint("pydantic-ai")}).' in done.stderr
    )
