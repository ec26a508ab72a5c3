"""How a run ended, printed: the answer with numbered sources and cost on stdout, notices on stderr, and the exit
status (`research` and `jobs wait` share it)."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, NoReturn

from ._shared import err, out, out_json, terminal_width

if TYPE_CHECKING:
    from .._domain.results import ResearchResult, Source

#: Exit status of `research` / `jobs wait` when the run ended failed, incomplete or cancelled.
EXIT_RUN_FAILED = 1
#: Exit status of `research --strict` / `jobs wait --strict` when the run completed without finding a single source.
EXIT_FOUND_NOTHING = 3
#: Exit status after Ctrl-C, as a shell reports a command ended by SIGINT.
EXIT_INTERRUPTED = 130


def interrupted(response_id: str | None, *, emulated: bool, collecting: bool = False) -> NoReturn:
    """After Ctrl-C: which run was going and how to collect or cancel it (it goes on server-side), then exit 130."""
    if response_id is None:
        err(
            "Interrupted before the run's id came back. If it started, it is in the ledger: "
            'see `pydantic-ai-perplexity jobs list`.'
        )
    elif emulated:
        err(f'Interrupted. Run {response_id} was on the built-in emulator, which stopped with this command.')
    else:
        what = 'Stopped waiting' if collecting else 'Interrupted'
        err(
            f'{what}. Run {response_id} goes on server-side (and is billed) until it ends.\n'
            f'  Collect it: pydantic-ai-perplexity jobs wait {response_id}\n'
            f'  Cancel it:  pydantic-ai-perplexity jobs cancel {response_id}'
        )
    sys.exit(EXIT_INTERRUPTED)


def found_nothing(result: ResearchResult) -> bool:
    """Whether a completed run found not a single source: its answer rests on no page."""
    return result.status == 'completed' and not result.sources


def print_outcome(
    result: ResearchResult, *, as_json: bool, builtin_emulator: bool = False, strict: bool = False
) -> None:
    """Print a result (`research`, `jobs wait`); a run that ended other than `completed` exits `EXIT_RUN_FAILED`, one
    that found nothing says so in yellow, and exits `EXIT_FOUND_NOTHING` when `strict`."""
    _print_result(result, as_json=as_json, builtin_emulator=builtin_emulator)
    if result.done and result.status != 'completed':
        sys.exit(EXIT_RUN_FAILED)
    if found_nothing(result):
        err(
            'Found nothing: the run completed without a single source, so the answer rests on no page. Rephrase the '
            'question or widen the search (--recency, --domain).'
            + ('' if strict else ' With --strict this exits with status 3.'),
            colour='yellow',
        )
        if strict:
            sys.exit(EXIT_FOUND_NOTHING)


def _print_result(result: ResearchResult, *, as_json: bool, builtin_emulator: bool = False) -> None:
    if as_json:
        out_json(result.model_dump_json(indent=2))
        if not result.done:
            _handoff_notice(result, builtin_emulator=builtin_emulator)
        return
    if not result.done:
        out(result.response_id)
        _handoff_notice(result, builtin_emulator=builtin_emulator)
        return
    _print_answer(result)


def _print_answer(result: ResearchResult) -> None:
    """A finished run: its answer (or data), numbered sources, notes, and one line of status, effort, model, cost."""
    from .._present.model_text import answer_with_source_numbers, tightened_note

    if result.error:
        err(f'The run ended {result.status}: {result.error}')
    if result.data is not None:
        out_json(json.dumps(result.data, indent=2, ensure_ascii=False))
    else:
        out(answer_with_source_numbers(result), wrap=True)
    if result.sources:
        out('\nSources:')
        print_sources(result.sources)
    if result.orphan_markers:
        out(f'\nMarkers pointing at no source: {", ".join(result.orphan_markers)}', wrap=True)
    if note := tightened_note(result):
        out(f'\n{note}', wrap=True)
    for note in result.notes:
        out(f'\n{note}', wrap=True)
    out('\n' + _joined(_status_parts(result)))


def _status_parts(result: ResearchResult) -> list[str]:
    """The closing line's parts: status (marked when emulated), effort, model, cost and run id."""
    cost = f'${result.cost_usd:.4f}' if result.cost_usd is not None else 'cost unknown'
    status = f'{result.status} · emulated' if result.emulated else result.status  # never taken for a real answer
    return [status, result.effort or '-', result.model or '-', cost, result.response_id]


def print_sources(sources: Sequence[Source]) -> None:
    """The numbered sources, each its title (wrapped, marked when not cited) and, on its own line, the URL whole: a
    URL is never cut, so it can be copied."""
    from .._present.terminal import line_for_terminal

    for s in sources:
        title = line_for_terminal(s.title or s.domain) + ('' if s.cited else '  (not cited)')
        out(f'[{s.n}] {title}', wrap=True)
        out(f'    {line_for_terminal(s.url)}')


def _joined(parts: list[str], sep: str = ' · ') -> str:
    """`parts` joined by `sep`; on a terminal, a line breaks between parts, never inside one (a model, a run id)."""
    width = terminal_width(sys.stdout)
    if width is None:
        return sep.join(parts)
    lines = [parts[0]]
    for part in parts[1:]:
        if len(lines[-1]) + len(sep) + len(part) <= width:
            lines[-1] += sep + part
        else:
            lines[-1] += sep.rstrip()
            lines.append(part)
    return '\n'.join(lines)


def _handoff_notice(result: ResearchResult, *, builtin_emulator: bool = False) -> None:
    state = 'Started' if result.status == 'queued' else f'Still going ({result.progress.summary()})'
    where = ' (emulated)' if result.emulated else ''
    if builtin_emulator:  # it stopped with this command: there is nothing left to collect
        err(f'{state}{where}: {result.response_id}. It cannot be collected: the built-in emulator has stopped.')
        return
    err(f'{state}{where}: {result.response_id}. Collect it with: pydantic-ai-perplexity jobs wait {result.response_id}')
