"""Money and state through the ways in they were found: the budget cap against hostile MCP callers over HTTP, a
script that never closes its `Researcher`, and a disk that fills up under a running MCP server.

Each test records its row for the README's Reliability section. (`tests/test_budget_guarantee.py` and
`tests/test_ledger_lifecycle.py` prove the same on both ledger engines, and at random.)
"""

from __future__ import annotations

import json
import os
import random
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from pydantic_ai_perplexity._ledger import EPSILON_USD, Ledger
from pydantic_ai_perplexity.emulator import Emulator
from support.disk import fill, mounted_small_disk
from support.mcp_servers import server_env
from support.reliability import record
from support.scale import Instance, Outcome, call_tool

pytestmark = pytest.mark.slow

#: A script that researches three questions at once and never closes its researcher (nor the emulator).
UNCLOSED = """
import asyncio, sys
from pydantic_ai_perplexity import Researcher
from pydantic_ai_perplexity.emulator import Emulator

emu = Emulator(time_scale=0.001).__enter__()

async def main():
    r = Researcher(api_key=emu.api_key, base_url=emu.base_url, ledger=sys.argv[1], effort='fast', wait_seconds=30)
    results = await asyncio.gather(*(r.run(f'What is solar power? ({i})') for i in range(3)))
    print(' '.join(result.response_id for result in results), flush=True)

asyncio.run(main())
"""


def completed(path: Path, ids: list[str]) -> int:
    db = sqlite3.connect(path)
    try:
        rows = dict(db.execute('SELECT response_id, status FROM runs').fetchall())
    finally:
        db.close()
    return sum(rows.get(i) == 'completed' for i in ids)


def test_scripts_that_never_close_their_researcher_exit_cleanly_with_every_row(tmp_path: Path) -> None:
    runs, width, exits, written = 12, 4, 0, 0
    env = {**os.environ, 'PYDANTIC_DISABLE_PLUGINS': 'logfire-plugin'}
    for batch in range(runs // width):
        paths = [tmp_path / f'{batch}-{n}.sqlite3' for n in range(width)]
        procs = [
            subprocess.Popen(
                [sys.executable, '-c', UNCLOSED, str(p)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
            )
            for p in paths
        ]
        for path, proc in zip(paths, procs, strict=True):
            out, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, (proc.returncode, err.decode()[-2000:])  # once 139 (SIGSEGV) in 2 of 3
            exits += 1
            written += completed(path, out.decode().split())
    assert written == 3 * runs
    record(
        'ledger', 'researcher', f'a script that never closes its `Researcher` (x{runs})',
        outcome=f'{exits}/{runs} exit 0; {written}/{3 * runs} runs written', lost=3 * runs - written,
    )  # fmt: skip


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    with mounted_small_disk(tmp_path) as mount:
        yield mount


@pytest.mark.compat  # mounts a small filesystem: root
@pytest.mark.anyio
async def test_a_disk_that_fills_up_under_an_mcp_server_loses_no_run(small_disk: Path) -> None:
    state = small_disk / 'state'
    with Emulator(time_scale=0.001) as emu:
        instance = Instance(server_env(emu, state, PERPLEXITY_WAIT_SECONDS='30'))
        try:
            instance.wait_listening()
            async with httpx2.AsyncClient(timeout=60) as http:

                async def research(n: int) -> str:
                    question = {'query': f'What is solar power? ({n})', 'effort': 'fast'}
                    outcome = await call_tool(http, instance.url, 'perplexity_research', question)
                    assert outcome.ok, outcome
                    return str(outcome.structured['response_id'])

                ids = [await research(1)]
                filler = fill(small_disk)
                ids.append(await research(2))
                degraded = (await http.get(instance.health_url)).json()
                assert degraded['ledger'] == 'degraded', degraded
                filler.unlink()
                ids.append(await research(3))
                healthy = (await http.get(instance.health_url)).json()
                assert healthy == {'status': 'ok', 'ledger': 'ok'}
                listed = await call_tool(http, instance.url, 'perplexity_research_list', {'limit': 10})
        finally:
            instance.stop()
    shown = sum(i in listed.text for i in ids)
    on_disk = completed(state / 'ledger.sqlite3', ids)
    assert shown == on_disk == 3
    record(
        'ledger', 'mcp-http', 'disk full between two of three research calls (1 MiB tmpfs), then freed',
        outcome=f'{on_disk}/3 runs on disk and listed; /healthz said degraded, then ok', lost=3 - on_disk,
    )  # fmt: skip


@pytest.mark.anyio
@pytest.mark.parametrize(
    ('case', 'cap', 'calls', 'question'),
    [
        ('5 concurrent `fast` calls, 800 KB questions', 0.05, 5, {'query': 'solar power ' * 70_000, 'effort': 'fast'}),
        ('a 900 KB question', 0.01, 1, {'query': 'x' * 900_000, 'effort': 'fast'}),
        (
            '`fast` on `openai/gpt-5.5` with 200k characters of instructions',
            0.10,
            3,
            {
                'query': 'What is solar power?',
                'effort': 'fast',
                'model': 'openai/gpt-5.5',
                'instructions': 'Be thorough. ' * 16_000,
            },
        ),
        # A cap some of them fit (a short `fast` question is reserved at about $0.22 at live prices).
        ('20 concurrent short `fast` calls', 1.00, 20, {'query': 'What is solar power?', 'effort': 'fast'}),
    ],
)
async def test_hostile_callers_never_spend_over_the_cap(
    tmp_path: Path, case: str, cap: float, calls: int, question: dict[str, str]
) -> None:
    with Emulator(time_scale=0.001) as emu:
        instance = Instance(server_env(emu, tmp_path, PERPLEXITY_BUDGET_USD=str(cap), PERPLEXITY_WAIT_SECONDS='30'))
        outcomes: list[Outcome] = []
        try:
            instance.wait_listening()
            async with httpx2.AsyncClient(timeout=120) as http:

                async def one(n: int) -> None:
                    asked = {**question, 'query': f'{question["query"]} ({n})'}
                    outcomes.append(await call_tool(http, instance.url, 'perplexity_research', asked))

                async with anyio.create_task_group() as tg:
                    for n in range(calls):
                        tg.start_soon(one, n)
        finally:
            instance.stop()
    assert all(o.status == 200 and o.result is not None for o in outcomes), outcomes[:2]
    refused = [o for o in outcomes if not o.ok]
    assert all('Budget exceeded' in o.text for o in refused), [o.text[:300] for o in refused]
    with Ledger(tmp_path / 'ledger.sqlite3') as ledger:
        spent = ledger.spent_usd()
    assert spent <= cap + EPSILON_USD
    record(
        'budget', 'mcp-http', case, cap=cap, calls=calls, admitted=calls - len(refused), refused=len(refused),
        spent=round(spent, 4), over=max(0.0, round(spent - cap, 6)),
    )  # fmt: skip


# --- hostile price tables -------------------------------------------------------------------------------------------

#: Tables a user (or a bad deploy) can put in PERPLEXITY_PRICES: each must be refused with a ConfigurationError that
#: names the variable, or accepted without lowering any reservation; never a traceback of another kind.
HOSTILE_TABLES: list[tuple[str, str]] = [
    ('zeros', json.dumps({'models': {'openai/gpt-5.5': [0, 0]}, 'search_usd': 0, 'fetch_usd': 0})),
    ('negative', json.dumps({'models': {'acme/x': [-1, 5]}})),
    ('huge numbers', json.dumps({'models': {'acme/x': [1e308, 1e308]}, 'efforts': {'high': {'max_steps': 10**30}}})),
    ('NaN and inf', '{"models": {"acme/x": [NaN, Infinity]}}'),
    ('-inf fee', '{"search_usd": -Infinity}'),
    ('booleans', json.dumps({'models': {'acme/x': [True, False]}})),
    ('strings', json.dumps({'models': {'acme/x': ['1', '2']}, 'efforts': {'fast': {'max_steps': 'two'}}})),
    ('wrong shapes', json.dumps({'models': [1, 2, 3], 'efforts': 'fast'})),
    ('three prices', json.dumps({'models': {'acme/x': [1, 2, 3]}})),
    ('not a model id', json.dumps({'models': {'no slash': [1, 2], '../../etc': [1, 2]}})),
    ('unknown effort', json.dumps({'efforts': {'ultra': {'max_steps': 3}}})),
    ('lowered ceiling', json.dumps({'efforts': {'xhigh': {'system_tokens': 0, 'reasoning_tokens': 0}}})),
    ('fewer tokens per byte', json.dumps({'bytes_per_token': 8})),
    ('deep nesting', '{"models": ' + '[' * 200_000 + ']' * 200_000 + '}'),
    ('deep objects', '{"efforts": ' + '{"a": ' * 5_000 + '1' + '}' * 5_000 + '}'),
    ('many models', json.dumps({'models': {f'acme/m{i}': [1, 2] for i in range(20_000)}})),
    ('not an object', '[1, 2, 3]'),
    ('negotiated not a bool', json.dumps({'negotiated': 'yes'})),
    ('negotiated zeros', json.dumps({'negotiated': True, 'models': {'openai/gpt-5.5': [0, 0]}})),
    ('a price above any plausible one', json.dumps({'models': {'acme/x': [10**7, 1]}})),
]


@pytest.mark.parametrize(('case', 'text'), HOSTILE_TABLES, ids=[c for c, _ in HOSTILE_TABLES])
def test_a_hostile_price_table_is_refused_clearly_and_never_crashes(
    case: str, text: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pydantic_ai_perplexity._base.errors import ConfigurationError
    from pydantic_ai_perplexity._domain.pricing import default_prices

    for given in (text, str(_written(tmp_path / 'prices.json', text))):  # JSON text, and a file's path
        monkeypatch.setenv('PERPLEXITY_PRICES', given)
        with pytest.raises(ConfigurationError) as refused:
            default_prices()
        assert 'PERPLEXITY_PRICES' in str(refused.value) and len(str(refused.value)) < 600, case


def _written(path: Path, text: str) -> Path:
    path.write_text(text, encoding='utf-8')
    return path


def test_an_unreadable_or_huge_price_file_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pydantic_ai_perplexity._base.errors import ConfigurationError
    from pydantic_ai_perplexity._domain.pricing import default_prices

    huge = tmp_path / 'huge.json'
    huge.write_text('{"models": {' + ', '.join(f'"acme/m{i}": [1, 2]' for i in range(100_000)) + '}}')
    binary = tmp_path / 'binary.json'
    binary.write_bytes(b'{"models": {"\xff\xfe": [1, 2]}}')
    for path, words in (
        (huge, 'larger than 1 MiB'),
        (binary, 'not UTF-8'),
        (tmp_path, 'cannot read'),
        (tmp_path / 'nope', 'cannot read'),
    ):
        monkeypatch.setenv('PERPLEXITY_PRICES', str(path))
        with pytest.raises(ConfigurationError, match=words):
            default_prices()


def test_random_price_tables_never_crash_and_never_lower_a_reservation() -> None:
    from pydantic_ai_perplexity._base.errors import ConfigurationError
    from pydantic_ai_perplexity._domain.pricing import fallback_prices, load_prices, reservation

    rnd = random.Random(21)
    values: list[Any] = [
        0,
        -1,
        1,
        0.5,
        3,
        1e-12,
        1e9,
        1e308,
        float('nan'),
        float('inf'),
        True,
        None,
        'x',
        [],
        {},
        [1, 2],
    ]
    keys = ['models', 'efforts', 'search_usd', 'fetch_usd', 'bytes_per_token', 'negotiated', 'nope']
    fields = ['max_steps', 'output_tokens', 'tool_calls', 'search_tokens', 'fetch_urls', 'page_tokens', 'system_tokens',
              'reasoning_tokens', 'floor_usd', 'model', 'bogus']  # fmt: skip
    models = ['openai/gpt-5.5', 'acme/x', 'bad id', 'perplexity/sonar']
    base = {e: reservation('q', {'effort': e}, fallback_prices()).usd for e in ('fast', 'low', 'medium', 'high')}
    accepted = refused = 0
    for _ in range(3_000):
        table: dict[str, Any] = {}
        for key in rnd.sample(keys, rnd.randint(1, 3)):
            if key == 'models':
                table[key] = {rnd.choice(models): [rnd.choice(values), rnd.choice(values)] for _ in range(2)}
            elif key == 'efforts':
                table[key] = {rnd.choice(['fast', 'high', 'ultra']): {rnd.choice(fields): rnd.choice(values)}}
            elif key == 'negotiated':
                table[key] = rnd.choice([True, False, 'yes'])
            else:
                table[key] = rnd.choice(values)
        try:
            loaded = load_prices(table)
        except ConfigurationError as exc:
            assert 'PERPLEXITY_PRICES' in str(exc)
            refused += 1
            continue
        accepted += 1
        if loaded.source == 'negotiated':
            continue
        limits = table.get('efforts', {})
        for effort, usd in base.items():
            if effort in limits:  # a limit the request sends changed: priced as sent, so it may go down
                continue
            assert reservation('q', {'effort': effort}, loaded).usd >= usd - 1e-9, table
    assert accepted and refused


@pytest.mark.anyio
async def test_ten_concurrent_runs_under_a_cent_with_a_zeros_table_spend_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pydantic_ai_perplexity import Researcher
    from pydantic_ai_perplexity._base.errors import BudgetExceededError, ConfigurationError

    # Was: a table of zeros made every reservation $0, and 10 concurrent runs under a $0.01 cap spent $0.051.
    monkeypatch.setenv('PERPLEXITY_PRICES', json.dumps({'models': {'openai/gpt-6-luna': [0, 0]}, 'search_usd': 0}))
    outcomes: list[str] = []
    with Emulator(time_scale=0.001) as emu:
        async with Researcher(
            api_key=emu.api_key, base_url=emu.base_url, ledger=tmp_path / 'l.sqlite3', budget_usd=0.01
        ) as r:

            async def one(n: int) -> None:
                try:
                    await r.run(f'What is solar power? ({n})', effort='fast', wait_seconds=30)
                    outcomes.append('ran')
                except ConfigurationError:
                    outcomes.append('bad table')
                except BudgetExceededError:
                    outcomes.append('refused')

            async with anyio.create_task_group() as tg:
                for n in range(10):
                    tg.start_soon(one, n)
        posts = [q for q in emu.requests if q.method == 'POST']
    assert outcomes == ['bad table'] * 10 and posts == []
    with Ledger(tmp_path / 'l.sqlite3') as ledger:
        assert ledger.spent_usd() == 0.0
