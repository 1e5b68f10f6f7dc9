"""What plugins hold as secret: the sources registered through ``kxen_register_secrets``.

Each implementation is asked on its own, in pluggy's order; one that raises (or registers something
that is not callable) loses its own sources only, and is logged as a warning naming the plugin.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

log = logging.getLogger("kxen.plugins")

SecretSource = Callable[[], Iterable[str]]


def secret_sources(pm: Any) -> tuple[SecretSource, ...]:
    """Every secret source the plugins of ``pm`` register (``kxen_register_secrets``)."""
    caller = getattr(pm.hook, "kxen_register_secrets", None)
    if caller is None:
        return ()
    found: list[SecretSource] = []
    for impl in reversed(caller.get_hookimpls()):
        mine: list[SecretSource] = []

        def register(values: SecretSource, _mine: list[SecretSource] = mine) -> None:
            if not callable(values):
                raise TypeError(f"kxen_register_secrets: register() takes a callable, not {type(values).__name__}")
            _mine.append(values)

        try:
            impl.function(*[{"register": register}[a] for a in impl.argnames])
        except Exception as exc:
            log.warning("plugin %s: kxen_register_secrets raised %s: %s", impl.plugin_name, type(exc).__name__, exc)
            continue
        found.extend(mine)
    return tuple(found)


__all__ = ["SecretSource", "secret_sources"]
