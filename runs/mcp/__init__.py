"""The MCP endpoint (official ``mcp`` SDK, Streamable HTTP at /api/mcp): see runs/mcp/server.py."""
