"""Test helpers: byte-exact golden PTX files, and assembling PTX for its declared target.

`tests/conftest.py` wires these into pytest (`--update-golden`, the `golden` fixture, and the
skip of `gpu` tests where no Hopper GPU is usable).
"""

from __future__ import annotations

import contextlib
import difflib
import faulthandler
import os
import re
import signal
import stat
from pathlib import Path

from ._files import file_kind, write_file
from .errors import BuildError, OperandError
from .module import Module
from .operands import _show, as_int
from .toolchain import assemble, package_binary

_TARGET = re.compile(r"^\.target\s+(\S+?)(?:,|\s|$)", re.M)


def declared_target(ptx: str) -> str:
    """The `.target` a PTX text declares (the arch its golden is assembled for)."""
    m = _TARGET.search(ptx) if isinstance(ptx, str) else None
    if not m:
        raise BuildError("declared_target: expected PTX text with a .target directive, got "
                         + (_show(ptx) if not isinstance(ptx, str) else "none in the text"))
    return m.group(1)


def assemble_declared(ptx: str) -> bytes:
    """Assemble PTX for exactly the target it declares."""
    return assemble(ptx, declared_target(ptx), warn=False)


def nvdisasm_path() -> str | None:
    """NVIDIA's disassembler: on PATH, or from the `nvidia-cuda-nvdisasm` package."""
    import shutil
    return shutil.which("nvdisasm") or package_binary("nvdisasm")


def sass(cubin: bytes) -> str:
    """The SASS of a cubin, as nvdisasm prints it (BuildError when nvdisasm is missing)."""
    import subprocess
    import tempfile
    if not isinstance(cubin, bytes | bytearray | memoryview):
        raise OperandError("sass", "cubin", "the cubin's bytes (Module.assemble())",
                           _show(cubin))
    tool = nvdisasm_path()
    if tool is None:
        raise BuildError("sass: nvdisasm not found (pip install nvidia-cuda-nvdisasm)")
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        out = subprocess.run([tool, "-c", "-hex", f.name], capture_output=True, text=True,
                             check=False)
    if out.returncode:
        raise BuildError(f"sass: nvdisasm failed: {out.stderr.strip()}")
    return out.stdout


def same_program(original: str, again: str) -> str | None:
    """None when two PTX texts assemble (for the target the first declares) to the same
    cubin, or failing that to the same SASS; otherwise what differs."""
    a, b = assemble_declared(original), assemble(again, declared_target(original), warn=False)
    if bytes(a) == bytes(b):
        return None
    sa, sb = sass(a), sass(b)
    if sa == sb:
        return None
    diff = difflib.unified_diff(sa.splitlines(True), sb.splitlines(True), "original", "again")
    return "".join(list(diff)[:40])


class GoldenMismatch(AssertionError):
    pass


def check_golden(module_or_text: Module | str, path: str | os.PathLike, *,
                 update: bool = False) -> str:
    """Compare emitted PTX with the golden file byte for byte (or rewrite it when `update`).

    A missing golden is an error unless `update` is set: goldens are created on purpose.
    """
    if not isinstance(module_or_text, Module | str):
        raise OperandError("check_golden", "module_or_text", "a Module or PTX text",
                           _show(module_or_text))
    if not isinstance(path, str | os.PathLike):
        raise OperandError("check_golden", "path", "the golden file's path", _show(path))
    text = module_or_text if isinstance(module_or_text, str) else module_or_text.emit()
    name = os.fspath(path)
    if not isinstance(name, str) or "\0" in name:
        raise OperandError("check_golden", "path", "a file's path (text, no NUL)", repr(name))
    path = Path(path)
    if update:
        # write_file: a golden that is a symlink stays one, a FIFO there is refused.
        if not path.is_file() or path.read_text() != text:
            write_file(path, text.encode(), "check_golden")
        return text
    if not path.exists():
        raise GoldenMismatch(f"golden file {path} does not exist; run pytest with "
                             "--update-golden to create it, then review it like code")
    want = _read_golden(path)
    if want != text:
        diff = "".join(difflib.unified_diff(want.splitlines(True), text.splitlines(True),
                                            str(path), "emitted"))
        raise GoldenMismatch(f"emitted PTX differs from {path}:\n{diff}")
    return text


def _read_golden(path: Path) -> str:
    """The golden's text; a folder, FIFO or device there is refused before it is opened (a
    FIFO would block the read forever)."""
    try:
        mode = os.stat(path).st_mode
        if not stat.S_ISREG(mode):
            raise BuildError(f"check_golden: golden {str(path)!r} is {file_kind(mode)}, not a "
                             "regular file")
        return path.read_text()
    except OSError as e:
        raise BuildError(f"check_golden: cannot read golden {str(path)!r}: "
                         f"{e.strerror or e}") from e


def golden_files(root: str | os.PathLike) -> list[Path]:
    """The .ptx files under the folder `root`, sorted. A root that is no folder is refused: a
    mistyped one gave no goldens, and the tests parametrized over them ran nothing."""
    if not isinstance(root, str | os.PathLike):
        raise OperandError("golden_files", "root", "the goldens' folder", _show(root))
    if not Path(root).is_dir():
        raise OperandError("golden_files", "root", "an existing folder of goldens",
                           repr(os.fspath(root)))
    return sorted(Path(root).rglob("*.ptx"))


@contextlib.contextmanager
def gpu_deadline(seconds: int):
    """Fail a GPU test that runs past `seconds` instead of freezing the suite.

    SIGALRM raises TimeoutError in Python code (ptxdsl's synchronize polls, so a hung kernel
    is interruptible there); faulthandler kills the process `seconds + 30` s in, should a driver
    call itself never return. Main thread only (signals)."""
    n = as_int(seconds)
    if n is None or n < 1:   # alarm(0) is no alarm: the test would have no deadline at all
        raise OperandError("gpu_deadline", "seconds", "a positive number of seconds (an int)",
                           _show(seconds))
    if n >= 1 << 31:         # signal.alarm takes a C int (OverflowError past it)
        raise OperandError("gpu_deadline", "seconds", "at most 2^31 - 1 seconds",
                           _show(seconds))
    seconds = n

    def on_alarm(signum, frame):
        raise TimeoutError(f"GPU test exceeded {seconds} s")

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(seconds)
    faulthandler.dump_traceback_later(seconds + 30, exit=True)
    try:
        yield
    finally:
        signal.alarm(0)
        faulthandler.cancel_dump_traceback_later()
        signal.signal(signal.SIGALRM, old)
