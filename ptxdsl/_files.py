"""Writing ptxdsl's output files without destroying what is not ours to replace.

Every file ptxdsl writes on request (`Module.write`, a sample's `--ptx PATH`,
`python -m ptxdsl emit`, `ptxdsl.testing.check_golden`) goes through `write_file`:

- the text goes to a temporary file in the destination's folder and replaces the destination
  with `os.replace` only once it is whole (a failure leaves an existing file as it was);
- the destination must be a regular file or nothing. A folder, a device node (run as root,
  `write("/dev/null")` would otherwise replace the system's /dev/null with a file), a FIFO or
  a socket is refused with an `OutputError`;
- a symbolic link is written through: the file it points to gets the new text and the link
  stays a link (a golden kept as a symlink stays one). Its target must be a regular file or
  nothing, as above; a dangling link's target is created. A link that someone else may have
  planted (in a sticky folder everyone may write, such as /tmp, owned by neither this user
  nor the folder's owner: the fs.protected_symlinks rule) is refused.

What this cannot stop: someone who can write in the destination's folder can swap its entry
between the check and the replace. Such a person can replace the file anyway.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import shutil
import stat

from .errors import OutputError

_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a FIFO"),
          (stat.S_ISSOCK, "a socket"), (stat.S_ISLNK, "a symbolic link"))


def file_kind(mode: int) -> str:
    """What a non-regular `st_mode` (of `os.lstat`, or `os.stat`) is, in words ("a FIFO",
    "a folder", ...)."""
    return next((what for test, what in _KINDS if test(mode)), "not a regular file")


def _planted_link(path: str) -> str | None:
    """Why a symbolic link at `path` must not be followed: Linux's fs.protected_symlinks rule,
    applied whatever the sysctl says (resolving the link here would bypass it anyway). In a
    sticky folder that everyone may write (/tmp), a link owned by neither this user nor the
    folder's owner was planted by someone else: written through, it would replace any file
    this user (root, say) can write."""
    try:
        link = os.lstat(path)
        if not stat.S_ISLNK(link.st_mode) or not hasattr(os, "geteuid"):
            return None
        folder = os.stat(os.path.dirname(os.path.abspath(path)))
    except OSError:
        return None
    public = folder.st_mode & stat.S_ISVTX and folder.st_mode & stat.S_IWOTH
    if public and link.st_uid not in (os.geteuid(), folder.st_uid):
        return (f"a symbolic link of uid {link.st_uid} in a folder everyone may write; "
                "refusing to write through it (it could point anywhere)")
    return None


def output_target(path: str, who: str) -> str:
    """The absolute path that writing `path` replaces: `path` itself, or the file a symbolic
    link at `path` points to. Raises `OutputError` (naming `who`) when that is anything but
    a regular file or nothing, or when the link may have been planted (`_planted_link`)."""
    if "\0" in path:   # os.stat would raise a bare ValueError; no file has such a name
        raise OutputError(f"{who}: cannot write {path!r}: a path has no NUL character",
                          OSError(errno.EINVAL, "embedded NUL", path))
    planted = _planted_link(path)
    if planted:
        raise OutputError(f"{who}: {path!r} is {planted}", OSError(errno.EACCES, planted, path))
    real = os.path.realpath(path)
    try:
        st = os.stat(real)
    except FileNotFoundError:
        return real
    except OSError as e:   # a link loop, no permission to look: not replaceable either
        raise OutputError(f"{who}: cannot write {path!r}: {e.strerror or e}", e) from e
    if not stat.S_ISREG(st.st_mode):
        via = f" (a link to {real!r})" if real != os.path.abspath(path) else ""
        what = file_kind(st.st_mode)
        raise OutputError(f"{who}: {path!r}{via} is {what}, not a regular file; refusing to "
                          "replace it (give the path of a regular file, or a new one)",
                          OSError(errno.EISDIR if what == "a folder" else errno.EEXIST,
                                  f"is {what}", path))
    return real


def write_file(path: str | os.PathLike, data: bytes, who: str) -> str:
    """Write `data` to `path` as the module docstring says (parent folders created, an
    existing file's permissions kept; a new one gets 0o666 less the umask, as
    open(path, "w") would give). Returns the path written. Raises `OutputError`."""
    given = os.fspath(path)
    real = output_target(given, who)
    try:
        _replace(real, data)
    except OSError as e:   # a folder that is a file, no permission, a full disk, ...
        raise OutputError(f"{who}: cannot write {given!r}: {e.strerror or type(e).__name__}"
                          + (f" ({e.filename!r})" if e.filename and e.filename not in
                             (given, real) else ""), e) from e
    return real


def _replace(real: str, data: bytes) -> None:
    folder = os.path.dirname(real)
    os.makedirs(folder, exist_ok=True)
    tmp = os.path.join(folder, f".{os.path.basename(real)}.{secrets.token_hex(6)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        if os.path.exists(real):   # an existing file keeps its permissions
            shutil.copymode(real, tmp)
        os.replace(tmp, real)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
