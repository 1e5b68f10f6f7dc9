"""The mock tests run on both anyio backends: asyncio (the transports' fast path) and trio (the
generic path). The tests against real peers pin asyncio in their own modules."""

from __future__ import annotations

import pytest

#: httpx's ``Response.aiter_text`` / ``aiter_bytes`` / ``aiter_raw`` are nested async generators that
#: httpx (and httpx-sse, over ``aiter_text``) never close when a stream is left early; trio warns
#: when it finalizes them (upstream: encode/httpx issue 3686). Only that warning is ignored, on trio.
HTTPX_GENERATORS_ON_TRIO = pytest.mark.filterwarnings(
    "ignore:Async generator 'httpx._models.Response.aiter_:ResourceWarning"
)


@pytest.fixture(params=["asyncio", pytest.param("trio", marks=HTTPX_GENERATORS_ON_TRIO)])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return request.param
