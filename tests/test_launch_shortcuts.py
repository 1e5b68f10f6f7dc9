"""The launch checks' shortcuts give what the standard library calls they stand for.

A launch's argument checks join every argument to the cwd and look for a file there; the launcher
rules are matched by the command's basename. Both have shortcuts (:func:`kxen_core.launch.resolve._under_cwd`,
:func:`kxen_core.launch.launchers._joined`, :func:`kxen_core.launch.launchers._rules_for`); these properties hold
them to the plain calls for any argument, cwd and command name.
"""

from __future__ import annotations

import os

from hypothesis import given, settings
from hypothesis import strategies as st

from kxen_core.launch.launchers import RULES, _joined, _pattern, _rules_for
from kxen_core.launch.resolve import _under_cwd

parts = st.sampled_from(["", ".", "..", "~", "~root", "a", "b.py", "-m", "--x=y", "/", "//", "x/../y", "\u00e9", " "])
args = st.lists(parts, min_size=1, max_size=4).map("/".join) | st.text(max_size=12)
cwds = st.sampled_from(["/", "/ws", "/ws/sub", "/tmp/a b"])


@settings(max_examples=400, deadline=None)
@given(cwd=cwds, arg=args)
def test_an_argument_lands_where_the_standard_library_puts_it(cwd, arg):
    if not arg or "\0" in arg:
        return
    assert _under_cwd(cwd, arg) == os.path.abspath(os.path.join(cwd, arg))
    assert _joined(cwd, arg) == os.path.join(cwd, os.path.expanduser(arg))


names = st.sampled_from(["python", "python3.11", "python3", "pypy3", "node", "npx", "uv", "uvx", "npm", "bun",
                         "bunx", "deno", "cargo", "sh", "bash", "java", "go", "server", "", "python.exe",
                         "nodejs", "x"])  # fmt: skip


@settings(max_examples=200, deadline=None)
@given(base=names | st.text(max_size=10))
def test_the_rules_for_a_command_are_the_rules_that_match_it(base):
    assert _rules_for(base) == tuple(r for r in RULES if _pattern(r.commands).fullmatch(base))
    assert _rules_for(base) == _rules_for(base)  # remembered: the same answer again
