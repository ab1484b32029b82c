"""The MCP endpoint (official ``mcp`` SDK, Streamable HTTP at /api/mcp): see runs/mcp/server.py.

Apps on top of runs add tools of their own by naming a module here (``register_tool_module`` in
their ``AppConfig.ready``): the server imports it when it is built and calls its
``add_tools(mcp, forward) -> {tool name: scope}``. Runs never imports those apps.
"""

from collections.abc import Awaitable, Callable
from typing import Any

_tool_modules: list[str] = []


class Forwarder:
    """A tool module's handle on the server's forwarder, bound by ``add_tools``. Kept as a module
    global so a tool's ``locals()`` hold only its arguments: ``await FORWARD(ctx, fn, Out, locals())``."""

    def __init__(self) -> None:
        self._bound: list[Callable[..., Awaitable[Any]]] = []

    def bind(self, forward: Callable[..., Awaitable[Any]]) -> None:
        self._bound.append(forward)  # the newest server's (a rebuilt server binds again)

    async def __call__(self, ctx: Any, fn: Any, output: Any, arguments: dict[str, Any]) -> Any:
        return await self._bound[-1](ctx, fn, output, arguments)


def register_tool_module(name: str) -> None:
    if name not in _tool_modules:
        _tool_modules.append(name)


def tool_modules() -> list[str]:
    return list(_tool_modules)
