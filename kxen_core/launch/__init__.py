"""A local server's launch: resolved once (command on the host PATH, args, cwd, env, the files it
runs), fingerprinted for approval, and held when a launcher would pick up what the workspace holds.

It uses :mod:`kxen_core.config` (canonical paths, what counts as secret) and :mod:`kxen_core.errors`.
"""
