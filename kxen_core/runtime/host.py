"""A host process's guards: what plugins keep around all of its runtimes (hook ``kxen_host_guard``).

::

    async with host_guard(pm, home, subreaper=True) as problems:
        async with Runtime(home=home, pm=pm) as rt:
            ...

The ``kxen`` command enters it around every ``kxen mcp ...``. With the stdio transport installed
that ends the servers a crashed host left running, records the servers this process starts, and
(``subreaper=True``, Linux) ends the orphans of double-forking servers once the runtimes closed.
The core holds no process code: each guard is a plugin's.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any, cast

import pluggy

from kxen_core.errors import printable

log = logging.getLogger("kxen.host")


def _problem(plugin: str, when: str, exc: BaseException) -> str:
    return f"plugin {plugin} failed {when} kxen_host_guard: {type(exc).__name__}: {printable(str(exc))[:300]}"


class _Isolated:
    """One plugin's guard: a failure on the way out is reported, never raised into the host."""

    def __init__(self, guard: AbstractAsyncContextManager[Any], plugin: str, problems: list[str]) -> None:
        self.guard, self.plugin, self.problems = guard, plugin, problems

    async def __aenter__(self) -> None:
        await self.guard.__aenter__()

    async def __aexit__(self, *exc_info: Any) -> None:
        try:
            await self.guard.__aexit__(*exc_info)
        except (Exception, SystemExit) as exc:
            self.problems.append(_problem(self.plugin, "leaving", exc))
            log.warning("%s", self.problems[-1])


@asynccontextmanager
async def host_guard(
    pm: pluggy.PluginManager, home: Path | str, *, subreaper: bool = False
) -> AsyncIterator[list[str]]:
    """Enter every plugin's ``kxen_host_guard`` (in pluggy's order) and leave them in reverse.

    Yields the list of problems (a guard that raised on entry is skipped; one that raised on exit
    is reported); it grows until the block ends. ``subreaper`` allows a guard to adopt orphans: pass
    it only in a process whose other children all started before entering.
    """
    problems: list[str] = []
    display = getattr(pm, "display_name", lambda name: name)
    kwargs = {"home": Path(home), "subreaper": subreaper}
    async with AsyncExitStack() as stack:
        for impl in reversed(pm.hook.kxen_host_guard.get_hookimpls()):
            plugin = display(impl.plugin_name)
            try:
                guard = cast(
                    "AbstractAsyncContextManager[Any] | None", impl.function(*[kwargs[a] for a in impl.argnames])
                )
                if guard is not None:
                    await stack.enter_async_context(_Isolated(guard, plugin, problems))
            except (Exception, SystemExit) as exc:  # a plugin's sys.exit() must not end the host
                problems.append(_problem(plugin, "entering", exc))
                log.warning("%s", problems[-1])
        yield problems


__all__ = ["host_guard"]
