"""`configure_tracing()` for entry points, and the library's silence when nothing is configured."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import logfire
import pytest

from pydantic_ai_perplexity._core.tracing import configure_tracing
from pydantic_ai_perplexity.emulator import Emulator
from support.otlp_collector import otlp_collector

_TELEMETRY_ENV = ('LOGFIRE_', 'OTEL_')


def _child_env(emu: Emulator, state: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(_TELEMETRY_ENV) and not k.startswith('PERPLEXITY_')}
    env |= {'PERPLEXITY_API_KEY': emu.api_key, 'PERPLEXITY_BASE_URL': emu.base_url, 'PERPLEXITY_STATE_DIR': str(state)}
    return env | extra


def test_configure_tracing_does_nothing_when_there_is_nowhere_to_send_spans(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
):
    for name in list(os.environ):
        if name.startswith(_TELEMETRY_ENV):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)  # no .logfire/ credentials here
    assert configure_tracing() is False


def test_configure_tracing_settings_for_an_entry_point(monkeypatch: pytest.MonkeyPatch):
    for name in list(os.environ):
        if name.startswith(_TELEMETRY_ENV):
            monkeypatch.delenv(name)
    monkeypatch.setenv('OTEL_EXPORTER_OTLP_ENDPOINT', 'http://127.0.0.1:9')
    calls: list[dict[str, object]] = []
    monkeypatch.setattr(logfire, 'configure', lambda **settings: calls.append(settings))
    assert configure_tracing(scrubbing=logfire.ScrubbingOptions(extra_patterns=['mine']))
    assert configure_tracing(console=True, service_name='my-app')
    first, second = calls
    assert first['send_to_logfire'] == 'if-token-present'
    assert first['distributed_tracing'] is True
    assert first['console'] is False
    assert first['service_name'] == 'pydantic-ai-perplexity'
    assert first['scrubbing'] == logfire.ScrubbingOptions(extra_patterns=['mine', r'\bpplx-'])
    assert second['scrubbing'] == logfire.ScrubbingOptions(extra_patterns=[r'\bpplx-'])
    assert second['service_name'] == 'my-app'
    console = second['console']
    assert isinstance(console, logfire.ConsoleOptions) and console.output is sys.stderr


_SILENT_RUN = """
import anyio
from opentelemetry import trace
from pydantic_ai_perplexity import Researcher

async def main():
    async with Researcher(effort='fast') as r:
        result = await r.run('What is the EU AI Act? [[emulate: mcp]]', fetch_pages=1)
        assert result.done, result
        await r.search('EU AI Act')
    assert type(trace.get_tracer_provider()).__name__ == 'ProxyTracerProvider'

anyio.run(main)
"""


def test_without_an_sdk_research_runs_without_a_warning_or_a_line_of_output(emulator: Emulator, tmp_path: Path):
    env = _child_env(emulator, tmp_path) | {'PYTHONWARNINGS': 'error'}
    done = subprocess.run(
        [sys.executable, '-W', 'error', '-c', _SILENT_RUN], env=env, capture_output=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout == b''
    assert done.stderr == b''


@pytest.mark.slow
def test_the_cli_exports_spans_over_otlp_and_keeps_stdout_for_the_result(emulator: Emulator, tmp_path: Path):
    with otlp_collector() as (collector, endpoint):
        env = _child_env(emulator, tmp_path, OTEL_EXPORTER_OTLP_ENDPOINT=endpoint, LOGFIRE_CONSOLE='true')
        done = subprocess.run(
            [sys.executable, '-m', 'pydantic_ai_perplexity.cli', 'research', 'What is the EU AI Act?', '--effort',
             'fast', '--json'],
            env=env, capture_output=True, timeout=120, check=False,
        )  # fmt: skip
        deadline = time.monotonic() + 10
        while not collector.named('perplexity.research') and time.monotonic() < deadline:
            time.sleep(0.05)
    assert done.returncode == 0, done.stderr.decode()
    assert json.loads(done.stdout)['status'] == 'completed'  # stdout holds the result and nothing else
    assert b'perplexity.research' in done.stderr  # the console spans, on stderr
    [research] = collector.named('perplexity.research')
    assert research.service == 'pydantic-ai-perplexity'
    assert research.attributes['perplexity.status'] == 'completed'
    assert [name for name, _ in research.events] == ['perplexity.search']
