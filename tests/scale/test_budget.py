"""One budget across a team deployment: a cap of N reservations lets exactly N runs start through three instances.

Each instance checks the cap and reserves a run's estimate in one PostgreSQL transaction, serialized across
instances, so concurrent calls through the balancer can never together overrun it. The runs outlast the burst, so
no actual cost replaces an estimate while the calls are being decided.
"""

from __future__ import annotations

from collections.abc import Iterator

import anyio
import httpx2
import pytest

from pydantic_ai_perplexity._domain.pricing import reservation
from pydantic_ai_perplexity._ledger import Ledger
from pydantic_ai_perplexity.emulator import Emulator
from support.postgres import fresh_schema
from support.scale import LEGACY, MODERN, Outcome, Topology, call_tool, creates, ledger_rows

pytestmark = [pytest.mark.compat, pytest.mark.anyio]  # nginx in front of the instances

TOKEN = 'tok-budget-61d0'
ALLOWED = 12
QUESTION = 'Survey grid storage [[emulate: duration=1000]] ({n})'
#: The most one call's run is reserved at (a two-digit `n`).
RESERVED = reservation(QUESTION.format(n=10), {'effort': 'fast'}).usd
CALLS = 60


@pytest.fixture(scope='module')
def capped(tmp_path_factory: pytest.TempPathFactory, nginx_binary: str, emu: Emulator) -> Iterator[Topology]:
    # Room for ALLOWED reservations and half of one more (they differ by a few tokens of question: see QUESTION).
    cap = (ALLOWED + 0.5) * RESERVED
    with (
        fresh_schema() as url,
        Topology(
            tmp_path_factory.mktemp('budget'),
            base_url=emu.base_url,
            api_key=emu.api_key,
            ledger_url=url,
            nginx=nginx_binary,
            PERPLEXITY_MCP_TOKEN=TOKEN,
            PERPLEXITY_BUDGET_USD=f'{cap:.2f}',
            PERPLEXITY_WAIT_SECONDS='1',
        ) as topology,
    ):
        yield topology


async def test_a_cap_of_n_estimated_runs_lets_exactly_n_start_across_the_instances(
    capped: Topology, emu: Emulator
) -> None:
    before = creates(emu.requests)
    outcomes: list[Outcome] = []
    async with httpx2.AsyncClient(timeout=60, limits=httpx2.Limits(max_connections=CALLS + 10)) as http:

        async def one(n: int) -> None:
            question = {'query': QUESTION.format(n=n), 'effort': 'fast'}
            era = MODERN if n % 2 else LEGACY
            outcomes.append(await call_tool(http, capped.url, 'perplexity_research', question, token=TOKEN, era=era))

        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                for n in range(CALLS):
                    tg.start_soon(one, n)
    assert all(o.status == 200 and o.result is not None for o in outcomes), [o for o in outcomes if not o.result][:3]
    admitted = [o for o in outcomes if o.ok]
    refused = [o for o in outcomes if not o.ok]
    assert len(admitted) == ALLOWED, [o.text for o in refused][:2]
    assert all('Budget exceeded' in o.text for o in refused)
    # Counted where the runs start (the API) and where they are recorded (the ledger): exactly the cap's worth.
    assert creates(emu.requests) - before == ALLOWED
    rows = ledger_rows(capped.ledger_url)
    assert len(rows) == ALLOWED and all(r['response_id'].startswith('resp_') for r in rows)
    assert {r['response_id'] for r in rows} == {o.structured['response_id'] for o in admitted}
    with Ledger(capped.ledger_url) as ledger:
        assert ALLOWED * reservation(QUESTION.format(n=0), {'effort': 'fast'}).usd <= ledger.spent_usd()
        assert ledger.spent_usd() <= ALLOWED * RESERVED + 1e-9
    # The balancer spread the calls: several instances decided, and together they kept the cap.
    assert capped.nginx is not None
    served = {ports[-1] for method, _, _, ports in capped.nginx.access() if method == 'POST'}
    assert len(served) == 3
