"""The commands plugins add to the ``kxen`` command line (``kxen_register_commands``).

Each implementation is asked on its own, in pluggy's order. One that raises, registers something
that is not a :class:`kxen_core.commands.Command`, or takes a name already taken (by the core or by
an earlier plugin) loses that registration only: it is a warning naming the plugin, and the other
commands stay.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from kxen_core.commands import Command

log = logging.getLogger("kxen.plugins")


def plugin_commands(pm: Any, taken: Iterable[str]) -> tuple[dict[str, Command], list[str]]:
    """The commands the plugins of ``pm`` register, by name, and the warnings about the ones refused."""
    caller = getattr(pm.hook, "kxen_register_commands", None)
    found: dict[str, Command] = {}
    owners: dict[str, str] = {}
    warnings: list[str] = []
    if caller is None:
        return found, warnings
    core = set(taken)
    for impl in reversed(caller.get_hookimpls()):
        plugin = impl.plugin_name

        def register(command: Any, _plugin: str = plugin) -> None:
            if not isinstance(command, Command):
                raise TypeError(f"register() takes a kxen_core.commands.Command, not {type(command).__name__}")
            if command.name in core:
                warnings.append(f"plugin {_plugin}: command {command.name!r} is one of kxen's own: not added")
            elif command.name in found:
                warnings.append(
                    f"plugin {_plugin}: command {command.name!r} is already added by plugin {owners[command.name]}: "
                    "not added"
                )
            else:
                found[command.name], owners[command.name] = command, _plugin

        try:
            impl.function(*[{"register": register}[a] for a in impl.argnames])
        except Exception as exc:
            warnings.append(f"plugin {plugin}: kxen_register_commands raised {type(exc).__name__}: {exc}")
    for warning in warnings:
        log.warning("%s", warning)
    return found, warnings


__all__ = ["plugin_commands"]
