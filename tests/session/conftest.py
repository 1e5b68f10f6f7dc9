"""Session tests: every one runs on asyncio and on trio, against a scripted in-memory server.

Tests about asyncio-only internals say so with ``@pytest.mark.parametrize("anyio_backend", ["asyncio"])``.
"""

from __future__ import annotations

import pytest
from session_support import Peer


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    """Session tests run on both anyio backends (the session's waiters differ; its behaviour must not)."""
    return request.param


@pytest.fixture(params=["send", "send_nowait"])
async def peer(request: pytest.FixtureRequest):
    """The scripted server; the client side either waits on every send or queues without waiting."""
    p = Peer(nowait=request.param == "send_nowait")
    try:
        yield p
    finally:
        p.close_all()
