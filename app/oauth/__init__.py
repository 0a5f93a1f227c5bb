"""OAuth 2.1 for the MCP endpoint: clients, codes and tokens; the Authlib server (docs/oauth.md)."""
