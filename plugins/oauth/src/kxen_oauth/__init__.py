"""kxen-oauth: OAuth 2.1 for kxen's remote MCP servers (see docs/oauth.md)."""
