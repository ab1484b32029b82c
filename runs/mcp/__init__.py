"""The MCP endpoint (official ``mcp`` SDK, Streamable HTTP at /api/mcp): see runs/mcp/server.py.

Apps on top of runs add tools of their own by naming a module here (``register_tool_module`` in
their ``AppConfig.ready``): the server imports it when it is built and calls its
``add_tools(mcp, forward) -> {tool name: scope}``. Runs never imports those apps.
"""

_tool_modules: list[str] = []


def register_tool_module(name: str) -> None:
    if name not in _tool_modules:
        _tool_modules.append(name)


def tool_modules() -> list[str]:
    return list(_tool_modules)
