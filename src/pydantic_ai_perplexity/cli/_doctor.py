"""`doctor`: check the setup, one line per check, exit status 1 if any fails."""

from __future__ import annotations

import json
import sys

import click

from ._shared import CONTEXT, err, out, out_json, use_colour


@click.command(context_settings=CONTEXT)
@click.option('--json', 'as_json', is_flag=True, help='Print the checks as JSON.')
def doctor(as_json: bool) -> None:
    """Check the setup: key, base URL, API, models, settings, ledger, tracing. Exit status 1 if any check fails.

    Each line says pass or FAIL, what was found and, for a failure, how to fix it. When the base URL answers as an
    emulator, the API checks and the summary say so (and `--json` marks them `"emulator": true`).

    \b
    Examples:
      pydantic-ai-perplexity doctor
      PERPLEXITY_BASE_URL=http://127.0.0.1:8787 pydantic-ai-perplexity doctor   # against a local emulator
    """
    import dataclasses

    import anyio

    from .._core.doctor import Check, run_checks

    checks: list[Check] = []

    colour = use_colour(sys.stdout)

    def emit(check: Check) -> None:
        checks.append(check)
        if as_json:
            return
        if not colour:
            out(check.line())
            return
        from .._present.terminal import for_terminal

        label, rest = check.line().split('] ', 1)
        click.echo(
            click.style(f'{label}]', fg='green' if check.ok else 'red', bold=not check.ok) + ' ' + for_terminal(rest)
        )

    ok = anyio.run(run_checks, emit)
    if as_json:
        out_json(json.dumps([dataclasses.asdict(c) for c in checks], indent=2))
    else:
        failed = sum(not c.ok for c in checks)
        summary = f'{len(checks) - failed} passed, {failed} failed.'
        if any(c.emulator for c in checks):
            summary += ' The API checks ran against an emulator, not Perplexity.'
        if use_colour(sys.stderr):
            click.echo(click.style(summary, fg='red' if failed else 'green', bold=True), err=True)
        else:
            err(summary)
    if not ok:
        sys.exit(1)
