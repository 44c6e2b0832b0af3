"""The ``mock.mcp`` runtime: an MCP server (the official ``mcp`` SDK's low-level server) over
streamable HTTP, stateless with JSON answers, so a plain POST per message works (the stdio
bridge, ``mcp_stdio``, relies on that). Every tool call is logged."""

from __future__ import annotations

import asyncio
import json
import time
from contextlib import AbstractAsyncContextManager
from typing import Any

import mcp.types as types
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

from proctor.mock import Mock
from runner.core.limits import UserCodeError
from runner.mocks.call_log import CallLog, redact_headers
from runner.mocks.handlers import call_handler

# The path the server answers on (any path works; this is the one given to agents).
MCP_PATH = "/mcp"


def _result_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)


class McpMock:
    def __init__(self, mock: Mock, limit_s: float | None = None) -> None:
        self.mock = mock
        self.state: dict[str, Any] = {}
        self.log = CallLog(mock.name, "mcp")
        self.limit_s = limit_s
        self._headers: dict[str, str] = {}
        server: Server[Any] = Server(
            mock.name,
            version="1.0",
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
        )
        self.manager = StreamableHTTPSessionManager(app=server, json_response=True, stateless=True)

    def running(self) -> AbstractAsyncContextManager[None]:
        """The session manager's task group: entered while the server runs."""
        return self.manager.run()

    async def _list_tools(self, ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(
            tools=[
                types.Tool(
                    name=tool,
                    description=self.mock.tool_description(tool),
                    input_schema=self.mock.tool_schema(tool),
                )
                for tool in self.mock.tools
            ]
        )

    async def _call_tool(
        self, ctx: Any, params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        started = time.time()
        arguments = dict(params.arguments or {})
        func = self.mock.tools.get(params.name)
        error = ""
        value: Any = None
        if func is None:
            error = f"no tool {params.name!r} (tools: {', '.join(self.mock.tools)})"
        else:
            try:
                value = await asyncio.to_thread(
                    call_handler,
                    func,
                    (),
                    self.state,
                    kwargs=arguments,
                    what=f"mock {self.mock.name} tool {params.name}",
                    limit_s=self.limit_s,
                )
            except UserCodeError as exc:
                error = str(exc)
            except Exception as exc:
                error = f"{type(exc).__name__}: {exc}"
        shown = error or _result_text(value)
        self.log.add(
            started=started,
            method="TOOL",
            path=params.name,
            status=500 if error else 200,
            headers=redact_headers(self._headers),
            body=arguments,
            response=error or value,
            error=error,
        )
        result = types.CallToolResult(
            content=[types.TextContent(type="text", text=shown)], is_error=bool(error)
        )
        if not error and isinstance(value, dict):
            result.structured_content = value
        return result

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        self._headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        await self.manager.handle_request(scope, receive, send)
