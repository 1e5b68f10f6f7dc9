"""Config: attrs models, the one cattrs converter, the fail-closed loader (user and project scopes
merged), canonical paths, what counts as secret, and settings writes.

The lowest subpackage: it uses only the contract modules (:mod:`kxen_core.errors`, :mod:`kxen_core.safe_text`).
"""

from kxen_core.config.loader import Config, default_home, load_config
from kxen_core.config.models import OAuthConfig, ServerConfig, Settings, Timeouts, check_server_key

__all__ = [
    "Config",
    "OAuthConfig",
    "ServerConfig",
    "Settings",
    "Timeouts",
    "check_server_key",
    "default_home",
    "load_config",
]
