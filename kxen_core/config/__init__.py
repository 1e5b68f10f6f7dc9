"""Config: attrs models, the fail-closed loader (user and project scopes merged), and settings writes."""

from .loader import Config, default_home, load_config
from .models import OAuthConfig, ServerConfig, Settings, Timeouts, check_server_key

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
