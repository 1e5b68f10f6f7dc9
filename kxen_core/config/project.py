"""Rules for project config (``<workspace>/.kxen/mcp.json``), which comes from a repository.

A repository may describe MCP servers, but it is not trusted with secrets or with what runs: env keys
that change what runs or how a runtime loads are refused outright, and so are secrets (an OAuth client
secret, credential-bearing headers). Those belong in user config or the user's credential store.

Project env is an **allowlist** of shapes a user can read in an approval: a key of letters, digits and
``_`` (a letter first, at most 64) that is not in a loader/runtime/tool family (:data:`ENV_FAMILIES`,
first ``_``-separated word) and holds no word that names code, a path or a proxy (:data:`ENV_WORDS`),
and a value of at most :data:`MAX_ENV_VALUE` characters without shell, template or quote characters
(:data:`ENV_VALUE_RE`). :data:`ENV_ALLOWED` names the few well-known harmless keys of those families.
The denylist (:data:`DANGEROUS_ENV`) stays as a second line with its own message.
"""

from __future__ import annotations

import re

from kxen_core.config.models import USER_ONLY_GRANTS, USER_ONLY_OAUTH_KEYS, ServerConfig, check_project_cwd

#: env keys (compared case-insensitively) a project may never set
DANGEROUS_ENV = frozenset(
    {
        # what runs
        "PATH",
        "SHELL",
        "BASH_ENV",
        "ENV",
        "PROMPT_COMMAND",
        "SHELLOPTS",
        "BASHOPTS",
        "IFS",
        "CDPATH",
        "HOME",
        "ZDOTDIR",
        "GIT_EXEC_PATH",
        "GIT_SSH",
        "GIT_SSH_COMMAND",
        "GIT_CONFIG_GLOBAL",
        "EDITOR",
        "VISUAL",
        "PAGER",
        "BROWSER",
        # how a runtime loads
        "NODE_OPTIONS",
        "NODE_PATH",
        "NODE_REPL_EXTERNAL_MODULE",
        "PYTHONPATH",
        "PYTHONHOME",
        "PYTHONSTARTUP",
        "PYTHONUSERBASE",
        "PYTHONEXECUTABLE",
        "PYTHONINSPECT",
        "PYTHONBREAKPOINT",
        "PYTHONSAFEPATH",
        "RUBYOPT",
        "RUBYLIB",
        "PERL5OPT",
        "PERL5LIB",
        "PERLLIB",
        "PERL5DB",
        "JAVA_TOOL_OPTIONS",
        "_JAVA_OPTIONS",
        "JDK_JAVA_OPTIONS",
        "CLASSPATH",
        "DOTNET_STARTUP_HOOKS",
        "CORECLR_PROFILER",
        "CORECLR_PROFILER_PATH",
        "GCONV_PATH",
        "MALLOC_CHECK_",
        "TCLLIBPATH",
        "LUA_PATH",
        "LUA_CPATH",
        "PHPRC",
    }
)
#: env key prefixes a project may never set: dynamic loader controls, and package-manager settings
#: that redirect what ``npx``/``uvx``/``pip`` fetch and run (registries, indexes, scripts)
DANGEROUS_ENV_PREFIXES = (
    "LD_", "DYLD_", "NPM_CONFIG_", "YARN_", "PNPM_", "BUN_", "PIP_", "UV_", "PIPX_", "BUNDLE_", "GEM_", "CARGO_",
    "GIT_", "BASH_FUNC_", "PYTHON", "OPENSSL_", "LESS", "NODE_", "SSL_", "CURL_",
)  # fmt: skip
#: keys whose lower-case form is a proxy setting (curl, Python and Node read both cases)
DANGEROUS_ENV_SUFFIXES = ("_PROXY",)

#: a project env key: a letter, then letters, digits and _ (64 at most)
ENV_KEY_RE = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,63}")
#: a project env value: letters, digits, space and ``_ . , : / @ + = % # -`` -- no shell, template
#: or quote syntax, no escapes, no control characters
ENV_VALUE_RE = re.compile(r"[A-Za-z0-9 _.,:/@+=%#-]*")
MAX_ENV_VALUE = 1024
#: first words (of the upper-cased key split at ``_``) of loader, runtime and tool settings; a word
#: ending in ``*`` matches as a prefix (``PYTHON*`` covers PYTHONWARNINGS and PYTHONPYCACHEPREFIX)
ENV_FAMILIES = frozenset(
    {
        "LD", "DYLD", "GCONV", "GLIBC", "MALLOC", "LOCPATH", "NLSPATH", "HOSTALIASES", "RESOLV", "TZDIR",
        "BASH*", "ZSH*", "KSH", "SH", "FISH", "ENV", "IFS", "CDPATH", "PS1", "PS2", "PS3", "PS4", "PROMPT",
        "HIST*", "INPUTRC", "SHELL*", "HOME", "PATH", "USER", "LOGNAME", "TMP", "TMPDIR", "TEMP", "PWD", "OLDPWD",
        "XDG", "LC", "LANG", "LANGUAGE", "TERM*", "DISPLAY", "WAYLAND", "DBUS", "SYSTEMD", "SUDO",
        "EDITOR", "VISUAL", "PAGER", "MANPAGER", "MANPATH", "BROWSER", "LESS*", "MORE",
        "GIT", "HG", "SVN", "CVS", "SSH", "GPG*", "GNUPG*", "KRB5*",
        "PYTHON*", "PY", "PIP", "PIPX", "UV", "UVX", "CONDA", "VIRTUAL", "POETRY", "PDM", "HATCH", "PIPENV", "TOX",
        "NODE", "NPM", "NPX", "YARN", "PNPM", "BUN", "DENO", "COREPACK", "NVM", "VOLTA", "TS", "ELECTRON",
        "RUBY*", "GEM", "BUNDLE", "PERL*", "PHP*", "LUA", "TCL*", "TK", "R",
        "JAVA*", "JDK", "JRE", "MAVEN", "GRADLE", "CLASSPATH", "DOTNET", "COMPLUS", "CORECLR", "MONO",
        "GO*", "CARGO", "RUST*", "CC", "CXX", "CPP", "CFLAGS", "CXXFLAGS", "CPPFLAGS", "LDFLAGS", "CPATH",
        "MAKEFLAGS", "MFLAGS", "PKG", "CMAKE",
        "OPENSSL", "SSL", "CURL", "WGET", "REQUESTS", "GNUTLS", "NSS", "HTTP", "HTTPS", "ALL", "NO", "FTP",
        "DOCKER", "PODMAN", "KUBECONFIG", "KUBE", "HELM", "GOOGLE", "CLOUDSDK", "GCLOUD", "AZURE",
        "CHROME", "CHROMIUM", "PLAYWRIGHT", "PUPPETEER", "NIX", "HOMEBREW", "KXEN",
        "MPL*", "FLASK", "DJANGO", "CELERY", "GUNICORN", "UVICORN", "JUPYTER", "IPYTHON*", "QT", "GTK", "GIO", "GDK",
        "VIM*", "EXINIT", "MAIL*", "MAN*",
    }
)  # fmt: skip
#: words (anywhere in the upper-cased key split at ``_``) that name code, a path, a config file, a
#: proxy or a TLS switch
ENV_WORDS = frozenset(
    {
        "PATH", "HOME", "DIR", "FILE", "CONFIG", "CONF", "CFG", "RC", "PROFILE", "OPTS", "OPTIONS", "ARGS",
        "COMMAND", "CMD", "EXEC", "EXECUTABLE", "BIN", "BINARY", "PROGRAM", "SHELL", "EDITOR", "PAGER",
        "ASKPASS", "HOOK", "HOOKS", "PRELOAD", "LIBRARY", "LIB", "LIBS", "PLUGIN", "PLUGINS", "MODULE",
        "MODULES", "SCRIPT", "SCRIPTS", "STARTUP", "INIT", "LOADER", "IMPORT", "REQUIRE", "INCLUDE", "EVAL",
        "INTERPRETER", "REGISTRY", "INDEX", "MIRROR", "PROXY", "CA", "CAFILE", "CAPATH", "CERT", "CERTS",
        "INSECURE", "UNAUTHORIZED", "VERIFY", "TLS", "SSL", "FUNC", "PARAMETERS", "COUNT", "BACKEND", "ENGINE",
        "HANDLER", "CLASS", "FACTORY", "ENTRYPOINT", "APP", "SETTINGS", "WRAPPER", "RUNNER", "LAUNCHER",
    }
)  # fmt: skip
#: word endings that name the same things glued to another word (GNUPGHOME, JAVAHOME, NPMRC)
ENV_WORD_ENDINGS = ("PATH", "HOME", "DIR", "RC", "CONFIG", "CONF", "FILE", "PROXY", "OPTS", "OPTIONS", "ARGS",
                    "EXEC", "CMD", "COMMAND", "HOOK", "PRELOAD", "INIT")  # fmt: skip
#: well-known keys of those families that change nothing about what runs
ENV_ALLOWED = frozenset(
    {"NODE_ENV", "PYTHONUNBUFFERED", "PYTHONIOENCODING", "PYTHONUTF8", "PYTHONDONTWRITEBYTECODE", "NO_COLOR",
     "FORCE_COLOR", "TZ"}
)  # fmt: skip

#: header names (case-insensitive) that carry credentials
SECRET_HEADERS = frozenset({"authorization", "proxy-authorization", "cookie", "set-cookie"})
#: header-name fragments that mark a credential header
SECRET_HEADER_WORDS = ("key", "token", "secret", "credential", "password", "passwd", "auth", "session", "signature")


def dangerous_env_key(key: str) -> bool:
    upper = key.upper()
    return (
        upper in DANGEROUS_ENV or upper.startswith(DANGEROUS_ENV_PREFIXES) or upper.endswith(DANGEROUS_ENV_SUFFIXES)
    ) and upper not in ENV_ALLOWED


def env_key_rule(key: str) -> str | None:
    """The allowlist rule a project env key breaks, or None."""
    if not ENV_KEY_RE.fullmatch(key):
        return "project env keys are a letter, then letters, digits and '_' (64 at most)"
    upper = key.upper()
    if upper in ENV_ALLOWED:
        return None
    words = upper.split("_")
    first = words[0]
    family = first + "_*" if first in ENV_FAMILIES else None
    if family is None:
        prefixes = sorted((f[:-1] for f in ENV_FAMILIES if f.endswith("*")), key=len, reverse=True)
        family = next((p + "*" for p in prefixes if first.startswith(p)), None)
    if family is not None:
        return (
            f"project config must not set variables of the {family} family: "
            "they configure a loader, runtime or tool (set it in user config)"
        )
    for word in words:
        if word in ENV_WORDS or word.endswith(ENV_WORD_ENDINGS):
            return (
                f"project config must not set variables naming {word}: such a variable points a program "
                "at code, a path, a config file, a proxy or a TLS switch (set it in user config)"
            )
    return None


def env_value_rule(value: str) -> str | None:
    """The allowlist rule a project env value breaks, or None (the value is never echoed)."""
    if len(value) > MAX_ENV_VALUE:
        return f"project env values are at most {MAX_ENV_VALUE} characters"
    if not ENV_VALUE_RE.fullmatch(value):
        return (
            "project env values are letters, digits, spaces and _ . , : / @ + = % # - only "
            "(no shell, template or quote characters, no escapes or control characters)"
        )
    return None


def shown_key(key: str) -> str:
    """A key as a message shows it: non-printable characters escaped."""
    if key.isprintable():
        return key
    return "".join(c if c.isprintable() else f"\\x{ord(c):02x}" if ord(c) < 256 else f"\\u{ord(c):04x}" for c in key)


def secret_header(name: str) -> bool:
    lower = name.lower()
    return lower in SECRET_HEADERS or any(word in lower for word in SECRET_HEADER_WORDS)


def project_problems(server: ServerConfig) -> list[tuple[str, str]]:
    """``(key path suffix, rule)`` for everything a project entry must not hold."""
    problems: list[tuple[str, str]] = []
    for key, value in server.env.items():
        path = f"env.{shown_key(key)}"
        if dangerous_env_key(key):
            problems.append(
                (path, "project config must not set this variable: it changes what runs or how a runtime loads")
            )
            continue
        rule = env_key_rule(key) or env_value_rule(value)
        if rule:
            problems.append((path, rule))
    if server.cwd is not None:
        rule = check_project_cwd(server.cwd)
        if rule:
            problems.append(("cwd", rule))
    for name in server.headers:
        if secret_header(name):
            problems.append(
                (f"headers.{name}", "project config must not hold credential headers; put them in user config")
            )
    if server.oauth is not None and server.oauth.clientSecret is not None:
        problems.append(("oauth.clientSecret", "project config must not hold an OAuth client secret"))
    if server.oauth is not None and server.oauth.privateKeyFile is not None:
        problems.append(
            ("oauth.privateKeyFile", "project config must not name an OAuth private key; put it in user config")
        )
    if server.oauth is not None:
        for key in USER_ONLY_OAUTH_KEYS:
            if getattr(server.oauth, key) is not None:
                problems.append((f"oauth.{key}", "project config must not set this OAuth key; put it in user config"))
        if server.oauth.grant in USER_ONLY_GRANTS:
            problems.append(
                ("oauth.grant", f"project config must not choose {server.oauth.grant}; put it in user config")
            )
    if server.egressGuard == "off":
        problems.append(("egressGuard", "project config must not turn the argument guard off; only user config may"))
    if server.allowReadOnly:
        problems.append(("allowReadOnly", "project config must not allow tools without asking; only user config may"))
    if server.timeouts.toolSeconds:
        problems.append(
            ("timeouts.toolSeconds", "per-tool timeouts belong in user config; a project may set requestSeconds")
        )
    if server.pinning not in (None, "hold"):
        problems.append(("pinning", "project config may only make pinning stricter: 'hold' (its default) or nothing"))
    # a repository may tighten policy, never loosen it: allowing tools is the user's decision
    if server.defaultToolPolicy == "allow":
        problems.append(("defaultToolPolicy", "project config may only ask or deny; 'allow' belongs in user config"))
    for tool, decision in server.toolPolicies.items():
        if decision == "allow":
            problems.append(
                (f"toolPolicies.{tool}", "project config may only ask or deny; 'allow' belongs in user config")
            )
    return problems
