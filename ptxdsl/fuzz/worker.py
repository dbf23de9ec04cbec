"""nvJitLink in a child process, so a toolchain crash or hang is a finding, not the end of
the fuzz run.

Random PTX finds inputs that crash the assembler itself (nvJitLink 13.x segfaults on
`st.param` through a register inside a kernel, for one). `Assembler()(ptx, arch)` returns
None when ptxas accepts, the error log when it rejects, and a log starting with `CRASH:` or
`HANG:` when the child died or did not answer; the child is restarted on the next call.

The child never outlives its parent: it closes its copy of the parent's pipe end (a forked
child inherits both ends, and while it holds the parent's end open its own `recv` never sees
EOF), exits on EOF, and on Linux also asks the kernel for SIGKILL when the parent dies
(PR_SET_PDEATHSIG), which covers a parent killed by SIGKILL mid-request.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import multiprocessing as mp
import os
import signal
import sys
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess

CRASH, HANG = "CRASH:", "HANG:"
_PR_SET_PDEATHSIG = 1


def _die_with_parent(parent_pid: int) -> None:
    """Linux: SIGKILL this process when its parent dies (no-op elsewhere)."""
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):   # no prctl: EOF on the pipe still ends the child
        return
    if os.getppid() != parent_pid:   # the parent died before prctl took effect
        os._exit(0)


def _serve(conn, parent_end=None, parent_pid: int | None = None) -> None:
    if parent_end is not None:
        parent_end.close()   # else this child keeps its own pipe open and never sees EOF
    if parent_pid is not None:
        _die_with_parent(parent_pid)
    # The parent handles Ctrl-C (it prints its tally); the child just answers until EOF.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    import faulthandler
    faulthandler.disable()   # a crash here is expected and reported by the parent
    from ..errors import AssemblyError
    from ..toolchain import assemble
    while True:
        try:
            msg = conn.recv()
        except EOFError:
            return
        if msg is None:
            return
        ptx, arch = msg
        try:
            assemble(ptx, arch, warn=False)
            conn.send(None)
        except AssemblyError as e:
            conn.send(e.log or str(e))
        except Exception as e:  # noqa: BLE001 - reported to the parent as a rejection
            conn.send(f"ERROR {type(e).__name__}: {e}")


class Assembler:
    """A restartable child process running `ptxdsl.toolchain.assemble`."""

    def __init__(self, timeout_s: float = 120.0):
        self.timeout_s = timeout_s
        self.crashes = 0
        self._proc: BaseProcess | None = None
        self._conn: Connection | None = None

    def _start(self) -> Connection:
        method = "fork" if sys.platform.startswith("linux") else "spawn"
        ctx = mp.get_context("fork") if method == "fork" else mp.get_context("spawn")
        parent, child = ctx.Pipe()
        # Forked, the child also gets `parent`: hand it over so the child can close it.
        args = (child, parent, os.getpid()) if method == "fork" else (child, None, os.getpid())
        self._proc = ctx.Process(target=_serve, args=args, daemon=True,
                                 name="ptxdsl-fuzz-nvjitlink")
        self._proc.start()
        child.close()
        self._conn = parent
        return parent

    def _stop(self) -> None:
        if self._proc is not None:
            if self._proc.is_alive():
                self._proc.kill()
            self._proc.join(5)
        self._proc = self._conn = None

    def __call__(self, ptx: str, arch: str) -> str | None:
        conn = self._conn   # set together with _proc
        if self._proc is None or not self._proc.is_alive() or conn is None:
            self._stop()
            conn = self._start()
        try:
            conn.send((ptx, arch))
            if not conn.poll(self.timeout_s):
                self._stop()
                return f"{HANG} nvJitLink did not answer within {self.timeout_s:g} s"
            return conn.recv()
        except (EOFError, BrokenPipeError, ConnectionResetError, OSError):
            code = self._proc.exitcode if self._proc is not None else None
            self._stop()
            self.crashes += 1
            return f"{CRASH} the nvJitLink process died (exit code {code})"

    @property
    def pid(self) -> int | None:
        """The child's process id while it runs (tests: it must not outlive the parent)."""
        return self._proc.pid if self._proc is not None and self._proc.is_alive() else None

    def close(self) -> None:
        """Stop the assembler process (asking it to exit first)."""
        if self._conn is not None:
            try:
                self._conn.send(None)
            except OSError:
                pass
        self._stop()
