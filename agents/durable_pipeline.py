"""The traced research pipeline as a DBOS workflow: kill it at any point, run it again, and it picks up where it was.

    uv run python agents/durable_pipeline.py "How do heat pumps work in cold climates?"      # offline, one go
    uv run python agents/durable_pipeline.py "..." --model openai:gpt-5.4                  # a real model

The kill-and-resume story (the emulator in its own process, so it outlives the pipeline's):

    uv run pydantic-ai-perplexity emulator --port 8787 --api-key pplx-demo &
    export PERPLEXITY_BASE_URL=http://127.0.0.1:8787 PERPLEXITY_API_KEY=pplx-demo
    uv run python agents/durable_pipeline.py "How do heat pumps work?"   # kill -9 it while it researches
    uv run python agents/durable_pipeline.py "How do heat pumps work?"   # resumes: the same runs, no new creates

The steps of `agents/traced_pipeline.py`, each checkpointed by DBOS (in `durable_pipeline.sqlite3` in the state
directory, beside the ledger, so the checkout stays clean; give `--system-db postgresql://...` to share the team's
PostgreSQL):

1. **plan**: the planner agent splits the question (a step: its plan is checkpointed);
2. **research**: every sub-question at once with `durable_research()`, a *start* step (the run's id is
   checkpointed) and a *collect* step (safe to repeat) each;
3. **write**: the writer agent turns the findings into a cited report (a step).

The workflow's id comes from the question, so running the same question again attaches to the same workflow: DBOS
recovers it at launch if it was cut short, or hands back its report if it finished. Without `PERPLEXITY_API_KEY`
the research runs on an emulator started in this process (fine for one go; for the kill-and-resume story start one
as above). Tracing as in `traced_pipeline.py`: `LOGFIRE_TOKEN`, `OTEL_EXPORTER_OTLP_ENDPOINT` or
`LOGFIRE_CONSOLE=true`.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from dbos import DBOS, DBOSConfig, SetWorkflowID
from opentelemetry import trace

sys.path.insert(0, str(Path(__file__).parent))
from traced_pipeline import (
    EFFORTS,
    Findings,
    Plan,
    Report,
    SubQuestion,
    planner,
    scripted_planner,
    scripted_writer,
    writer,
)

from pydantic_ai_perplexity import Researcher
from pydantic_ai_perplexity._ledger import default_ledger_path
from pydantic_ai_perplexity.durable import durable_research
from pydantic_ai_perplexity.emulator import Emulator

tracer = trace.get_tracer('durable_pipeline')

#: The researcher the workflow uses; made in `main()` before DBOS launches (a recovered workflow needs it too).
RESEARCHER: Researcher | None = None


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


@DBOS.step(name='durable_pipeline.plan')
async def plan_step(question: str, model: str | None) -> dict[str, Any]:
    """The planner agent's plan (checkpointed, so a restart does not plan again)."""
    plan = (await planner(model or scripted_planner()).run(question)).output
    for sub in plan.sub_questions:
        if sub.effort not in EFFORTS:
            sub.effort = 'low'
    return plan.model_dump()


@DBOS.step(name='durable_pipeline.write')
async def write_step(findings: dict[str, Any], model: str | None) -> dict[str, Any]:
    """The writer agent's draft from the findings (checkpointed)."""
    found = Findings.model_validate(findings)
    draft = (await writer(model or scripted_writer(found), found).run(found.prompt(), deps=found)).output
    return draft.model_dump()


@DBOS.workflow(name='durable_pipeline')
async def pipeline(question: str, model: str | None) -> dict[str, Any]:
    """Plan, research every sub-question durably (started once, collected however often), write the report."""
    assert RESEARCHER is not None, 'main() makes the researcher before DBOS launches'
    with tracer.start_as_current_span('durable research pipeline', attributes={'pipeline.question': question[:500]}):
        plan = Plan.model_validate(await plan_step(question, model))
        _say(f'plan: {len(plan.sub_questions)} sub-questions; researching (kill me now, then run me again)')
        results = await asyncio.gather(
            *(durable_research(s.question, researcher=RESEARCHER, effort=s.effort) for s in plan.sub_questions)
        )
        for result in results:
            _say(f'  {result.response_id}: {result.status} ({result.progress.summary()})')
        pairs: list[tuple[SubQuestion, Any]] = list(zip(plan.sub_questions, results, strict=True))
        findings = Findings.from_results(question, pairs)
        draft = await write_step(findings.model_dump(), model)
        report = Report(
            question=question,
            summary=draft['summary'],
            sections=draft['sections'],
            sources=findings.sources,
            runs=[r.response_id for r in results],
            cost_usd=round(sum(r.cost_usd or 0.0 for r in results), 6),
        )
        return report.model_dump()


@asynccontextmanager
async def perplexity_endpoint() -> AsyncIterator[dict[str, Any]]:
    """The API named by the environment (the real one, or an emulator you started), else one in this process."""
    if os.environ.get('PERPLEXITY_API_KEY'):
        yield {}
        return
    async with Emulator(time_scale=float(os.environ.get('PERPLEXITY_EMULATOR_TIME_SCALE') or 0.02)) as emu:
        _say(f'No PERPLEXITY_API_KEY set: researching on an emulator in this process at {emu.base_url}.')
        yield {'api_key': emu.api_key, 'base_url': emu.base_url}


def workflow_id(question: str) -> str:
    """The same question names the same workflow, so running it again resumes (or reports) instead of redoing."""
    return 'durable-pipeline-' + hashlib.sha256(question.encode()).hexdigest()[:16]


def default_system_db() -> str:
    """DBOS's checkpoints in the state directory beside the ledger (PERPLEXITY_STATE_DIR), never in the checkout."""
    state_dir = default_ledger_path().parent
    state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    return f'sqlite:///{state_dir / "durable_pipeline.sqlite3"}'


async def main(question: str, model: str | None = None, *, system_db: str | None = None) -> Report:
    """Launch DBOS (recovering a pipeline cut short), run or attach to this question's workflow; the report."""
    global RESEARCHER
    config: DBOSConfig = {
        'name': 'durable-pipeline',
        'system_database_url': system_db or default_system_db(),
        'log_level': 'WARNING',
    }
    async with perplexity_endpoint() as endpoint:
        RESEARCHER = Researcher(**endpoint)
        DBOS(config=config)
        DBOS.launch()
        try:
            wid = workflow_id(question)
            status = await DBOS.get_workflow_status_async(wid)
            if status is None:
                with SetWorkflowID(wid):
                    handle = await DBOS.start_workflow_async(pipeline, question, model)
            else:
                _say(f'workflow {wid} is {status.status}: attaching to it (its finished steps are not run again)')
                handle = await DBOS.retrieve_workflow_async(wid)
            return Report.model_validate(await handle.get_result())
        finally:
            await RESEARCHER.aclose()
            DBOS.destroy()


if __name__ == '__main__':
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('question')
    parser.add_argument('--model', help='a pydantic-ai model name, e.g. openai:gpt-5.4 (default: offline script)')
    parser.add_argument('--system-db', help='DBOS system database URL (default: in the state directory)')
    args = parser.parse_args()

    from pydantic_ai_perplexity._core.tracing import configure_tracing

    configure_tracing(service_name='durable-pipeline')
    print(asyncio.run(main(args.question, args.model, system_db=args.system_db)).to_markdown())
