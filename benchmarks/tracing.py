"""Tracing overhead: CPU of 200 emulated research runs with tracing on vs off.

Run with `uv run --frozen python benchmarks/tracing.py [--runs 200] [--repeats 5] [--time-scale 0.005]`.
Prints a table; writes only temporary ledgers.

Every run is made by a `Researcher` as every way in makes it (with its ledger, in a temporary state directory),
20 at a time. `--workload typical` (the default) cycles through the `fast`, `low` and `medium` efforts, as the
emulator plays them (one to three searches, fetches at `medium`); `--workload every-step` makes every run search
twice, fetch a page, call a remote MCP tool and stream its answer, the most traced steps per run. The emulator
streams each run's events as they happen, in scaled time (`--time-scale 0.005`, as in the tests), as the API does;
`--time-scale 0` sends each run's events in one burst, the least client work per run and so the harshest ratio.
The emulator runs in its own process, so its work is not counted. CPU is `time.process_time()` (all threads).
Two measurements:

1. **Fresh processes**: each mode in a new process (warm-up runs first), `--repeats` times, modes interleaved;
   medians. `off`: no OpenTelemetry SDK, no Logfire. `logfire`: Logfire configured by `configure_tracing()`
   (its scrubbing) with a batch processor and a null exporter, and an in-memory metric reader. `otel`: a plain
   OpenTelemetry SDK `TracerProvider` (batch processor, null exporter) and `MeterProvider` (in-memory reader).
2. **Interleaved**: one process per setup (`logfire`, `otel`) alternates batches of `--batch` runs with the
   library's tracer and instruments real and replaced by OpenTelemetry's no-op ones (what they are without an
   SDK). On a shared machine whose load moves by tens of percent from one second to the next, the median of the
   per-pair ratios is the steadiest figure of what the library's tracing costs.

Target (design §10): tracing on (Logfire) vs off ≤ 1.10x.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from typing import Any

from client import KEY, free_port, start_emulator_process  # the same emulator child as the client benchmark

MODES = ('off', 'logfire', 'otel')
CONCURRENCY = 20
WORKLOADS = ('typical', 'every-step')
TYPICAL = (
    ('What is the EU AI Act?', 'fast'),
    ('How do solid-state batteries work?', 'low'),
    ('What changed in EU AI rules for model providers?', 'medium'),
)


# ---------------------------------------------------------------------------------------------------------------
# In a child process


def _set_up(mode: str) -> Any:
    """Configure tracing for `mode`; returns the exporter that counts the spans made (or None)."""
    if mode == 'off':
        return None
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

    class NullExporter(SpanExporter):
        """Drops spans, counting them."""

        def __init__(self) -> None:
            self.count = 0

        def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
            self.count += len(spans)
            return SpanExportResult.SUCCESS

    exporter = NullExporter()
    reader = InMemoryMetricReader()
    if mode == 'logfire':
        import logfire

        from pydantic_ai_perplexity._core.tracing import configure_tracing

        configure_tracing(
            send_to_logfire=False,
            additional_span_processors=[BatchSpanProcessor(exporter)],
            metrics=logfire.MetricsOptions(additional_readers=[reader]),
        )
    else:
        from opentelemetry import metrics, trace
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.trace import TracerProvider

        provider = TracerProvider()
        provider.add_span_processor(BatchSpanProcessor(exporter))
        trace.set_tracer_provider(provider)
        metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
    return exporter


async def _runs(base_url: str, runs: int) -> None:
    import anyio

    from pydantic_ai_perplexity import Researcher

    every_step = os.environ.get('BENCHMARK_WORKLOAD') == 'every-step'
    async with Researcher(api_key=KEY, base_url=base_url) as researcher:

        async def one(index: int) -> None:
            if every_step:
                result = await researcher.run('What is the EU AI Act? [[emulate: mcp]]', effort='low', fetch_pages=1)
            else:
                query, effort = TYPICAL[index % len(TYPICAL)]
                result = await researcher.run(query, effort=effort)
            assert result.done, result.status

        for start in range(0, runs, CONCURRENCY):
            async with anyio.create_task_group() as tg:
                for index in range(start, min(start + CONCURRENCY, runs)):
                    tg.start_soon(one, index)


def fresh(mode: str, base_url: str, runs: int) -> dict[str, Any]:
    import anyio

    exporter = _set_up(mode)
    anyio.run(_runs, base_url, 10)  # warm up: imports, connections, first-call caches
    spans_before = getattr(exporter, 'count', 0)
    started_cpu, started_wall = time.process_time(), time.perf_counter()
    anyio.run(_runs, base_url, runs)
    cpu, wall = time.process_time() - started_cpu, time.perf_counter() - started_wall
    if exporter is not None:
        from opentelemetry import trace

        flush = getattr(trace.get_tracer_provider(), 'force_flush', None)
        if flush is not None:
            flush()
    return {'cpu': cpu, 'wall': wall, 'spans': getattr(exporter, 'count', 0) - spans_before}


def interleaved(mode: str, base_url: str, runs: int, batch: int) -> dict[str, Any]:
    import anyio
    from opentelemetry import metrics, trace

    from pydantic_ai_perplexity._core import tracing

    _set_up(mode)
    real_tracer, real_instruments = tracing._tracer, tracing._instruments

    class NoopInstruments:
        tokens = cost = duration = metrics.NoOpHistogram('noop')

    def switch(on: bool) -> None:
        tracing._tracer = real_tracer if on else trace.NoOpTracer()
        tracing._instruments = real_instruments if on else NoopInstruments

    anyio.run(_runs, base_url, 10)  # warm up
    total = {True: 0.0, False: 0.0}
    ratios: list[float] = []
    for pair in range(max(1, runs // batch)):
        spent: dict[bool, float] = {}
        for on in (True, False) if pair % 2 == 0 else (False, True):
            switch(on)
            started = time.process_time()
            anyio.run(_runs, base_url, batch)
            spent[on] = time.process_time() - started
            total[on] += spent[on]
        ratios.append(spent[True] / spent[False])
    return {'on': total[True], 'off': total[False], 'pair_median': statistics.median(ratios)}


# ---------------------------------------------------------------------------------------------------------------
# The parent


def spawn(kind: str, mode: str, base_url: str, args: argparse.Namespace, state_dir: str) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(('LOGFIRE_', 'OTEL_', 'PERPLEXITY_'))}
    env['PYTHONWARNINGS'] = 'ignore'
    env['PERPLEXITY_STATE_DIR'] = tempfile.mkdtemp(dir=state_dir)
    env['BENCHMARK_WORKLOAD'] = args.workload
    env['PERPLEXITY_TRACE_STEPS'] = args.steps
    command = [sys.executable, __file__, f'--{kind}', mode, '--base-url', base_url]
    command += ['--runs', str(args.runs), '--batch', str(args.batch)]
    done = subprocess.run(command, env=env, capture_output=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f'{kind} {mode} failed:\n{done.stderr.decode()}')
    return json.loads(done.stdout.decode().strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--runs', type=int, default=200)
    parser.add_argument('--repeats', type=int, default=5)
    parser.add_argument('--batch', type=int, default=10, help='runs per batch in the interleaved measurement')
    parser.add_argument('--time-scale', type=float, default=0.005, help='real seconds per emulated second')
    parser.add_argument('--workload', choices=WORKLOADS, default='typical')
    parser.add_argument('--steps', choices=('events', 'spans', 'off'), default='events', help='PERPLEXITY_TRACE_STEPS')
    parser.add_argument('--fresh', choices=MODES, help=argparse.SUPPRESS)
    parser.add_argument('--interleaved', choices=MODES[1:], help=argparse.SUPPRESS)
    parser.add_argument('--base-url', help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.fresh:
        print(json.dumps(fresh(args.fresh, args.base_url, args.runs)))
        return
    if args.interleaved:
        print(json.dumps(interleaved(args.interleaved, args.base_url, args.runs, args.batch)))
        return

    port = free_port()
    emulator = start_emulator_process(port, args.time_scale)
    base_url = f'http://127.0.0.1:{port}'
    results: dict[str, list[dict[str, Any]]] = {mode: [] for mode in MODES}
    try:
        with tempfile.TemporaryDirectory() as state_dir:
            for repeat in range(args.repeats):
                for mode in MODES if repeat % 2 == 0 else tuple(reversed(MODES)):
                    results[mode].append(spawn('fresh', mode, base_url, args, state_dir))
            paired = {mode: spawn('interleaved', mode, base_url, args, state_dir) for mode in MODES[1:]}
    finally:
        emulator.kill()
        emulator.wait()

    print(
        f'{args.runs} emulated research runs, {args.workload} (time scale {args.time_scale:g}), {CONCURRENCY} at a '
        f'time, steps as {args.steps}'
    )
    print(f'1. fresh processes, {args.repeats} repeats, medians')
    cpu = {mode: statistics.median(r['cpu'] for r in results[mode]) for mode in MODES}
    best = {mode: min(r['cpu'] for r in results[mode]) for mode in MODES}
    print(
        f'   {"mode":<9} {"cpu s":>7} {"wall s":>7} {"spans":>6} {"cpu/run ms":>11} {"vs off":>7} {"best vs best":>13}'
    )
    for mode in MODES:
        wall = statistics.median(r['wall'] for r in results[mode])
        spans = statistics.median(r['spans'] for r in results[mode])
        print(
            f'   {mode:<9} {cpu[mode]:>7.3f} {wall:>7.3f} {spans:>6.0f} {cpu[mode] / args.runs * 1000:>11.2f} '
            f'{cpu[mode] / cpu["off"]:>6.3f}x {best[mode] / best["off"]:>12.3f}x'
        )
    print('   cpu s per repeat: ' + '; '.join(f'{m} ' + ' '.join(f'{r["cpu"]:.2f}' for r in results[m]) for m in MODES))
    print(f'2. interleaved in one process, batches of {args.batch} runs, tracing on and off, {args.runs} runs each')
    for mode, figures in paired.items():
        print(
            f'   {mode:<9} on {figures["on"]:.3f} s, off {figures["off"]:.3f} s: '
            f'{figures["on"] / figures["off"]:.3f}x; median of the per-pair ratios {figures["pair_median"]:.3f}x'
        )
    fresh_ratio, paired_ratio = cpu['logfire'] / cpu['off'], paired['logfire']['pair_median']
    verdict = 'PASS' if paired_ratio <= 1.10 else 'FAIL'
    print(
        f'tracing on (Logfire) vs off: {paired_ratio:.3f}x CPU interleaved, {fresh_ratio:.3f}x in fresh processes '
        f'(target <= 1.10x): {verdict}'
    )


if __name__ == '__main__':
    main()
