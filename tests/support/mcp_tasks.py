"""The client half of MCP tasks (the 2026-07-28 tasks extension) on the MCP SDK's client, over Streamable HTTP."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from typing import Any, Literal

import anyio
import httpx2
from mcp.client import Client
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult, CancelTaskRequestParams, GetTaskRequestParams, Request, Result
from pydantic import TypeAdapter

from support.mcp_servers import HttpServer

_ANY = TypeAdapter(dict[str, Any])


class GetTask(Request[GetTaskRequestParams, Literal['tasks/get']]):
    method: Literal['tasks/get'] = 'tasks/get'
    params: GetTaskRequestParams
    name_param = 'taskId'


class CancelTask(Request[CancelTaskRequestParams, Literal['tasks/cancel']]):
    method: Literal['tasks/cancel'] = 'tasks/cancel'
    params: CancelTaskRequestParams
    name_param = 'taskId'


class TaskHandle(Result):
    """A `CreateTaskResult` of the 2026-07-28 tasks extension (`resultType: "task"`)."""

    result_type: Literal['task'] = 'task'
    task_id: str
    status: str
    status_message: str | None = None
    created_at: str
    ttl_ms: int | None = None
    poll_interval_ms: int | None = None


async def get_task(client: Client, task_id: str) -> dict[str, Any]:
    return await client.session.send_request(GetTask(params=GetTaskRequestParams(task_id=task_id)), _ANY)


async def cancel_task(client: Client, task_id: str) -> dict[str, Any]:
    return await client.session.send_request(CancelTask(params=CancelTaskRequestParams(task_id=task_id)), _ANY)


class Tasks(ClientExtension):
    """The client half of the tasks extension, on the SDK's `ClientExtension`: a task handle is polled to its end."""

    identifier = 'io.modelcontextprotocol/tasks'

    def __init__(self) -> None:
        self.handles: list[TaskHandle] = []
        self.polls: list[dict[str, Any]] = []

    def claims(self) -> list[ResultClaim[Any]]:
        return [ResultClaim(result_type='task', model=TaskHandle, resolve=self._resolve)]

    async def _resolve(self, handle: TaskHandle, ctx: ClaimContext) -> CallToolResult:
        self.handles.append(handle)
        while True:
            task = await ctx.session.send_request(GetTask(params=GetTaskRequestParams(task_id=handle.task_id)), _ANY)
            self.polls.append(task)
            if task['status'] != 'working':
                return CallToolResult.model_validate(task['result'])
            await anyio.sleep(0.1)  # the server asks for 2 s; the emulator's runs are short


@asynccontextmanager
async def http_client(server: HttpServer | str, token: str, *extensions: ClientExtension) -> AsyncGenerator[Client]:
    """The MCP SDK's client over Streamable HTTP to a server (or a URL, e.g. nginx's), with a bearer token."""
    url = server if isinstance(server, str) else server.url
    async with httpx2.AsyncClient(headers={'Authorization': f'Bearer {token}'}) as http:
        transport = streamable_http_client(url, http_client=http)
        async with Client(transport, extensions=list(extensions)) as client:
            yield client
