"""The audit of every tool call of every kind (connector, database, mcp, skill, agent, builtin)."""
