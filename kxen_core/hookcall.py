"""Calling the async-capable hooks.

pluggy is synchronous: a plain ``pm.hook.x(...)`` would hand back bare coroutine objects, and
``firstresult`` would take a coroutine for an answer. These helpers walk the implementations in
pluggy's own order (so ``tryfirst``/``trylast`` still hold), await what needs awaiting, *then* test
for ``None``, and wrap anything an implementation raises as :class:`PluginHookError` naming it.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pluggy

from kxen_core.errors import PluginHookError
from kxen_core.hookspecs import ASYNC_HOOKS

if TYPE_CHECKING:
    import logging

#: the ``kxen.hooks`` logger, taken once ``logging`` is loaded: importing kxen does not load it,
#: and until something has, nothing can have turned that logger on
_log: logging.Logger | None = None


def tracing() -> bool:
    """Whether hook calls are logged (``-vv`` or ``KXEN_TRACE_PLUGINS=1``, see kxen_core.cli.setup):
    then every implementation is asked on every call, with no prepared shortcut."""
    global _log
    log = _log
    if log is None:
        module = sys.modules.get("logging")
        if module is None:
            return False
        log = _log = module.getLogger("kxen.hooks")
    return log.isEnabledFor(10)  # logging.DEBUG


def impls(pm: pluggy.PluginManager, name: str) -> list[Any]:
    """The implementations of async-capable hook ``name`` in the order pluggy would call them."""
    if name not in ASYNC_HOOKS:
        raise ValueError(f"{name} is not an async-capable hook; call it through pm.hook")
    # pluggy calls the last registered first; get_hookimpls() is in registration order, tryfirst last.
    return list(reversed(getattr(pm.hook, name).get_hookimpls()))


async def acall_one(impl: Any, name: str, kwargs: dict[str, Any]) -> Any:
    """Call one implementation of hook ``name`` (from :func:`impls`) as :func:`acall_all` does."""
    try:
        result = impl.function(*[kwargs[a] for a in impl.argnames])
        if result is not None and inspect.isawaitable(result):
            result = await result
    except (Exception, SystemExit) as exc:  # a plugin's sys.exit() must not end the host either
        raise PluginHookError(
            f"plugin {impl.plugin_name!r} raised in {name}: {type(exc).__name__}: {exc}",
            plugin=impl.plugin_name,
            hook=name,
        ) from exc
    if tracing() and _log is not None:
        _log.debug("%s <- %s: %s", name, impl.plugin_name, type(result).__name__)
    return result


_impls, _call_one = impls, acall_one


async def acall_first(pm: pluggy.PluginManager, name: str, **kwargs: Any) -> Any:
    """Return the first non-None answer of hook ``name``, or ``None``."""
    for impl in _impls(pm, name):
        result = await _call_one(impl, name, kwargs)
        if result is not None:
            return result
    return None


async def acall_all(
    pm: pluggy.PluginManager,
    name: str,
    *,
    on_error: Callable[[PluginHookError], Any] | None = None,
    **kwargs: Any,
) -> list[tuple[str, Any]]:
    """Return ``(plugin_name, answer)`` for every non-None answer of hook ``name``.

    With ``on_error``, an implementation that raises is passed to it and its result (if not
    ``None``) stands in for the answer; without, the error propagates.
    """
    answers: list[tuple[str, Any]] = []
    for impl in _impls(pm, name):
        try:
            result = await _call_one(impl, name, kwargs)
        except PluginHookError as err:
            if on_error is None:
                raise
            result = on_error(err)
        if result is not None:
            answers.append((impl.plugin_name, result))
    return answers


def check_async_impls(pm: pluggy.PluginManager) -> None:
    """Refuse wrapper impls on async-capable hooks (they cannot wrap an awaited call)."""
    for name in ASYNC_HOOKS:
        for impl in getattr(pm.hook, name).get_hookimpls():
            if impl.wrapper or impl.hookwrapper:
                raise PluginHookError(
                    f"plugin {impl.plugin_name!r}: {name} is async-capable and cannot take a wrapper",
                    plugin=impl.plugin_name,
                    hook=name,
                )
