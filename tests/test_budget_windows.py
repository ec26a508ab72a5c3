"""Budgets people mean, on both engines: UTC day and month windows, a per-run ceiling, limits per caller and per
scope, `warn_at`, exact money (integer micro-dollars, migrated from the float columns), and concurrent admissions
that never pass any window. Ways in: the `Ledger` (the one atomic admission), the `Researcher` against the emulator
(with an injected clock for the rollover at UTC midnight) and the settings; the CLI's `jobs spend` and the MCP
server's named callers are in tests/cli/test_cli.py and tests/mcp/test_http.py.
"""

from __future__ import annotations

import logging
import re
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from logfire.testing import CaptureLogfire

from pydantic_ai_perplexity import Budget, BudgetExceededError, BudgetWarning, Limits, Researcher
from pydantic_ai_perplexity._base.errors import ConfigurationError
from pydantic_ai_perplexity._domain.budget import applicable_limits, micros, window_start
from pydantic_ai_perplexity._domain.options import ResearchOptions
from pydantic_ai_perplexity._domain.pricing import reservation
from pydantic_ai_perplexity._domain.settings import Settings
from pydantic_ai_perplexity._ledger import BudgetUnenforceableError, Ledger, RunRecord
from pydantic_ai_perplexity.emulator import Emulator
from support import ledger as shared
from support.ledger import JOIN_TIMEOUT, join_all, raw

# The ledger's fixtures: each test that takes `target` or `ledger` runs on SQLite and on PostgreSQL.
engine, path, target, ledger, spawn = shared.engine, shared.path, shared.target, shared.ledger, shared.spawn

NOON = datetime(2026, 10, 9, 12, 0, tzinfo=UTC)
JUST_BEFORE_MIDNIGHT = datetime(2026, 10, 9, 23, 59, 59, 999999, tzinfo=UTC)
MIDNIGHT = datetime(2026, 10, 10, 0, 0, tzinfo=UTC)


def run(usd: float, *, at: datetime = NOON, **fields: Any) -> RunRecord:
    fields.setdefault('query', 'q')
    fields.setdefault('origin', 'api')
    return RunRecord(created_at=at, estimate_usd=usd, **fields)


def admit(ledger: Ledger, budget: Budget, usd: float, *, at: datetime = NOON, **fields: Any) -> str:
    """Reserve a run of exactly `usd` under every limit of `budget` that applies to it; its key."""
    record = run(usd, at=at, **fields)
    limits, _ = applicable_limits(budget, caller=record.caller, scope=record.scope, at=at)
    return ledger.reserve(record, cap_usd=None, limits=limits)


# --- exact money ----------------------------------------------------------------------------------------------------


def test_money_is_summed_and_compared_in_integer_micro_dollars(ledger: Ledger) -> None:
    budget = Budget(day=0.3)
    for usd in (0.1, 0.2):  # 0.1 + 0.2 is 0.30000000000000004 in floats: over a 0.3 cap by float arithmetic
        admit(ledger, budget, usd)
    assert ledger.spent_usd() == 0.3
    with pytest.raises(BudgetExceededError):
        admit(ledger, budget, 0.000001)  # one micro-dollar more does not fit
    assert micros(0.1) == 100_000 and micros('0.0000005') == 1 and micros(19.99) == 19_990_000  # type: ignore[arg-type]


def test_the_migration_converts_existing_float_money_to_micro_dollars(target: str) -> None:
    # A ledger as the version before made it: float money only, schema version 3.
    with Ledger(target) as ledger:
        ledger.record_start(run(0.25, response_id='resp_estimate'))
        ledger.record_start(run(1.0, response_id='resp_done', cost_usd=0.123457))
    for sql in (
        'DROP INDEX runs_scope',
        'ALTER TABLE runs DROP COLUMN cost_micros',
        'ALTER TABLE runs DROP COLUMN estimate_micros',
        'ALTER TABLE runs DROP COLUMN scope',
        "DELETE FROM _migrations WHERE name = 'm004_money_in_micros_and_scope'",
    ):
        raw(target, sql)
    if not target.startswith('postgresql://'):
        raw(target, 'PRAGMA user_version = 3')
    with Ledger(target) as ledger:
        assert ledger.spent_usd() == 0.25 + 0.123457
        rows = raw(target, 'SELECT response_id, cost_micros, estimate_micros FROM runs ORDER BY response_id')
    assert rows == [('resp_done', 123457, 1_000_000), ('resp_estimate', None, 250_000)]


def test_rows_written_by_an_older_version_count_their_float_money(ledger: Ledger, target: str) -> None:
    ledger.record_start(run(0.5, response_id='resp_new'))
    # An older process sharing the ledger writes the float columns only.
    raw(
        target,
        'INSERT INTO runs (response_id, created_at, updated_at, query, status, origin, estimate_usd, cost_usd) VALUES '
        "('resp_old', '2026-10-09T12:00:00.000000+00:00', '2026-10-09T12:00:00.000000+00:00', 'q', 'completed', "
        "'api', 2.0, 0.75)",
    )
    raw(
        target,
        'INSERT INTO runs (response_id, created_at, updated_at, query, status, origin, estimate_usd) VALUES '
        "('resp_old_going', '2026-10-09T12:00:00.000000+00:00', '2026-10-09T12:00:00.000000+00:00', 'q', "
        "'in_progress', 'api', 0.25)",
    )
    assert ledger.spent_usd() == 0.5 + 0.75 + 0.25
    with pytest.raises(BudgetExceededError):
        admit(ledger, Budget(total=1.5), 0.01)


# --- windows --------------------------------------------------------------------------------------------------------


def test_windows_start_at_utc_midnight_and_on_the_first_of_the_month() -> None:
    at = datetime(2026, 10, 9, 1, 30, tzinfo=UTC)
    assert window_start('day', at) == datetime(2026, 10, 9, tzinfo=UTC)
    assert window_start('month', at) == datetime(2026, 10, 1, tzinfo=UTC)
    assert window_start('total', at) is None
    # 01:30 UTC is still the evening before in New York: the window is UTC's.
    evening = at.astimezone(ZoneInfo('America/New_York'))
    assert window_start('day', evening) == datetime(2026, 10, 9, tzinfo=UTC)


def test_the_day_window_rolls_over_at_utc_midnight(ledger: Ledger) -> None:
    budget = Budget(day=1.0)
    admit(ledger, budget, 0.6, at=datetime(2026, 10, 8, 12, tzinfo=UTC))  # yesterday: not today's
    admit(ledger, budget, 1.0, at=NOON)
    with pytest.raises(BudgetExceededError) as refused:
        admit(ledger, budget, 0.01, at=JUST_BEFORE_MIDNIGHT)
    message = str(refused.value)
    assert 'the daily limit is $1.00' in message and 'since 2026-10-09 00:00 UTC' in message
    assert 'PERPLEXITY_BUDGET_DAY_USD' in message and 'Budget(day=...)' in message
    assert admit(ledger, budget, 1.0, at=MIDNIGHT)  # a new day: a new window
    assert ledger.spent_usd(since=MIDNIGHT) == 1.0


def test_the_month_and_total_windows_hold_across_days(ledger: Ledger) -> None:
    budget = Budget(month=2.0, total=2.5, day=5.0)
    admit(ledger, budget, 1.5, at=datetime(2026, 9, 30, 12, tzinfo=UTC))  # last month
    admit(ledger, budget, 1.0, at=datetime(2026, 10, 1, tzinfo=UTC))
    with pytest.raises(BudgetExceededError) as refused:  # the month has room for 1.0 more, the total does not
        admit(ledger, budget, 0.5, at=datetime(2026, 10, 2, tzinfo=UTC))
    assert refused.value.cap_usd == 2.5 and refused.value.spent_usd == 2.5
    assert 'PERPLEXITY_BUDGET_USD' in str(refused.value)


def test_a_caller_has_its_own_limits_and_others_are_not_affected(ledger: Ledger) -> None:
    budget = Budget(day=10, per_caller={'alice': Limits(day=1.0), '*': Limits(day=2.0)})
    admit(ledger, budget, 1.0, caller='alice')
    with pytest.raises(BudgetExceededError) as refused:
        admit(ledger, budget, 0.5, caller='alice')
    assert "the daily limit of caller 'alice' is $1.00" in str(refused.value)
    assert 'PERPLEXITY_BUDGET_PER_CALLER' in str(refused.value)
    admit(ledger, budget, 2.0, caller='bob')  # '*': each other caller on its own
    admit(ledger, budget, 2.0, caller='carol')
    with pytest.raises(BudgetExceededError):
        admit(ledger, budget, 0.01, caller='bob')
    admit(ledger, budget, 4.0)  # no caller: everyone's day only
    assert ledger.spent_usd(caller='alice') == 1.0 and ledger.spent_usd() == 9.0


def test_a_scope_has_its_own_limits(ledger: Ledger) -> None:
    budget = Budget(per_scope={'project-a': Limits(total=1.0)})
    admit(ledger, budget, 1.0, scope='project-a')
    with pytest.raises(BudgetExceededError) as refused:
        admit(ledger, budget, 0.5, scope='project-a')
    assert "scope 'project-a'" in str(refused.value)
    admit(ledger, budget, 5.0, scope='project-b')
    assert ledger.spent_usd(scope='project-a') == 1.0 and ledger.spent_usd(scope='project-b') == 5.0


def test_emulated_runs_never_use_up_a_real_window(ledger: Ledger) -> None:
    budget = Budget(day=1.0)
    admit(ledger, budget, 1.0, emulated=True)
    admit(ledger, budget, 1.0)  # real: only real spend counts
    with pytest.raises(BudgetExceededError):
        admit(ledger, budget, 0.5, emulated=True)  # emulated: everything counts


def test_a_window_cannot_be_enforced_without_a_working_ledger(tmp_path: Path) -> None:
    (tmp_path / 'file').write_text('not a directory')
    with Ledger(tmp_path / 'file' / 'ledger.sqlite3') as ledger, pytest.warns(UserWarning):
        with pytest.raises(BudgetUnenforceableError):
            admit(ledger, Budget(day=1.0), 0.1)


# --- the admission: per run, warnings, spend ------------------------------------------------------------------------


def request_for(effort: str) -> dict[str, Any]:
    return dict(ResearchOptions.parse(None, effort=effort).to_request('medium'))


def test_a_run_over_the_per_run_ceiling_is_refused_or_tightened_when_asked(ledger: Ledger) -> None:
    query, request = 'What is new in heat pumps?', request_for('high')
    bound = reservation(query, request).usd
    ceiling = round(bound / 2, 6)
    with pytest.raises(BudgetExceededError) as by_default:  # refused unless tightening is asked for, as under a cap
        ledger.admit(run(0, query=query), query, request, cap_usd=None, budget=Budget(per_run=ceiling))
    assert 'over the per-run limit' in str(by_default.value)
    tighten = {'cap_usd': None, 'on_budget': 'tighten'}
    alone = ledger.admit(run(0, query=query), query, request, budget=Budget(per_run=ceiling), **tighten)
    assert alone.changes and alone.record.estimate_usd <= ceiling < bound
    assert alone.token is None  # nothing to check against spend: recorded once the run has its id
    with_a_day = ledger.admit(run(0, query=query), query, request, budget=Budget(per_run=ceiling, day=9), **tighten)
    assert with_a_day.changes == alone.changes and with_a_day.token is not None
    assert ledger.spent_usd() == with_a_day.record.estimate_usd
    with pytest.raises(BudgetExceededError) as refused:
        ledger.admit(run(0, query=query), query, request, budget=Budget(per_run=0.000001), **tighten)
    message = str(refused.value)
    assert 'over the per-run limit of $0.0000' in message and 'PERPLEXITY_BUDGET_PER_RUN_USD' in message


def test_a_window_with_little_room_left_refuses_the_run_or_tightens_it_when_asked(ledger: Ledger) -> None:
    query, request = 'What is new in heat pumps?', request_for('high')
    bound = reservation(query, request).usd
    budget = Budget(day=bound, per_caller={'alice': Limits(day=bound * 0.75)})
    admit(ledger, budget, bound * 0.5)  # someone else's run: everyone's day has half left, alice's 3/4
    with pytest.raises(BudgetExceededError) as by_default:
        ledger.admit(run(0, query=query, caller='alice'), query, request, cap_usd=None, budget=budget)
    assert 'the daily limit' in str(by_default.value)
    admission = ledger.admit(
        run(0, query=query, caller='alice'), query, request, cap_usd=None, budget=budget, on_budget='tighten'
    )
    assert admission.changes and admission.record.estimate_usd <= bound * 0.5 + 1e-6
    assert admission.token is not None


@pytest.mark.parametrize('warn_at', [0.5, '50%', '$0.5'])
def test_warn_at_is_crossed_by_exactly_one_admission_per_window(ledger: Ledger, warn_at: float | str) -> None:
    budget = Budget(day=1.0, warn_at=warn_at)
    query, request = 'q', request_for('fast')
    each = reservation(query, request).usd
    crossed: list[tuple[datetime, BudgetWarning]] = []
    for at in (NOON, NOON + timedelta(days=1)):
        admitted = 0
        while True:
            try:
                admission = ledger.admit(run(0, at=at), query, request, cap_usd=None, budget=budget)
            except BudgetExceededError:
                break
            admitted += 1
            crossed += [(at, w) for w in admission.warnings]
        assert admitted == micros(1.0) // micros(each)  # exactly as many as fit, in integers
    assert [at for at, _ in crossed] == [NOON, NOON + timedelta(days=1)]  # once per window, each day again
    warning = crossed[0][1]
    assert warning.limit.window == 'day' and warning.warn_usd == 0.5 and 0.5 <= warning.spent_usd < 0.5 + each
    assert 'the daily limit is' in warning.message and 'used' in warning.message


def test_spend_shows_spent_held_and_left_per_window_and_caller(ledger: Ledger) -> None:
    budget = Budget(day=5, total=20, per_caller={'alice': Limits(day=1)})
    ledger.record_start(run(1.0, response_id='resp_a', caller='alice', cost_usd=0.4, at=NOON))
    ledger.record_start(run(0.3, response_id='resp_b', caller='alice', at=NOON))  # still going: held
    ledger.record_start(run(2.0, response_id='resp_c', caller='bob', cost_usd=1.5, at=NOON - timedelta(days=1)))
    lines = {(line.caller, line.window): line for line in ledger.spend(budget, at=NOON)}
    assert set(lines) == {(who, w) for who in (None, 'alice') for w in ('day', 'month', 'total')}
    everyone, alice = lines[None, 'day'], lines['alice', 'day']
    assert (everyone.spent_usd, everyone.held_usd, everyone.cap_usd, everyone.left_usd) == (0.4, 0.3, 5.0, 4.3)
    assert (alice.spent_usd, alice.held_usd, alice.cap_usd, alice.left_usd) == (0.4, 0.3, 1.0, 0.3)
    assert lines[None, 'total'].spent_usd == 1.9 and lines[None, 'total'].left_usd == 17.8
    assert lines[None, 'month'].cap_usd is None and lines[None, 'month'].left_usd is None
    assert everyone.since == datetime(2026, 10, 9, tzinfo=UTC)
    only_bob = ledger.spend(budget, caller='bob', at=NOON)
    assert {(line.caller, line.window) for line in only_bob} == {
        (who, w) for who in (None, 'bob') for w in ('day', 'month', 'total')
    }
    bob_total = next(line for line in only_bob if line.caller == 'bob' and line.window == 'total')
    assert (bob_total.spent_usd, bob_total.cap_usd) == (1.5, None)


# --- concurrency ----------------------------------------------------------------------------------------------------


#: $3 a day for everyone and $1 for alice: at $0.10 a run, alice's racers (more attempts than fit) get exactly 10, the
#: others' 20 attempts all fit beside them, and then every window is full.
RACE_BUDGET = Budget(day=3.0, total=10.0, per_caller={'alice': Limits(day=1.0)})


def admit_all(target: str, caller: str | None, attempts: int) -> int:
    """`attempts` admissions of $0.10 runs of `caller` under `RACE_BUDGET`, through its own Ledger; how many fit."""
    admitted = 0
    with Ledger(target) as mine:
        for _ in range(attempts):
            try:
                admit(mine, RACE_BUDGET, 0.1, caller=caller)
            except BudgetUnenforceableError:
                raise
            except BudgetExceededError:
                continue
            admitted += 1
    return admitted


def test_concurrent_admissions_never_pass_any_window(target: str) -> None:
    # Eight threads, each with its own Ledger (its own connection): four for alice trying 10 runs each, four for no one
    # in particular trying 5 each, all at once, under `RACE_BUDGET`.
    start = threading.Barrier(8)
    outcomes: list[tuple[str | None, int]] = []

    def racer(caller: str | None, attempts: int) -> None:
        start.wait(30)
        outcomes.append((caller, admit_all(target, caller, attempts)))  # list.append is atomic

    tries = [('alice', 10), (None, 5)] * 4
    threads = [threading.Thread(target=racer, args=each) for each in tries]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not any(t.is_alive() for t in threads) and len(outcomes) == 8
    assert sum(n for who, n in outcomes if who == 'alice') == 10 and sum(n for who, n in outcomes if who is None) == 20
    with Ledger(target) as ledger:
        assert ledger.spent_usd(since=NOON.replace(hour=0)) == 3.0
        assert ledger.spent_usd(caller='alice') == 1.0


def admit_many(target: str, caller: str | None, attempts: int, start: Any, results: Any) -> None:
    """A racing process: waits for the start, then reports how many of its admissions fit."""
    start.wait(JOIN_TIMEOUT)
    results.put((caller, admit_all(target, caller, attempts)))


@pytest.mark.slow
def test_processes_racing_admissions_never_pass_any_window(target: str, spawn: Any) -> None:
    # Four processes at once: two for alice trying 20 runs each, two for no one in particular trying 10 each.
    start, results = spawn.Event(), spawn.Queue()
    tries = [('alice', 20), (None, 10), ('alice', 20), (None, 10)]
    processes = [spawn.Process(target=admit_many, args=(target, c, n, start, results)) for c, n in tries]
    for process in processes:
        process.start()
    start.set()
    outcomes = [results.get(timeout=JOIN_TIMEOUT) for _ in processes]
    join_all(processes)
    results.close()
    results.join_thread()
    alice = sum(n for who, n in outcomes if who == 'alice')
    assert alice == 10 and sum(n for _, n in outcomes) == 30
    with Ledger(target) as ledger:
        assert ledger.spent_usd(caller='alice') == 1.0 and ledger.spent_usd() == 3.0
        with pytest.raises(BudgetExceededError):
            admit(ledger, RACE_BUDGET, 0.000001)


# --- settings -------------------------------------------------------------------------------------------------------


def test_the_budget_comes_from_the_environment_and_explicit_limits_win() -> None:
    env = {
        'PERPLEXITY_BUDGET_USD': '20',
        'PERPLEXITY_BUDGET_DAY_USD': '$5',
        'PERPLEXITY_BUDGET_MONTH_USD': '50',
        'PERPLEXITY_BUDGET_PER_RUN_USD': '2',
        'PERPLEXITY_BUDGET_PER_CALLER': 'alice:day=1,total=10; *:day=2',
        'PERPLEXITY_BUDGET_WARN_AT': '80%',
    }
    budget = Settings.load(env).budget
    assert budget == Budget(
        total=20,
        day=5,
        month=50,
        per_run=2,
        per_caller={'alice': Limits(day=1, total=10), '*': Limits(day=2)},
        warn_at=0.8,
    )
    chosen = Settings.load(env, budget=Budget(day=3, warn_at='$4'), budget_usd=15)
    assert chosen.budget is not None and chosen.budget_usd == 15
    assert (chosen.budget.day, chosen.budget.month, chosen.budget.total, chosen.budget.warn_at) == (3, 50, 15, '$4')
    assert Settings.load({}).budget is None
    assert Settings.load({'PERPLEXITY_BUDGET_USD': '5'}).budget == Budget(total=5)


@pytest.mark.parametrize(
    ('name', 'value', 'said'),
    [
        ('PERPLEXITY_BUDGET_DAY_USD', 'lots', 'PERPLEXITY_BUDGET_DAY_USD must be a non-negative number'),
        ('PERPLEXITY_BUDGET_PER_CALLER', 'alice', 'without a caller name'),
        ('PERPLEXITY_BUDGET_PER_CALLER', 'alice:week=3', "'week=3' for caller 'alice' is not a limit"),
        ('PERPLEXITY_BUDGET_PER_CALLER', 'alice:day=1;alice:day=2', "caller 'alice' appears twice"),
        ('PERPLEXITY_BUDGET_WARN_AT', '1.5', 'PERPLEXITY_BUDGET_WARN_AT must be a fraction'),
    ],
)
def test_a_bad_budget_variable_is_refused_by_name(name: str, value: str, said: str) -> None:
    with pytest.raises(ConfigurationError, match=re.escape(said)):
        Settings.load({name: value})


def test_a_bad_budget_object_is_refused_clearly() -> None:
    with pytest.raises(ValueError, match='greater than or equal to 0'):
        Budget(day=-1)
    with pytest.raises(ValueError, match='not a fraction'):
        Budget(warn_at=2)
    with pytest.raises(ValueError, match='Extra inputs'):
        Budget(per_caller={'alice': {'weekly': 3}})  # type: ignore[dict-item]


# --- the Researcher: the Python way in ------------------------------------------------------------------------------


class Clock:
    """An injectable UTC clock: the test moves it, nothing sleeps."""

    def __init__(self, at: datetime) -> None:
        self.at = at

    def __call__(self) -> datetime:
        return self.at


def fast_reservation(query: str) -> float:
    return reservation(query, request_for('fast')).usd


@pytest.mark.anyio
async def test_a_researcher_day_window_refuses_until_utc_midnight_then_admits(
    emulator: Emulator, target: str, caplog: pytest.LogCaptureFixture, capfire: CaptureLogfire
) -> None:
    query = 'What is the EU AI Act?'
    each = fast_reservation(query)
    clock = Clock(JUST_BEFORE_MIDNIGHT - timedelta(minutes=5))
    warned: list[BudgetWarning] = []
    budget = Budget(day=each, warn_at=0.5)
    async with Researcher(
        api_key=emulator.api_key,
        base_url=emulator.base_url,
        effort='fast',
        ledger=target,
        budget=budget,
        clock=clock,
        on_budget_warning=warned.append,
    ) as researcher:
        caplog.set_level(logging.WARNING, logger='pydantic_ai_perplexity')
        first = await researcher.run(query)
        assert first.done
        clock.at = JUST_BEFORE_MIDNIGHT
        with pytest.raises(BudgetExceededError, match='the daily limit'):
            await researcher.run(query)
        clock.at = MIDNIGHT
        second = await researcher.run(query)
        assert second.done
        lines = {line.window: line for line in await researcher.spend()}
    assert len(warned) == 2 and {w.limit.since for w in warned} == {NOON.replace(hour=0), MIDNIGHT}
    assert [r.message for r in caplog.records if 'Budget warning' in r.message] == [w.message for w in warned]
    events = [e for s in capfire.exporter.exported_spans_as_dict() for e in s.get('events', ())]
    assert [
        e['attributes']['perplexity.budget.window'] for e in events if e['name'] == 'perplexity.budget.warning'
    ] == [
        'day',
        'day',
    ]
    assert lines['day'].since == MIDNIGHT and lines['day'].cap_usd == each
    assert lines['day'].spent_usd + lines['day'].held_usd == pytest.approx(second.cost_usd or each)
    assert lines['total'].spent_usd + lines['total'].held_usd > lines['day'].spent_usd


@pytest.mark.anyio
async def test_a_researcher_scope_and_caller_are_recorded_and_limited(emulator: Emulator, tmp_path: Path) -> None:
    query = 'What is a heat pump?'
    each = fast_reservation(query)
    budget = Budget(per_caller={'*': Limits(total=each)}, per_scope={'notebook': Limits(total=each * 3)})
    async with Researcher(
        api_key=emulator.api_key,
        base_url=emulator.base_url,
        effort='fast',
        ledger=tmp_path / 'ledger.sqlite3',
        budget=budget,
        scope='notebook',
    ) as researcher:
        done = await researcher.run(query, caller='alice')
        with pytest.raises(BudgetExceededError, match="caller 'alice'"):
            await researcher.run(query, caller='alice')
        await researcher.run(query, caller='bob')
        await researcher.flush()
        assert researcher.ledger is not None
        record = researcher.ledger.get(done.response_id)
    assert record is not None and record.scope == 'notebook' and record.caller == 'alice'


@pytest.mark.slow
@pytest.mark.anyio
async def test_doctor_shows_the_budget_and_names_a_bad_budget_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    from pydantic_ai_perplexity._core.doctor import Check, run_checks

    async def research_settings() -> Check:
        checks: list[Check] = []
        await run_checks(checks.append)
        return next(c for c in checks if c.name == 'research settings')

    monkeypatch.setenv('PERPLEXITY_BASE_URL', 'http://127.0.0.1:9')
    monkeypatch.setenv('PERPLEXITY_BUDGET_DAY_USD', '5')
    monkeypatch.setenv('PERPLEXITY_BUDGET_PER_CALLER', 'alice:day=1')
    monkeypatch.setenv('PERPLEXITY_BUDGET_WARN_AT', '0.8')
    shown = await research_settings()
    assert shown.ok and shown.detail.endswith('budget: day $5, 1 caller, warns at 80%')
    monkeypatch.setenv('PERPLEXITY_BUDGET_PER_CALLER', 'alice:daily=1')
    refused = await research_settings()
    assert (
        not refused.ok and "PERPLEXITY_BUDGET_PER_CALLER: 'daily=1' for caller 'alice' is not a limit" in refused.detail
    )


@pytest.mark.anyio
async def test_a_failing_warning_callback_is_logged_and_the_run_goes_on(
    emulator: Emulator, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(warning: BudgetWarning) -> None:
        raise RuntimeError('the application callback broke')

    async with Researcher(
        api_key=emulator.api_key,
        base_url=emulator.base_url,
        effort='fast',
        ledger=tmp_path / 'ledger.sqlite3',
        budget=Budget(total=5, warn_at='$0.000001'),
        on_budget_warning=broken,
    ) as researcher:
        result = await researcher.run('What is the EU AI Act?')
        await researcher.flush()
        assert researcher.ledger is not None
        record = researcher.ledger.get(result.response_id)
    assert result.done and record is not None and record.status == 'completed'
    assert any('on_budget_warning raised' in r.message and r.exc_info for r in caplog.records)
