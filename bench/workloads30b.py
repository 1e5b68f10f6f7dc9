"""Issue 30's workloads W9 and W10, beside W4r, W7 and W8 (bench/workloads30.py): each runs one
repetition for one side and checks every result it gets. Only the section each docstring names is
timed.

- ``W9``: W6's sequential calls to a peer that requires ``Authorization: Bearer <token>``
  (``http_server.py --bearer``): kxen's OAuth side (the token in the OAuth plugin's store) against
  a Runtime that sends the same token as a static header (the ``kxen_bearer`` side).
- ``W10``: ``resources/read`` of a 1 MiB text resource (``server.py --resource-chars``); on the
  Runtime side through ``Runtime.read_resource``, which hands back the agent's bounded view.
"""

from __future__ import annotations

import gc
import secrets
from typing import Any

from adapters import BenchError, Client, ServerSpec
from server import RESOURCE_URI, resource_text
from workloads import Make, Sizes, _sequential, cpu, perf


async def _check_authorized(client: Client, made: int, token: str) -> None:
    """Every call the peer answered carried its token, none was refused (no 401: no challenge, no
    sign-in), one initialize; on the OAuth side the store still holds the token it was given (no
    refresh, no new sign-in), and the entry carries no header of its own (the adapter checks it)."""
    peer = getattr(client, "_peer", None)
    if peer is None:
        raise BenchError(f"{client.name}: no HTTP peer to ask")
    stats = await peer.auth_stats()
    authorized: dict[str, int] = stats["authorized"]
    if stats["refused"] or authorized.get("tools/call") != made or authorized.get("initialize") != 1:
        raise BenchError(f"W9 {client.name}: expected {made} authorized calls and no 401, the peer counted {stats}")
    stored = getattr(client, "stored_token", None)
    if stored is not None and stored() != token:
        raise BenchError("W9 kxen: the OAuth store no longer holds the token it was given")


async def w9_http_oauth(make: Make, sizes: Sizes) -> dict[str, float]:
    """W9: ``auth_calls`` sequential echo calls over Streamable HTTP on one session (after 100
    untimed ones), every request needing a Bearer token; a new token per repetition. Timed: the
    calls, as W6."""
    token = secrets.token_urlsafe(24)

    async def check(client: Client, made: int) -> None:
        await _check_authorized(client, made, token)

    return await _sequential(make, sizes.auth_calls, "w9", ServerSpec(bearer=token), check)


def _check_read(got: Any, text: str, limit: int | None) -> None:
    """A raw read result holds the whole text; the Runtime's (an ``AgentOutput``) holds at most
    ``limit`` characters: the resource's first ones, then the marker docs/cli.md names
    (``[output cut by kxen: N characters, more than the limit of M]``) on a line of its own."""
    if isinstance(got, dict):
        try:
            body = got["contents"][0]["text"]
        except (KeyError, IndexError, TypeError):
            raise BenchError(f"malformed resources/read result: {str(got)[:200]}") from None
        if body != text:
            raise BenchError(f"resources/read: {len(body or '')} characters, not the {len(text)} served")
        return
    if limit is None:
        raise BenchError("W10: a bounded view from a side that has no output bound")
    marker = f"[output cut by kxen: {len(text)} characters, more than the limit of {limit}]"
    shown = got.text
    if got.is_error or not got.truncated or got.original_chars != len(text):
        raise BenchError(f"W10 kxen: not cut as a {len(text)}-character output: {shown[:200]!r}")
    head = shown[: -len(marker)]
    if len(shown) > limit or not shown.endswith(marker) or not head.endswith("\n"):
        raise BenchError(f"W10 kxen: {len(shown)} characters, ending {shown[-120:]!r}")
    head = head[:-1]
    if len(head) < limit - len(marker) - 1 or not text.startswith(head):
        raise BenchError(f"W10 kxen: the {len(head)} characters shown are not the resource's first ones")


async def w10_read_bounded(make: Make, sizes: Sizes) -> dict[str, float]:
    """W10: ``reads`` sequential ``resources/read`` of one text resource of ``resource_chars``
    characters on one stdio session, after one untimed read. Timed: each read (the raw floor: the
    request over the pipe and ``json.loads`` of the answer; kxen: ``Runtime.read_resource``, the
    policy votes and the bounded view included); each result is checked off the clock."""
    text = resource_text(sizes.resource_chars)
    client = make(ServerSpec(resource_chars=sizes.resource_chars))
    await client.start()
    try:
        runtime = getattr(client, "runtime", None)
        limit = runtime.output_limit if runtime is not None else None
        read = client.read  # type: ignore[attr-defined]
        _check_read(await read(RESOURCE_URI), text, limit)
        elapsed = cpu_used = 0.0
        gc.collect()
        for _ in range(sizes.reads):
            c0, t0 = cpu(), perf()
            got = await read(RESOURCE_URI)
            elapsed, cpu_used = elapsed + perf() - t0, cpu_used + cpu() - c0
            _check_read(got, text, limit)
            del got
    finally:
        await client.close()
    return {"ms_per_read": elapsed / sizes.reads * 1e3, "cpu_ms_per_read": cpu_used / sizes.reads * 1e3}
