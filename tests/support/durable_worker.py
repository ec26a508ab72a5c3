"""A DBOS worker process for the durable tests: started, SIGKILLed mid-research, and started again.

    python durable_worker.py agent <dir>      # one agent workflow (DBOSDurability + PerplexityToolset), SQLite
    python durable_worker.py pipeline <dir>   # one workflow calling durable_research(), SQLite
    python durable_worker.py queue <dir>      # a ResearchQueue worker on PostgreSQL, until killed

The emulator runs in the test process: `PERPLEXITY_API_KEY` and `PERPLEXITY_BASE_URL` point at it. Spans go to
`<dir>/spans-<pid>.jsonl` as each ends, so those of a killed process are kept. A workflow's result goes to
`<dir>/result.json`.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

# Run as a script, this folder heads sys.path: its modules (client, tracing, ...) must not shadow anyone's imports.
sys.path[:] = [p for p in sys.path if Path(p or '.').resolve() != Path(__file__).resolve().parent]

from opentelemetry import trace  # noqa: E402
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult  # noqa: E402

WORKFLOW_ID = 'ask-1'
QUESTION = 'How do heat pumps work in cold climates?'
#: What the agent researches, in one model response: two calls run at once.
QUESTIONS = (QUESTION, 'What is the EU AI Act?')


class JsonlExporter(SpanExporter):
    """Appends each ended span (name, ids, parent, links) to a file, flushed at once."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        with self.path.open('a') as f:
            for span in spans:
                context = span.get_span_context()
                assert context is not None
                row = {
                    'name': span.name,
                    'trace_id': format(context.trace_id, '032x'),
                    'span_id': format(context.span_id, '016x'),
                    'parent': format(span.parent.span_id, '016x') if span.parent else None,
                    'parent_trace': format(span.parent.trace_id, '032x') if span.parent else None,
                    'links': [
                        [format(link.context.trace_id, '032x'), format(link.context.span_id, '016x')]
                        for link in span.links
                    ],
                    'pid': os.getpid(),
                }
                f.write(json.dumps(row) + '\n')
                f.flush()
        return SpanExportResult.SUCCESS


def tracing(directory: Path) -> None:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(JsonlExporter(directory / f'spans-{os.getpid()}.jsonl')))
    trace.set_tracer_provider(provider)


def scripted_model() -> Any:
    """Calls perplexity_research twice in one response (run in parallel), then answers with the two response ids."""
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        returns = [p for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]
        if returns:
            by_call = {p.tool_call_id: re.search(r'resp_[0-9a-f-]+', str(p.content)) for p in returns}
            ids = [found.group(0) if found else 'no-id' for _, found in sorted(by_call.items())]
            return ModelResponse(parts=[TextPart(' '.join(ids))])
        calls = [
            ToolCallPart('perplexity_research', {'query': q, 'effort': 'low'}, tool_call_id=f'call-{i}')
            for i, q in enumerate(QUESTIONS)
        ]
        return ModelResponse(parts=calls)

    return FunctionModel(respond, model_name='scripted')


def config(name: str, url: str, executor: str | None = None) -> Any:
    from dbos import DBOSConfig

    settings: DBOSConfig = {'name': name, 'system_database_url': url, 'log_level': 'WARNING'}
    if executor:
        settings['executor_id'] = executor
    return settings


async def one_workflow(directory: Path, mode: str) -> None:
    from dbos import DBOS, SetWorkflowID

    tracer = trace.get_tracer('durable_worker')
    if mode in ('agent', 'capability'):
        from pydantic_ai import Agent
        from pydantic_ai.durable_exec.dbos import DBOSDurability

        from pydantic_ai_perplexity import PerplexityResearch, PerplexityToolset

        ledger = directory / 'ledger.sqlite3'
        if mode == 'capability':  # the same research through the PerplexityResearch capability
            capabilities: list[Any] = [PerplexityResearch(ledger=ledger), DBOSDurability()]
            agent = Agent(scripted_model(), name='researcher', capabilities=capabilities)
        else:
            toolset = PerplexityToolset(ledger=ledger)
            agent = Agent(scripted_model(), name='researcher', toolsets=[toolset], capabilities=[DBOSDurability()])

        @DBOS.workflow(name='ask')
        async def ask(question: str) -> str:
            with tracer.start_as_current_span('ask'):
                return (await agent.run(question)).output

    else:
        from pydantic_ai_perplexity import Researcher
        from pydantic_ai_perplexity.durable import durable_research

        researcher = Researcher(ledger=os.environ.get('DURABLE_LEDGER') or directory / 'ledger.sqlite3')

        @DBOS.workflow(name='ask')
        async def ask(question: str) -> str:
            with tracer.start_as_current_span('ask'):
                return (await durable_research(question, researcher=researcher, effort='low')).response_id

    DBOS(config=config('durable-test', f'sqlite:///{directory / "dbos.sqlite3"}'))
    DBOS.launch()  # recovers the workflow a killed process left pending
    if await DBOS.get_workflow_status_async(WORKFLOW_ID) is None:
        with SetWorkflowID(WORKFLOW_ID):  # DURABLE_QUESTION: another question, e.g. with emulator directives
            handle = await DBOS.start_workflow_async(ask, os.environ.get('DURABLE_QUESTION', QUESTION))
    else:
        handle = await DBOS.retrieve_workflow_async(WORKFLOW_ID)
    output = await handle.get_result()
    (directory / 'result.json').write_text(json.dumps({'output': output, 'pid': os.getpid()}))
    DBOS.destroy()


def queue_worker(directory: Path, executor: str) -> None:
    from dbos import DBOS

    from pydantic_ai_perplexity import Researcher
    from pydantic_ai_perplexity.durable import ResearchQueue

    queue = ResearchQueue('questions', tier=None, worker_concurrency=6, polling_interval_sec=0.1)

    def capped_researcher() -> Researcher:
        cap = float(os.environ['DURABLE_CAP'])
        return Researcher(ledger=os.environ['DURABLE_CAPPED_LEDGER'], budget_usd=cap)

    capped = ResearchQueue(
        'capped', tier=None, worker_concurrency=6, polling_interval_sec=0.1, researcher=capped_researcher
    )
    DBOS(config=config('durable-queue', os.environ['DURABLE_SYSTEM_DB'], executor))
    DBOS.launch()
    queue.declare()
    capped.declare()
    (directory / f'ready-{executor}-{os.getpid()}').touch()
    threading.Event().wait()


def main() -> None:
    mode, directory = sys.argv[1], Path(sys.argv[2])
    tracing(directory)
    if mode == 'queue':
        queue_worker(directory, sys.argv[3])
    else:
        asyncio.run(one_workflow(directory, mode))


if __name__ == '__main__':
    main()
