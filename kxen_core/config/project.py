"""Rules for project config (``<workspace>/.kxen/mcp.json``), which comes from a repository.

A repository may describe MCP servers, but it is not trusted with secrets or with what runs: env keys
that change what runs or how a runtime loads are refused outright, and so are secrets (an OAuth client
secret, credential-bearing headers). Those belong in user config or the user's credential store.
"""

from __future__ import annotations

from .models import ServerConfig

#: env keys (compared case-insensitively) a project may never set
DANGEROUS_ENV = frozenset(
    {
        # what runs
        "PATH", "SHELL", "BASH_ENV", "ENV", "PROMPT_COMMAND", "SHELLOPTS", "BASHOPTS", "IFS", "CDPATH",
        "HOME", "ZDOTDIR", "GIT_EXEC_PATH", "GIT_SSH", "GIT_SSH_COMMAND", "GIT_CONFIG_GLOBAL",
        "EDITOR", "VISUAL", "PAGER", "BROWSER",
        # how a runtime loads
        "NODE_OPTIONS", "NODE_PATH", "NODE_REPL_EXTERNAL_MODULE",
        "PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONUSERBASE", "PYTHONEXECUTABLE",
        "PYTHONINSPECT", "PYTHONBREAKPOINT", "PYTHONSAFEPATH",
        "RUBYOPT", "RUBYLIB", "PERL5OPT", "PERL5LIB", "PERLLIB", "PERL5DB",
        "JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS", "CLASSPATH",
        "DOTNET_STARTUP_HOOKS", "CORECLR_PROFILER", "CORECLR_PROFILER_PATH",
        "GCONV_PATH", "MALLOC_CHECK_", "TCLLIBPATH", "LUA_PATH", "LUA_CPATH", "PHPRC",
    }
)
#: env key prefixes a project may never set: dynamic loader controls, and package-manager settings
#: that redirect what ``npx``/``uvx``/``pip`` fetch and run (registries, indexes, scripts)
DANGEROUS_ENV_PREFIXES = ("LD_", "DYLD_", "NPM_CONFIG_", "YARN_", "PNPM_", "BUN_", "PIP_", "UV_", "PIPX_", "BUNDLE_", "GEM_", "CARGO_")

#: header names (case-insensitive) that carry credentials
SECRET_HEADERS = frozenset({"authorization", "proxy-authorization", "cookie", "set-cookie"})
#: header-name fragments that mark a credential header
SECRET_HEADER_WORDS = ("key", "token", "secret", "credential", "password", "passwd", "auth", "session", "signature")


def dangerous_env_key(key: str) -> bool:
    upper = key.upper()
    return upper in DANGEROUS_ENV or upper.startswith(DANGEROUS_ENV_PREFIXES)


def secret_header(name: str) -> bool:
    lower = name.lower()
    return lower in SECRET_HEADERS or any(word in lower for word in SECRET_HEADER_WORDS)


def project_problems(server: ServerConfig) -> list[tuple[str, str]]:
    """``(key path suffix, rule)`` for everything a project entry must not hold."""
    problems: list[tuple[str, str]] = []
    for key in server.env:
        if dangerous_env_key(key):
            problems.append(
                (f"env.{key}", "project config must not set this variable: it changes what runs or how a runtime loads")
            )
    for name in server.headers:
        if secret_header(name):
            problems.append(
                (f"headers.{name}", "project config must not hold credential headers; put them in user config")
            )
    if server.oauth is not None and server.oauth.clientSecret is not None:
        problems.append(("oauth.clientSecret", "project config must not hold an OAuth client secret"))
    # a repository may tighten policy, never loosen it: allowing tools is the user's decision
    if server.defaultToolPolicy == "allow":
        problems.append(("defaultToolPolicy", "project config may only ask or deny; 'allow' belongs in user config"))
    for tool, decision in server.toolPolicies.items():
        if decision == "allow":
            problems.append(
                (f"toolPolicies.{tool}", "project config may only ask or deny; 'allow' belongs in user config")
            )
    return problems
