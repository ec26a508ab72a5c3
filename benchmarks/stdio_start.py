"""What the stdio front buys: spawn to the first answers over stdio, with the front and without it, in one run.

Run with `uv run --frozen python benchmarks/stdio_start.py [--runs 10]`.

The front (`mcp/server/_stdio.py`) answers `initialize` and `tools/list` from `_handshake.json` while the MCP SDK
imports in a thread; without it the SDK answers them itself once loaded. Both variants start the same way
(`python -m pydantic_ai_perplexity.mcp`'s code; the second with the snapshot withheld, as with another SDK version),
alternate run by run so they see the same load, and answer `perplexity_search` against the emulator after the
handshake (protocol 2025-06-18). Reported: medians of spawn to the `tools/list` answer and spawn to the first answered
tool call (target <= 0.45 s), for each, with Logfire's pydantic plugin skipped as the serving process does.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import sys
from pathlib import Path

# This directory holds a file named like the MCP SDK's package (mcp.py): keep it off the import path.
sys.path[:] = [p for p in sys.path if Path(p or '.').resolve() != Path(__file__).resolve().parent]

_spec = importlib.util.spec_from_file_location('bench_mcp', Path(__file__).with_name('mcp.py'))
assert _spec is not None and _spec.loader is not None
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)

WITH_FRONT = bench.OURS
#: The same entry point with the snapshot withheld: the SDK answers the handshake itself.
WITHOUT_FRONT = [
    sys.executable,
    '-c',
    'import sys\n'
    'from pydantic_ai_perplexity.mcp.server._exit import quiet_until_serving\n'
    'quiet_until_serving()\n'
    'from pydantic_ai_perplexity.mcp.server import _stdio\n'
    '_stdio._load_snapshot = lambda: None\n'
    'from pydantic_ai_perplexity.mcp.server._build import main\n'
    'sys.exit(main())\n',
]


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or '').splitlines()[0])
    parser.add_argument('--runs', type=int, default=10, help='timed starts per variant (after 2 warm-ups each)')
    args = parser.parse_args()
    bench.WORK.mkdir(parents=True, exist_ok=True)

    from pydantic_ai_perplexity.emulator import Emulator

    listed: dict[str, list[float]] = {'with the front': [], 'without the front': []}
    called: dict[str, list[float]] = {'with the front': [], 'without the front': []}
    commands = {'with the front': WITH_FRONT, 'without the front': WITHOUT_FRONT}
    with Emulator(time_scale=0) as emu:
        env = bench.child_env({'PERPLEXITY_API_KEY': emu.api_key, 'PERPLEXITY_BASE_URL': emu.base_url})
        for _ in range(2):  # warm-ups: compile bytecode, fill the OS page cache
            for command in commands.values():
                bench.cold_start(command, env, tool_call=True)
        for _ in range(args.runs):
            for name, command in commands.items():
                first_list, first_call = bench.cold_start(command, env, tool_call=True)
                listed[name].append(first_list)
                called[name].append(first_call or 0.0)

    load = ' '.join(f'{x:.2f}' for x in os.getloadavg()) if hasattr(os, 'getloadavg') else 'n/a'
    print(f'load average: {load} on {os.cpu_count()} CPUs; {args.runs} runs each, medians (min)')
    for name in commands:
        print(
            f'  {name:18}  tools/list answered {statistics.median(listed[name]) * 1000:7.1f} ms '
            f'({min(listed[name]) * 1000:.1f})   first tool call answered '
            f'{statistics.median(called[name]) * 1000:7.1f} ms ({min(called[name]) * 1000:.1f})'
        )
    front, bare = (statistics.median(listed[n]) for n in commands)
    front_call, bare_call = (statistics.median(called[n]) for n in commands)
    print(f'  the front saves {(bare - front) * 1000:.1f} ms to tools/list ({front / bare:.2f}x of without)')
    print(f'  and {(bare_call - front_call) * 1000:.1f} ms to the first tool call ({front_call / bare_call:.2f}x)')
    print(f'  first tool call with the front: {front_call:.3f} s (target <= 0.45 s)')


if __name__ == '__main__':
    main()
