"""JSON-RPC with one MCP server in either era: the session, the handshake and the stateless era,
replies and waiters, requests the server sends, notices, progress, and paged bounded catalogs.

It uses only the hook contract (:mod:`kxen_core.transport`, :mod:`kxen_core.hookcall`,
:mod:`kxen_core.asks`, :mod:`kxen_core.errors`, :mod:`kxen_core.safe_text`): no config loading,
policy, launch or runtime.
"""
