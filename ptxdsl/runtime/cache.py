"""On-disk cache of assembled cubins.

Key: sha256 over (PTX text, arch, toolchain identity, driver version, assembler options), so
a new nvJitLink (or cuda-bindings), a new driver, another GPU, another `-maxrregcount` or one
changed character of PTX all miss.

Entry file `<key>.cubin` = 48-byte header + payload. The header holds a magic, the payload
length and an HMAC-SHA256 of (magic, length, key, payload) under a random per-user key kept in
the directory (`hmac.key`, 0600): a truncated or overwritten entry, or one written by anyone
without the key, is detected, removed and rebuilt instead of being handed to the driver.
Writes go to a temporary file in the same directory and are published with os.replace, which
is atomic on POSIX and Windows: several processes may fill the same entry at once and a reader
sees either no file or a whole one.

Trust (the threat model is in docs/interop.md): a cubin from the cache runs in this process,
so the directory must be this user's and writable by nobody else, entries and the key must be
regular files of this user's that others cannot write (nor, for the key, read), as ssh and
pip require of their files. Anything else is not used: one `PtxdslCacheWarning`, and the load
goes on uncached. Entries are opened without blocking and without following links, so a FIFO
or a link planted at an entry's name cannot hang or redirect a load.

Disabled by `PTXDSL_CACHE=0` (also 'false', 'no', 'off') or `cache=False`; the directory is
`cache_dir`, else `$PTXDSL_CACHE_DIR`, else `$XDG_CACHE_HOME/ptxdsl` (an absolute
XDG_CACHE_HOME only, as the XDG spec says), else `~/.cache/ptxdsl`. A directory the cache
creates is owner-only (0700): cubins of someone's kernels are nobody else's to read or plant.

Size cap: `PTXDSL_CACHE_MAX_MB` (default 1024; 0 = no cap). Each hit refreshes its entry's
mtime; after a write that takes the directory over the cap, the least recently used entries are
removed until it is at 3/4 of the cap (so eviction runs on a few writes, not on every one). A
value that is not 0 nor a size from one byte to 2^43 MB (a negative, a word, nan, 1e-9) is a
`PtxdslCacheWarning`, and the default cap is used.

The cache is an optimisation, never a reason to fail a load: when the directory cannot be
created, read or written (read-only, disk full, a file or folder in the way,
PTXDSL_CACHE_DIR naming a file), `cached_assemble` uses the freshly built cubin uncached and
says so with one `PtxdslCacheWarning` per directory and process. Temporary files a killed
writer left behind are removed once they are older than `STALE_TMP_S` (a live writer's
temporary file is seconds old, so sweeping by age cannot take one from under it).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import re
import secrets
import stat
import struct
import tempfile
import threading
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs

from ptxdsl import settings
from ptxdsl._files import file_kind
from ptxdsl.errors import user_loc
from ptxdsl.operands import _show
from ptxdsl.runtime.errors import CacheError

MAGIC = b"PTXDSLC2"
_OLD_MAGIC = b"PTXDSLC1"   # entries checked by a plain sha256: rebuilt, quietly
_HEADER = struct.Struct("<8sQ32s")
HEADER_SIZE = _HEADER.size  # 48
KEY_FILE = "hmac.key"
KEY_SIZE = 32
STALE_TMP_S = 3600.0
_TMP_SUFFIX = ".tmp"
_KEY = re.compile(r"[A-Za-z0-9_-]{1,128}")
DEFAULT_MAX_MB = settings.CACHE_MAX_MB_DEFAULT
# Never block on a FIFO planted at an entry's name, never follow a link planted there.
_READ_FLAGS = (os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0)
               | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0))
log = logging.getLogger(__name__)


class PtxdslCacheWarning(UserWarning):
    """The cubin cache could not be used; ptxdsl went on without it."""


_warned: set[str] = set()
_swept: set[str] = set()
_state_lock = threading.Lock()


def cache_enabled(cache: bool = True) -> bool:
    """False when the caller passed cache=False or PTXDSL_CACHE says off."""
    return bool(cache) and settings.CACHE.get()


def default_cache_dir() -> Path:
    """The cubin cache's folder when no `cache_dir` is given: `$PTXDSL_CACHE_DIR`, else
    `$XDG_CACHE_HOME/ptxdsl` (an absolute path), else `~/.cache/ptxdsl`."""
    mine = settings.CACHE_DIR.get()
    if mine is not None:
        return mine
    xdg = settings.XDG_CACHE_HOME.get()
    if xdg is not None:
        return xdg / "ptxdsl"
    return Path.home() / ".cache" / "ptxdsl"


def max_cache_bytes() -> int:
    """The size cap from PTXDSL_CACHE_MAX_MB (default 1024 MB); 0 means no cap. A value that
    is neither 0 nor a size of at least one byte and below 2^43 MB is a `PtxdslCacheWarning`
    (once per value and process) and gives the default."""
    raw = settings.CACHE_MAX_MB.raw() or ""
    return settings.CACHE_MAX_MB.get(
        warn=lambda message: _warn_once(f"PTXDSL_CACHE_MAX_MB={raw}", message))


def cache_key(ptx: str, arch: str, toolchain_version: str, driver_version: int | str,
              options=()) -> str:
    """sha256 hex over the inputs, each length-prefixed so no two tuples collide."""
    options = tuple(options)
    if not all(isinstance(v, str) for v in (ptx, arch, *options)) or \
            not isinstance(toolchain_version, str | int) or \
            not isinstance(driver_version, str | int):
        raise CacheError("cache_key: expected the PTX text, arch, toolchain and driver "
                         "versions and options as str (versions may be int), got "
                         + ", ".join(_show(v) for v in (ptx, arch, toolchain_version,
                                                        driver_version, options)))
    h = hashlib.sha256()
    opts = "\0".join(options)
    for part in (ptx, arch, str(toolchain_version), str(driver_version), opts):
        data = part.encode()
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()


def _mac(mac_key: bytes, name: str, payload: bytes) -> bytes:
    # The entry's name (its cache key) is signed too: a valid entry copied to another key's
    # name fails.
    m = hmac.new(mac_key, MAGIC, hashlib.sha256)
    for part in (name.encode(), payload):
        m.update(len(part).to_bytes(8, "little"))
        m.update(part)
    return m.digest()


def encode_entry(payload: bytes, mac_key: bytes, name: str) -> bytes:
    """The file of entry `name`: header (magic, length, HMAC under `mac_key`) + payload."""
    return _HEADER.pack(MAGIC, len(payload), _mac(mac_key, name, payload)) + payload


def _decode(blob: bytes, mac_key: bytes | None, name: str) -> tuple[bytes | None, str]:
    """(payload, "") for a good entry, else (None, why): "old" (the previous format),
    "damaged" (bad magic or length) or "forged" (its MAC does not verify under our key)."""
    if len(blob) < HEADER_SIZE:
        return None, "damaged"
    magic, length, digest = _HEADER.unpack_from(blob)
    payload = blob[HEADER_SIZE:]
    if magic == _OLD_MAGIC:
        return None, "old"
    if magic != MAGIC or length != len(payload):
        return None, "damaged"
    if mac_key is None or not hmac.compare_digest(_mac(mac_key, name, payload), digest):
        return None, "forged"
    return payload, ""


def decode_entry(blob: bytes, mac_key: bytes | None, name: str) -> bytes | None:
    """The payload of a well-formed entry `name` whose MAC verifies under `mac_key`; else None."""
    return _decode(blob, mac_key, name)[0]


def _not_ours(st: os.stat_result, private: bool = False) -> str | None:
    """Why a file or folder of the cache cannot be trusted (another user owns it, or others
    may write it; for `private` ones, read it either), or None. Where there are no POSIX
    owners (Windows) there is nothing to check."""
    if not hasattr(os, "geteuid"):
        return None
    uid, mode = os.geteuid(), stat.S_IMODE(st.st_mode)
    if st.st_uid != uid:
        return f"it belongs to uid {st.st_uid}, not to this user (uid {uid})"
    if mode & (0o077 if private else 0o022):
        return (f"its mode {mode:04o} lets other users "
                + ("read or write it" if private else "write to it"))
    return None


def _read_own(path: Path, what: str, private: bool = False) -> bytes | None:
    """The bytes of `path`, a regular file of this user's (see `_not_ours`); None when there
    is no such file; CacheError when it cannot be read or trusted."""
    try:
        fd = os.open(path, _READ_FLAGS)
    except FileNotFoundError:
        return None
    except OSError as exc:   # a link (O_NOFOLLOW), a socket, no permission
        try:
            mode: int | None = os.lstat(path).st_mode
        except OSError:
            mode = None
        if mode is not None and not stat.S_ISREG(mode):
            raise CacheError(f"{what} {path} is {file_kind(mode)}, not a regular file") \
                from None
        raise CacheError(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise CacheError(f"{what} {path} is {file_kind(st.st_mode)}, not a regular file")
        why = _not_ours(st, private)
        if why:
            raise CacheError(f"refusing {what} {path}: {why}")
        return f.read()


def _directory(d: Any) -> Path:
    if not isinstance(d, str | os.PathLike) or not os.fspath(d):
        raise CacheError(f"cubin cache directory must be a path, got {_show(d)}")
    return Path(d).expanduser()


def _amount(who: str, value: Any, what: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise CacheError(f"CubinCache.{who}: expected {what}, got {_show(value)}")


@attrs.define
class CubinCache:
    """A cache directory plus hit/miss/rebuild counters (per object, for tests and logs)."""

    directory: Path = attrs.field(converter=_directory)
    max_bytes: int | None = None     # None: max_cache_bytes() at each write
    hits: int = 0
    misses: int = 0
    corrupt: int = 0

    def path(self, key: str) -> Path:
        """The file of the entry `key` (a hex digest of what was assembled and how)."""
        # A key names a file in the directory (cache_key gives sha256 hex): one with a '/',
        # '..' or a NUL would name a file elsewhere, or none.
        if not isinstance(key, str) or not _KEY.fullmatch(key):
            raise CacheError(f"cubin cache key must be letters, digits, '_' or '-' (a "
                             f"cache_key() value), got {_show(key)}")
        return self.directory / f"{key}.cubin"

    def _trusted(self) -> bool:
        """Whether the directory exists (False: nothing cached yet); CacheError when it is
        not a folder, or not one to trust (another user's, or writable by others)."""
        try:
            st = os.stat(self.directory)
        except FileNotFoundError:
            return False
        except OSError as exc:
            raise CacheError(f"cannot look at it: {exc.strerror or exc}") from None
        if not stat.S_ISDIR(st.st_mode):
            raise CacheError(f"it is {file_kind(st.st_mode)}, not a folder")
        why = _not_ours(st)
        if why:
            raise CacheError(f"refusing it: {why}, so another user could plant cubins in it "
                             "that this process would run; use a folder of your own, "
                             "writable by you only (chmod go-w)")
        return True

    def mac_key(self, create: bool = False) -> bytes | None:
        """The directory's HMAC key (`hmac.key`), made when missing and `create`; None when
        missing otherwise. CacheError when the file is not this user's alone or not a key."""
        path = self.directory / KEY_FILE
        key = _read_own(path, "the cache's key", private=True)
        if key is None and create:
            # Written whole under a temporary name (mkstemp: O_EXCL, mode 0600), then linked
            # to its name, which fails if another process got there first: nobody reads a
            # partial key, and every process ends up with the same one.
            fd, tmp = tempfile.mkstemp(prefix=".hmac.", suffix=_TMP_SUFFIX, dir=self.directory)
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(secrets.token_bytes(KEY_SIZE))
                    f.flush()
                    os.fsync(f.fileno())
                try:
                    os.link(tmp, path)
                except FileExistsError:
                    pass
            finally:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
            key = _read_own(path, "the cache's key", private=True)
        if key is not None and len(key) != KEY_SIZE:
            raise CacheError(f"the cache's key {path} holds {len(key)} bytes, not {KEY_SIZE}; "
                             "remove it (a new one is made, and the cache starts afresh)")
        return key

    def get(self, key: str) -> bytes | None:
        """The cubin stored under `key` (its entry made young again), or None: absent, not a
        regular file of this user's, or damaged, of an older format or failing its signature
        (such an entry is removed, and the caller rebuilds it)."""
        if not self._trusted():
            return None
        path = self.path(key)
        blob = _read_own(path, "entry")
        if blob is None:
            return None
        payload, why = _decode(blob, self.mac_key(), key)
        if payload is None:
            self.corrupt += 1
            if why == "forged":
                _warn_once(f"{self.directory}\0forged",
                           f"cubin cache {self.directory}: entry {path.name} fails its "
                           "integrity check (damaged, or not written by this user's ptxdsl); "
                           "removing it and rebuilding")
            elif why == "old":
                log.info("cubin cache entry %s is of an older format; rebuilding it", path)
            else:
                log.warning("cubin cache entry %s is damaged; removing it and rebuilding",
                            path)
            # Another process may have just replaced it with a good entry; removing that one
            # only costs a rebuild, so no lock is needed.
            try:
                path.unlink()
            except OSError:
                pass
            return None
        try:   # least recently used = oldest mtime: a hit makes the entry young again
            os.utime(path)
        except OSError:
            pass
        return payload

    def evict(self, max_bytes: int | None = None) -> int:
        """Remove least recently used entries while the directory holds more than `max_bytes`
        (down to 3/4 of it); return how many. Never raises for a file it cannot read or remove."""
        if max_bytes is not None:
            _amount("evict", max_bytes, "a byte count or None")
        cap = max_cache_bytes() if max_bytes is None else max_bytes
        if cap <= 0:
            return 0
        try:
            entries = []
            for e in os.scandir(self.directory):
                if e.name.endswith(".cubin") and e.is_file(follow_symlinks=False):
                    st = e.stat()
                    entries.append((st.st_mtime, st.st_size, e.path))
        except OSError:
            return 0
        total = sum(size for _, size, _ in entries)
        if total <= cap:
            return 0
        removed = 0
        for _, size, path in sorted(entries):
            if total <= cap * 3 // 4:
                break
            try:
                os.unlink(path)
            except OSError:
                continue
            total -= size
            removed += 1
        log.info("cubin cache %s: evicted %d least recently used entries (cap %d bytes)",
                 self.directory, removed, cap)
        return removed

    def _make_directory(self) -> None:
        d = self.directory
        existed = d.is_dir()
        d.mkdir(mode=0o700, parents=True, exist_ok=True)
        if existed:
            return
        # mkdir's mode is filtered by the umask, which may only remove bits: set it exactly.
        os.chmod(d, 0o700)

    def sweep(self, max_age_s: float = STALE_TMP_S) -> int:
        """Remove temporary files older than `max_age_s` (left by a writer that was killed
        between creating and publishing one); return how many. Never raises for a file it cannot
        read or remove."""
        _amount("sweep", max_age_s, "an age in seconds")
        removed = 0
        cutoff = time.time() - max_age_s
        try:
            entries = list(os.scandir(self.directory))
        except OSError:
            return 0
        for e in entries:
            if not (e.name.startswith(".") and e.name.endswith(_TMP_SUFFIX)):
                continue
            try:
                if e.is_file(follow_symlinks=False) and e.stat().st_mtime < cutoff:
                    os.unlink(e.path)
                    removed += 1
            except OSError:   # gone already (another sweeper), or not ours to remove
                pass
        return removed

    def put(self, key: str, payload: bytes) -> Path:
        """Store `payload` (a cubin) under `key`, signed with this user's key; return the
        entry's file."""
        path = self.path(key)   # a bad key is refused before anything is created
        if not isinstance(payload, bytes | bytearray | memoryview):
            raise CacheError(f"CubinCache.put: the payload must be bytes, got {_show(payload)}")
        try:
            self._make_directory()
        except OSError as exc:
            raise CacheError(f"cannot create cubin cache directory {self.directory}: {exc}; "
                             "set PTXDSL_CACHE_DIR or PTXDSL_CACHE=0") from None
        self._trusted()   # an existing folder must be ours before anything in it is touched
        with _state_lock:
            first = str(self.directory) not in _swept
            _swept.add(str(self.directory))
        if first:   # once per directory and process: a sweep lists the whole directory
            self.sweep()
        mac_key = self.mac_key(create=True)
        assert mac_key is not None, "mac_key(create=True) makes the key or raises"
        fd, tmp = tempfile.mkstemp(prefix=f".{key[:16]}.", suffix=_TMP_SUFFIX,
                                   dir=self.directory)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(encode_entry(payload, mac_key, key))
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
        self.evict(self.max_bytes)
        return path

    def get_or_build(self, key: str, build: Callable[[], bytes]) -> tuple[bytes, bool]:
        """(payload, hit): the cached payload, or `build()`'s result, stored for next time."""
        payload = self.get(key)
        if payload is not None:
            self.hits += 1
            return payload, True
        self.misses += 1
        payload = build()
        self.put(key, payload)
        return payload, False


def cached_assemble(ptx: str, arch: str, assemble: Callable[..., bytes],
                    toolchain_version: str, driver_version: int | str, *, cache: bool = True,
                    cache_dir: str | os.PathLike | None = None,
                    options=()) -> tuple[bytes, bool | None]:
    """Assemble `ptx` for `arch` through the cache: (cubin, hit); hit is None when disabled.

    `options` (assembler options) are passed to `assemble(ptx, arch, options=...)` when given
    and are part of the key."""
    options = () if options is None else (options,) if isinstance(options, str) \
        else tuple(options)
    if options:
        build = assemble
        assemble = lambda p, a: build(p, a, options=options)  # noqa: E731
    if not cache_enabled(cache):
        log.debug("cubin cache disabled; assembling for %s", arch)
        return assemble(ptx, arch), None
    try:
        store = CubinCache(cache_dir if cache_dir is not None else default_cache_dir())
    except RuntimeError as exc:   # Path.home(): no HOME and no password entry
        _warn_uncached(Path("~"), f"cannot find a home folder for it ({exc})")
        return assemble(ptx, arch), None
    key = cache_key(ptx, arch, toolchain_version, driver_version, options)
    try:
        payload = store.get(key)
    except (CacheError, OSError) as exc:
        _warn_uncached(store.directory, _reason(exc, "cannot read it"))
        return assemble(ptx, arch), None
    if payload is not None:
        store.hits += 1
        log.debug("cubin cache hit %s (%s, %d bytes)", key[:16], arch, len(payload))
        return payload, True
    store.misses += 1
    log.debug("cubin cache miss %s (%s); assembling", key[:16], arch)
    payload = assemble(ptx, arch)   # an assembly error is the user's, never swallowed
    try:
        store.put(key, bytes(payload))
    except (CacheError, OSError) as exc:
        _warn_uncached(store.directory, _reason(exc, "cannot write it"))
        return payload, None
    return payload, False


def _reason(exc: BaseException, doing: str) -> str:
    return exc.message if isinstance(exc, CacheError) else \
        f"{doing} ({type(exc).__name__}: {exc})"


def _warn_uncached(directory: Path, what: str) -> None:
    """One `PtxdslCacheWarning` per directory and process: the cache is not used."""
    _warn_once(str(directory), f"cubin cache {directory}: {what}; going on without the cache "
               "(set PTXDSL_CACHE_DIR to a writable folder of your own, or PTXDSL_CACHE=0 "
               "to silence this)")


def _warn_once(key: str, message: str) -> None:
    """`message` as a PtxdslCacheWarning at the user's line (and a log record), the first
    time `key` is met in this process."""
    with _state_lock:
        if key in _warned:
            return
        _warned.add(key)
    log.warning("%s", message)
    loc = user_loc()
    warnings.warn_explicit(message, PtxdslCacheWarning, loc.file, loc.line)
