"""Render the reliability suite's own output as the README's "Reliability" section.

    uv run --frozen pytest tests/reliability -m ''              # every tier; writes benchmarks/results/reliability.json
    uv run --frozen python benchmarks/load.py                   # optional: writes benchmarks/results/load.json
    uv run --frozen python benchmarks/reliability_report.py     # prints the Markdown
    uv run --frozen python benchmarks/reliability_report.py --readme   # replaces the section in README.md

Every figure comes from those files: the tests record a row only after their assertions passed. With `--readme`,
only the text between `<!-- reliability:begin -->` and `<!-- reliability:end -->` is replaced (the section is
appended at the end of the README the first time).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / 'benchmarks' / 'results'
BEGIN, END = '<!-- reliability:begin -->', '<!-- reliability:end -->'
SURFACES = ('toolset', 'mcp-stdio', 'mcp-http', 'cli')
SURFACE_NAMES = {
    'toolset': 'toolset',
    'mcp-stdio': 'MCP stdio',
    'mcp-stdio (SDK client)': 'MCP stdio (SDK client)',
    'mcp-http': 'MCP HTTP',
    'cli': 'CLI',
    'researcher': '`Researcher`',
    'renderer': 'renderer',
    'every way in': 'every way in',
}


def table(header: list[str], rows: list[list[Any]]) -> list[str]:
    lines = ['| ' + ' | '.join(header) + ' |', '|' + '---|' * len(header)]
    lines += ['| ' + ' | '.join(str(cell) for cell in row) + ' |' for row in rows]
    return lines


def short(outcome: str) -> str:
    return (
        outcome.removeprefix('result: ')
        .replace('clear error: ', 'error: ')
        .replace('body not JSON', 'not JSON')
        .replace(', not re-sent', '')
    )


def faults(rows: list[dict[str, Any]]) -> list[str]:
    by_case: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    # In the toolset's order (every fault goes through it), then anything seen only elsewhere.
    for row in sorted(rows, key=lambda r: r['surface'] != 'toolset'):
        by_case[row['case']][row['surface']] = row
    out = [
        "**Faults injected** (the emulator's directives, in the question or queued). Each cell is what the caller "
        'got; "sent / billed" counts create requests and the runs they started (never more than one run, whatever '
        'was retried); "events once" is how many stream events (or progress steps, over MCP and the CLI) reached the '
        'caller, each exactly once, in order, across cut and resumed streams. An "error" is a clear message (no '
        'traceback) saying that a run may have started and that the request was not re-sent; the attempt stays in '
        'the ledger.',
        '',
    ]
    body: list[list[Any]] = []
    for case, per in by_case.items():
        first = next(iter(per.values()))
        cells = [short(per[s]['outcome']) if s in per else '·' for s in SURFACES]
        events = max((r.get('events_once') or 0) for r in per.values())
        lost = sum(r.get('lost', 0) for r in per.values())
        body.append([f'`{case}`' if '(' not in case else case, *cells,
                     f'{first["attempts"]} / {first["billed"]}', events or '·', lost])  # fmt: skip
    out += table(['fault', *(SURFACE_NAMES[s] for s in SURFACES), 'sent / billed', 'events once', 'lost'], body)
    return out


def simple(rows: list[dict[str, Any]], header: list[str], cells: Any) -> list[str]:
    return table(header, [cells(row) for row in rows])


def outcomes(counts: dict[str, int]) -> str:
    return ', '.join(f'{n} {kind}' for kind, n in sorted(counts.items(), key=lambda kv: -kv[1]))


def render(report: dict[str, Any], load: dict[str, Any] | None) -> str:
    rows: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in report['rows']:
        rows[row['section']].append(row)
    tests = report['tests']
    lines = [
        '## Reliability',
        '',
        f'Generated from the output of the reliability suite (`tests/reliability`, {tests.get("passed", 0)} tests '
        f'passed, {tests.get("failed", 0)} failed, {report["duration_s"]:.0f} s on {report["platform"]}, Python '
        f'{report["python"]}, {report["generated_at"][:10]}) by `benchmarks/reliability_report.py`. Everything runs '
        'on loopback against the emulator, through the ways in users have: the toolset in a pydantic-ai agent, the MCP '
        'server as a subprocess over stdio and over Streamable HTTP, and the CLI as a subprocess.',
        '',
    ]
    if rows['faults']:
        lines += [*faults(rows['faults']), '']
    if rows['cancel']:
        lines += simple(rows['cancel'], ['cancel race', 'way in', 'runs', 'cancels', 'outcome', 'lost'],
                        lambda r: [r['case'], SURFACE_NAMES[r['surface']], r['runs'], r['cancels'], r['outcome'],
                                   r['lost']])  # fmt: skip
        lines.append('')
    if rows['ledger']:
        lines += simple(rows['ledger'], ['ledger crash safety', 'way in', 'outcome', 'lost'],
                        lambda r: [r['case'], SURFACE_NAMES[r['surface']], r['outcome'], r['lost']])  # fmt: skip
        lines.append('')
    if rows['budget']:
        lines += ['**Budget cap against hostile callers** (each run reserves the most its request can cost; recorded '
                  'spend after every call has ended).', '']  # fmt: skip
        lines += simple(rows['budget'], ['budget cap', 'way in', 'cap', 'calls', 'admitted', 'refused', 'spent',
                                         'over the cap'],
                        lambda r: [r['case'], SURFACE_NAMES[r['surface']], f'${r["cap"]:.2f}', r['calls'],
                                   r['admitted'], r['refused'], f'${r["spent"]:.4f}', f'${r["over"]:.4f}'])  # fmt: skip
        lines.append('')
    if rows['fuzz']:
        total = sum(r['inputs'] for r in rows['fuzz'])
        lines += [f'**Inputs fuzzed** (Hypothesis; {total} in all): every one answered, no crash, and the server or '
                  'toolset still served a normal call afterwards.', '']  # fmt: skip
        lines += simple(rows['fuzz'], ['way in', 'inputs', 'what', 'answered as', 'crashes'],
                        lambda r: [SURFACE_NAMES[r['surface']], r['inputs'], r['case'], outcomes(r['outcomes']),
                                   r['crashes']])  # fmt: skip
        lines.append('')
    if rows['injection']:
        lines += simple(rows['injection'], ['prompt injection', 'way in', 'renderings', 'payload seen', 'escaped'],
                        lambda r: [r['case'], SURFACE_NAMES[r['surface']], r['runs'], r['payload_seen'],
                                   r['escaped']])  # fmt: skip
        lines.append('')
    if rows['transport']:
        lines += simple(rows['transport'], ['MCP HTTP attack', 'answer', 'honest client failures'],
                        lambda r: [r['case'], r['outcome'], r['honest_failures']])  # fmt: skip
        lines.append('')
    if rows['callers']:
        lines += simple(rows['callers'], ['hostile caller', 'way in', 'outcome', 'lost'],
                        lambda r: [r['case'], SURFACE_NAMES[r['surface']], r['outcome'], r['lost']])  # fmt: skip
        lines.append('')
    if rows['connections']:
        lines += simple(rows['connections'], ['descriptor attack', '/healthz', 'tools/call', 'half-open closed after',
                                              'outcome'],
                        lambda r: [r['case'], f'{r["healthz_s"]:.2f} s', f'{r["tools_call_s"]:.2f} s',
                                   f'{r["all_closed_after_s"]:.1f} s', r['outcome']])  # fmt: skip
        lines.append('')
    if rows['signals']:
        lines += simple(rows['signals'], ['signal to an idle server', 'way in', 'exit codes seen', 'outcome'],
                        lambda r: [r['case'], SURFACE_NAMES[r['surface']],
                                   ', '.join(str(c) for c in r['exit_codes']), r['outcome']])  # fmt: skip
        lines.append('')
    if rows['secrets']:
        lines += simple(rows['secrets'], ['secrets', 'calls', 'places scanned', 'bytes scanned', 'leaks'],
                        lambda r: [r['case'] + ' — ' + ', '.join(r['kinds']), r['calls'], r['places'],
                                   f'{r["bytes_scanned"]:,}', r['leaks']])  # fmt: skip
        lines.append('')
    suite_base = next((r for r in rows['load'] if r['surface'] == 'researcher'), None)
    load_rows: list[list[Any]] = []
    for r in rows['load']:
        over = '(baseline)' if r is suite_base else f'{r["p50_ms"] / suite_base["p50_ms"]:.2f}x' if suite_base else ''
        rss = f'{r["server_peak_rss_mb"]} MB (server)' if r.get('server_peak_rss_mb') else '·'
        load_rows.append([f'{SURFACE_NAMES[r["surface"]]} (suite)', r['calls'], r['errors'], f'{r["p50_ms"]:.0f} ms',
                          f'{r["p99_ms"]:.0f} ms', over, rss])  # fmt: skip
    if load:
        base = load['rows']['direct Researcher']
        for name, r in load['rows'].items():
            over = '(baseline)' if name == 'direct Researcher' else f'{r["p50_ms"] / base["p50_ms"]:.2f}x'
            who = ' (server)' if name == 'MCP over HTTP' else ''
            load_rows.append([f'{name} (benchmark)', r['calls'], r['errors'], f'{r["p50_ms"]:.0f} ms',
                              f'{r["p99_ms"]:.0f} ms', over, f'{r["peak_rss_mb"]} MB{who}'])  # fmt: skip
    if load_rows:
        note = (
            f' The benchmark: `uv run --frozen python benchmarks/load.py` ({load["calls"]} `{load["effort"]}` calls at '
            f'once per way in, emulator time scale {load["time_scale"]}, {load["platform"]}, load average '
            f"{load['load_average']}); peak RSS is the process doing the work (the MCP server's own for MCP)."
            if load
            else ''
        )
        lines += [
            f'**Load held** (bounded, self-stopping, loopback; every call returned its completed run).{note} '
            'With every call in flight at once on a few shared CPUs, latency is mostly waiting for a CPU; the '
            'toolset rows include a whole pydantic-ai agent run per call (`benchmarks/toolset.py` separates the '
            "toolset's own cost from the agent loop's), and the MCP rows a second process and JSON-RPC over HTTP.",
            '',
        ]
        lines += table(['way in', 'concurrent calls', 'errors', 'p50', 'p99', 'p50 vs direct', 'peak RSS'], load_rows)
        lines.append('')
    lost = sum(r.get('lost', 0) for r in report['rows'])
    leaks = sum(r.get('leaks', 0) for r in report['rows'])
    escaped = sum(r.get('escaped', 0) for r in report['rows'])
    crashes = sum(r.get('crashes', 0) for r in report['rows'])
    errors = sum(r.get('errors', 0) for r in rows['load']) + (
        sum(r['errors'] for r in load['rows'].values()) if load else 0
    )
    lines += [
        f'**What was lost: {"nothing" if not (lost or leaks or escaped or crashes or errors) else "see above"}.** '
        f'{lost} runs or ledger rows lost, no second billed create, no stream event missed or repeated, {crashes} '
        f'crashes, {escaped} injections out of the wrapper, {leaks} key leaks, {errors} errors under load.',
        '',
        "To regenerate: `uv run --frozen pytest tests/reliability -m ''` (every tier), "
        '`uv run --frozen python benchmarks/load.py`, then '
        '`uv run --frozen python benchmarks/reliability_report.py --readme`.',
    ]
    return '\n'.join(lines) + '\n'


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--readme', action='store_true', help='replace the section in README.md')
    args = parser.parse_args()
    source = RESULTS / 'reliability.json'
    if not source.exists():
        sys.exit(f"{source.relative_to(ROOT)} is missing: run `uv run --frozen pytest tests/reliability -m ''` first.")
    report = json.loads(source.read_text(encoding='utf-8'))
    load_file = RESULTS / 'load.json'
    load = json.loads(load_file.read_text(encoding='utf-8')) if load_file.exists() else None
    section = render(report, load)
    if not args.readme:
        print(section, end='')
        return
    readme = ROOT / 'README.md'
    text = readme.read_text(encoding='utf-8')
    block = f'{BEGIN}\n{section}{END}'
    if BEGIN in text and END in text:
        text = text[: text.index(BEGIN)] + block + text[text.index(END) + len(END) :]
    else:
        text = text.rstrip('\n') + '\n\n' + block + '\n'
    readme.write_text(text, encoding='utf-8')
    print(f'README.md: reliability section written ({len(section.splitlines())} lines)')


if __name__ == '__main__':
    main()
