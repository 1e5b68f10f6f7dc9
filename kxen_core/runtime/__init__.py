"""The runtime: one workspace's servers (:class:`Runtime`), each server's supervised life, the calls
the agent makes, contents, sign-ins, and the host-wide guards.

It may use every subpackage below it -- plugins, policy, protocol, launch, agent, config -- and the
hook contract; only :mod:`kxen_core.cli` uses it. ``Runtime`` loads on first use (an import of this
package alone stays cheap).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kxen_core.runtime.workspace import Runtime


def __getattr__(name: str) -> Any:
    if name == "Runtime":
        from kxen_core.runtime.workspace import Runtime

        return Runtime
    raise AttributeError(f"module 'kxen_core.runtime' has no attribute {name!r}")


__all__ = ["Runtime"]
