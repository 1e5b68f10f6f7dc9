"""The audit trail in the runtime: which trail a config gets, the audited call path and the flush
as a runtime closes (the records themselves: :mod:`kxen_core.policy.audit`).

Whether a runtime records: the user's ``[audit] enabled`` in ``config.toml`` when written, else the
host's default (``Runtime(audit=True)``: the ``kxen`` command; ``False`` for any other host). Loaded
only when a runtime records.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Mapping

    from kxen_core.config import Config
    from kxen_core.policy.audit import Trail
    from kxen_core.protocol.progress import ProgressCallback


def trail(rt: Any, config: Config) -> Trail | None:
    """The trail ``rt`` writes under ``config`` (the one it has when nothing changed), or None."""
    from kxen_core.config.paths import data_dir
    from kxen_core.policy.audit import Trail

    settings = config.settings.audit
    if not (rt._audit_default if settings.enabled is None else settings.enabled):
        return None
    where, previous = data_dir(), rt._audit
    if previous is not None and previous.directory == where and previous.settings == settings:
        return previous  # the same file with the same bounds
    return Trail(where, settings)


async def audited_call(
    rt: Any,
    call: Any,
    trail: Trail,
    name: str,
    arguments: Mapping[str, Any] | None,
    *,
    server: str | None,
    timeout: float | None,
    on_progress: ProgressCallback | None,
    **task: bool,
) -> dict[str, Any]:
    """``call`` (:func:`kxen_core.runtime.calls.call_tool` or its timed twin) with a note that
    records the call once decided and once it ended."""
    note = trail.note()
    try:
        result = await call(
            rt, name, arguments, server=server, timeout=timeout, on_progress=on_progress, note=note, **task
        )
    except BaseException as exc:
        note.failed(exc)
        raise
    note.ended(result)
    return result


async def flush(seconds: float = 5.0) -> None:
    """Wait (at most ``seconds``, shielded) until what this process recorded is written."""
    import anyio
    import anyio.to_thread

    from kxen_core.policy import audit_file

    with anyio.move_on_after(seconds, shield=True):
        await anyio.to_thread.run_sync(audit_file.flush, seconds, abandon_on_cancel=True)


__all__ = ["audited_call", "flush", "trail"]
