"""Reading ``/proc/<pid>/stat``: what stopping a server relies on to know its processes.

The parse is checked against a plain reading of the same line (every field split, the name cut out
after its last ``)``), for this process and for a real child whose name holds spaces and parens.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest
from kxen_transport_stdio.procs.tree import _parse, read_stat, stat, table

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc is Linux's")


def plain(raw: bytes) -> tuple[str, int, int, int, int]:
    """state, ppid, pgrp, sid and start time: fields 3-6 and 22 of proc(5), by a full split."""
    fields = raw[raw.rfind(b")") + 2 :].split()
    return fields[0].decode(), int(fields[1]), int(fields[2]), int(fields[3]), int(fields[19])


def test_this_process_reads_as_the_kernel_says():
    me = stat(os.getpid())
    assert me is not None
    assert (me.ppid, me.pgrp, me.sid) == (os.getppid(), os.getpgrp(), os.getsid(0))
    raw = read_stat(os.getpid())
    assert raw is not None
    assert (me.state, me.ppid, me.pgrp, me.sid, me.start) == plain(raw)
    assert table()[os.getpid()] == me


def test_a_name_with_spaces_and_parens_does_not_shift_the_fields(tmp_path):
    exe = tmp_path / "a) b (c"  # the process name is the file's name (at most 15 bytes)
    shutil.copy(sys.executable, exe)
    child = subprocess.Popen([str(exe), "-I", "-S", "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        raw = read_stat(child.pid)
        assert raw is not None and b"(a) b (c)" in raw
        proc = stat(child.pid)
        assert proc is not None
        assert proc.ppid == os.getpid()
        assert (proc.state, proc.ppid, proc.pgrp, proc.sid, proc.start) == plain(raw)
    finally:
        child.communicate(b"", timeout=10)
    assert stat(child.pid) is None  # reaped: gone


def test_a_short_or_garbled_line_is_no_process():
    assert _parse(1, b"1 (x) S 0 1") is None
    assert _parse(1, b"1 (x) S zero 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 25 0") is None
    line = b"7 (x) y) S 1 7 7 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 12345 99 1 2 3"
    proc = _parse(7, line)
    assert proc is not None and (proc.state, proc.ppid, proc.pgrp, proc.sid, proc.start) == plain(line) == (
        "S",
        1,
        7,
        7,
        12345,
    )


def test_a_missing_process_reads_as_none():
    assert read_stat("nonexistent") is None
    assert stat(2**22 + 1) is None  # above the kernel's largest pid
