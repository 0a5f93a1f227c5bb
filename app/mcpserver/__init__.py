"""Quiver as an MCP server: every agent's tool set at `/mcp/agents/{agent_name}`."""
