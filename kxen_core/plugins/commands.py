"""The commands plugins add to the ``kxen`` command line (``kxen_register_commands``).

Each implementation is asked on its own, in the order the plugins were loaded. One that raises
(or registers something that is not a :class:`kxen_core.commands.Command`) adds none of its
commands; a command whose name is taken (by the core, or by an earlier plugin) is not added. Each
is a warning naming the plugin, and the other commands stay.
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
    for impl in caller.get_hookimpls():  # in the order the plugins were registered
        plugin = impl.plugin_name
        mine: list[Command] = []

        def register(command: Any, _mine: list[Command] = mine) -> None:
            if not isinstance(command, Command):
                raise TypeError(f"register() takes a kxen_core.commands.Command, not {type(command).__name__}")
            _mine.append(command)

        try:
            impl.function(*[{"register": register}[a] for a in impl.argnames])
        except Exception as exc:  # this plugin's commands are not added; the others' are
            warnings.append(f"plugin {plugin}: kxen_register_commands raised {type(exc).__name__}: {exc}")
            continue
        for command in mine:
            if command.name in core:
                warnings.append(f"plugin {plugin}: command {command.name!r} is one of kxen's own: not added")
            elif command.name in found:
                warnings.append(
                    f"plugin {plugin}: command {command.name!r} is already added by plugin {owners[command.name]}: "
                    "not added"
                )
            else:
                found[command.name], owners[command.name] = command, plugin
    for warning in warnings:
        log.warning("%s", warning)
    return found, warnings


__all__ = ["plugin_commands"]
