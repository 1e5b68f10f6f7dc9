"""Plugin loading: the plugin manager, entry points loaded one at a time, the transport-kind registry,
the secret sources plugins register (:mod:`.secrets`).

Uses the hook contract (:mod:`kxen_core.hookspecs`, :mod:`kxen_core.hookcall`), :mod:`kxen_core.config`
(the converter a kind's options are checked with) and :mod:`kxen_core.policy` (the core's own default
hook implementations, registered by :func:`make_plugin_manager`). Nothing below it imports it.
"""

from kxen_core.plugins.manager import (
    KxenPluginManager,
    LoadFailure,
    PluginInfo,
    discover,
    make_plugin_manager,
    search_path,
)

__all__ = ["KxenPluginManager", "LoadFailure", "PluginInfo", "discover", "make_plugin_manager", "search_path"]
