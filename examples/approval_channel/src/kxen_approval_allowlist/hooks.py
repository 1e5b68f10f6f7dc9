"""Entry point ``allowlist`` of the ``kxen`` group: approve exactly the fingerprints in a private file.

The contract of ``kxen_approval_prompt`` (see docs/approval-channels.md in kxen):

* return ``None`` when this channel cannot answer now (here: not configured), so kxen asks the next
  channel -- and says no when none answers;
* return an :class:`ApprovalDecision` to decide; the first channel that returns one decides;
* never block the event loop: the file is read in a worker thread.

Once configured this channel is decisive and fails closed: a fingerprint that is not listed, a file
that is missing, a symlink, not yours, readable or writable by others, too large or malformed -- each
is a refusal with the reason, never a silent pass to a more permissive channel.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

import anyio

from kxen_core import hookimpl
from kxen_core.policy import ApprovalDecision, ApprovalRequest

#: the environment variable naming the allowlist file
ENV_VAR = "KXEN_APPROVAL_ALLOWLIST"
#: an allowlist larger than this is refused, not read
MAX_BYTES = 64 * 1024
CHANNEL = "allowlist"

_FINGERPRINT = re.compile(r"^[0-9a-f]{64}$")


class AllowlistError(Exception):
    """The allowlist file may not be used; the message says why (never its content)."""


def read_allowlist(path: Path) -> frozenset[str]:
    """Open ``path`` safely and return its fingerprints; raise :class:`AllowlistError` if unusable.

    The checks run on the opened file descriptor (no race between checking and reading):
    no symlink (``O_NOFOLLOW``), a regular file, owned by the effective user, no permission bits for
    group or others, at most :data:`MAX_BYTES`, and every non-comment line a 64-hex fingerprint.
    """
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if os.path.islink(path):
            raise AllowlistError(f"{path} is a symlink; point {ENV_VAR} at the file itself") from None
        raise AllowlistError(f"{path} cannot be opened: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise AllowlistError(f"{path} is not a regular file")
        if st.st_uid != os.geteuid():
            raise AllowlistError(f"{path} is not owned by you (uid {st.st_uid})")
        mode = stat.S_IMODE(st.st_mode)
        if mode & 0o077:
            raise AllowlistError(f"{path} has mode {mode:04o}; it must be 0600 (chmod 600 {path})")
        if st.st_size > MAX_BYTES:
            raise AllowlistError(f"{path} is larger than {MAX_BYTES} bytes")
        chunks, size = [], 0
        while size <= MAX_BYTES:
            chunk = os.read(fd, MAX_BYTES + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        data = b"".join(chunks)
    finally:
        os.close(fd)
    if len(data) > MAX_BYTES:
        raise AllowlistError(f"{path} is larger than {MAX_BYTES} bytes")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise AllowlistError(f"{path} is not UTF-8 text") from None
    found = set()
    for number, line in enumerate(text.splitlines(), 1):
        entry = line.split("#", 1)[0].strip().lower()
        if not entry:
            continue
        if not _FINGERPRINT.match(entry):
            raise AllowlistError(f"{path}: line {number} is not a 64-hex-digit fingerprint")
        found.add(entry)
    return frozenset(found)


def decide(request: ApprovalRequest, path: Path) -> ApprovalDecision:
    """The blocking part: read the file, compare the fingerprint."""
    try:
        allowed = read_allowlist(path)
    except AllowlistError as exc:
        return ApprovalDecision(approved=False, reason=f"allowlist refused: {exc}", channel=CHANNEL)
    if not request.fingerprint:
        return ApprovalDecision(
            approved=False, reason=f"a {request.kind} request has no fingerprint to look up", channel=CHANNEL
        )
    if request.fingerprint.lower() in allowed:
        return ApprovalDecision(approved=True, reason=f"listed in {path}", channel=CHANNEL)
    return ApprovalDecision(
        approved=False, reason=f"fingerprint {request.fingerprint} is not in {path}", channel=CHANNEL
    )


def configured_path() -> Path | None:
    raw = os.environ.get(ENV_VAR, "").strip()
    return Path(raw).expanduser() if raw else None


@hookimpl
async def kxen_approval_prompt(request: ApprovalRequest) -> ApprovalDecision | None:
    path = configured_path()
    if path is None:
        return None  # not configured: let the next channel answer (none left = no)
    return await anyio.to_thread.run_sync(decide, request, path)
