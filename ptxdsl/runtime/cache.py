"""On-disk cache of assembled cubins.

Key: sha256 over (PTX text, arch, toolchain identity, driver version, assembler options), so
a new nvJitLink (or cuda-bindings), a new driver, another GPU, another `-maxrregcount` or one
changed character of PTX all miss.

Entry file `<key>.cubin` = 48-byte header + payload. The header holds a magic, the payload
length and the payload's sha256: a truncated or overwritten entry is detected, removed and
rebuilt instead of being handed to the driver. Writes go to a temporary file in the same
directory and are published with os.replace, which is atomic on POSIX and Windows: several
processes may fill the same entry at once and a reader sees either no file or a whole one.

Disabled by `PTXDSL_CACHE=0` (also 'false', 'no', 'off') or `cache=False`; the directory is
`cache_dir`, else `$PTXDSL_CACHE_DIR`, else `$XDG_CACHE_HOME/ptxdsl` (an absolute
XDG_CACHE_HOME only, as the XDG spec says), else `~/.cache/ptxdsl`. A directory the cache
creates is owner-only (0700): cubins of someone's kernels are nobody else's to read or plant.

Size cap: `PTXDSL_CACHE_MAX_MB` (default 1024). Each hit refreshes its entry's mtime; after a
write that takes the directory over the cap, the least recently used entries are removed until
it is at 3/4 of the cap (so eviction runs on a few writes, not on every one).

The cache is an optimisation, never a reason to fail a load: when the directory cannot be
created, read or written (read-only, disk full, a file or folder in the way,
PTXDSL_CACHE_DIR naming a file), `cached_assemble` uses the freshly built cubin uncached and
says so with one `PtxdslCacheWarning` per directory and process. Temporary files a killed
writer left behind are removed once they are older than `STALE_TMP_S` (a live writer's
temporary file is seconds old, so sweeping by age cannot take one from under it).
"""

from __future__ import annotations

import hashlib
import logging
import math
import os
import struct
import tempfile
import threading
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import attrs

from ptxdsl.errors import user_loc
from ptxdsl.runtime.errors import CacheError

MAGIC = b"PTXDSLC1"
_HEADER = struct.Struct("<8sQ32s")
HEADER_SIZE = _HEADER.size  # 48
STALE_TMP_S = 3600.0
_TMP_SUFFIX = ".tmp"
DEFAULT_MAX_MB = 1024
log = logging.getLogger(__name__)


class PtxdslCacheWarning(UserWarning):
    """The cubin cache could not be used; ptxdsl went on without it."""


_warned: set[str] = set()
_swept: set[str] = set()
_state_lock = threading.Lock()


def cache_enabled(cache: bool = True) -> bool:
    """False when the caller passed cache=False or PTXDSL_CACHE says off."""
    env = os.environ.get("PTXDSL_CACHE", "").strip().lower()
    return bool(cache) and env not in ("0", "false", "no", "off")


def default_cache_dir() -> Path:
    env = os.environ.get("PTXDSL_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    if xdg and os.path.isabs(xdg):   # a relative one is invalid per the spec: ignored
        return Path(xdg) / "ptxdsl"
    return Path.home() / ".cache" / "ptxdsl"


def max_cache_bytes() -> int:
    """The size cap from PTXDSL_CACHE_MAX_MB (default 1024 MB); 0 or less means no cap."""
    raw = os.environ.get("PTXDSL_CACHE_MAX_MB", "").strip()
    try:
        mb = float(raw) if raw else DEFAULT_MAX_MB
    except ValueError:
        log.warning("PTXDSL_CACHE_MAX_MB=%r is not a number; using %d", raw, DEFAULT_MAX_MB)
        mb = DEFAULT_MAX_MB
    # float() also takes "nan", "inf" and "1e400" (inf), which int() refuses with a raw
    # ValueError/OverflowError; a cap of 2^63 bytes or more is no file size either. The docs
    # promise a warning for a bad value, so these fall back like a non-number.
    if not math.isfinite(mb) or mb * 1024 * 1024 >= 1 << 63:
        log.warning("PTXDSL_CACHE_MAX_MB=%r is not a finite size below 2^43 MB; using %d",
                    raw, DEFAULT_MAX_MB)
        mb = DEFAULT_MAX_MB
    return int(mb * 1024 * 1024)


def cache_key(ptx: str, arch: str, toolchain_version: str, driver_version: int | str,
              options=()) -> str:
    """sha256 hex over the inputs, each length-prefixed so no two tuples collide."""
    h = hashlib.sha256()
    opts = "\0".join(options)
    for part in (ptx, arch, str(toolchain_version), str(driver_version), opts):
        data = part.encode()
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()


def encode_entry(payload: bytes) -> bytes:
    return _HEADER.pack(MAGIC, len(payload), hashlib.sha256(payload).digest()) + payload


def decode_entry(blob: bytes) -> bytes | None:
    """The payload of a well-formed entry; None for a bad magic, length or hash."""
    if len(blob) < HEADER_SIZE:
        return None
    magic, length, digest = _HEADER.unpack_from(blob)
    payload = blob[HEADER_SIZE:]
    if magic != MAGIC or length != len(payload):
        return None
    if hashlib.sha256(payload).digest() != digest:
        return None
    return payload


@attrs.define
class CubinCache:
    """A cache directory plus hit/miss/rebuild counters (per object, for tests and logs)."""

    directory: Path = attrs.field(converter=lambda d: Path(d).expanduser())
    max_bytes: int | None = None     # None: max_cache_bytes() at each write
    hits: int = 0
    misses: int = 0
    corrupt: int = 0

    def path(self, key: str) -> Path:
        return self.directory / f"{key}.cubin"

    def get(self, key: str) -> bytes | None:
        path = self.path(key)
        try:
            blob = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise CacheError(f"cannot read cubin cache entry {path}: {exc}") from None
        payload = decode_entry(blob)
        if payload is None:
            self.corrupt += 1
            log.warning("cubin cache entry %s is damaged; removing it and rebuilding", path)
            # Another process may have just replaced it with a good entry; removing that one
            # only costs a rebuild, so no lock is needed.
            try:
                path.unlink()
            except OSError:
                pass
        try:   # least recently used = oldest mtime: a hit makes the entry young again
            os.utime(path)
        except OSError:
            pass
        return payload

    def evict(self, max_bytes: int | None = None) -> int:
        """Remove least recently used entries while the directory holds more than `max_bytes`
        (down to 3/4 of it); return how many. Never raises."""
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
        between creating and publishing one); return how many. Never raises."""
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
        try:
            self._make_directory()
        except OSError as exc:
            raise CacheError(f"cannot create cubin cache directory {self.directory}: {exc}; "
                             "set PTXDSL_CACHE_DIR or PTXDSL_CACHE=0") from None
        with _state_lock:
            first = str(self.directory) not in _swept
            _swept.add(str(self.directory))
        if first:   # once per directory and process: a sweep lists the whole directory
            self.sweep()
        path = self.path(key)
        fd, tmp = tempfile.mkstemp(prefix=f".{key[:16]}.", suffix=_TMP_SUFFIX,
                                   dir=self.directory)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(encode_entry(payload))
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
    options = (options,) if isinstance(options, str) else tuple(options)
    if options:
        build = assemble
        assemble = lambda p, a: build(p, a, options=options)  # noqa: E731
    if not cache_enabled(cache):
        log.debug("cubin cache disabled; assembling for %s", arch)
        return assemble(ptx, arch), None
    try:
        store = CubinCache(cache_dir if cache_dir is not None else default_cache_dir())
    except RuntimeError as exc:   # Path.home(): no HOME and no password entry
        _warn_once(Path("~"), f"cannot find a home folder for it ({exc})")
        return assemble(ptx, arch), None
    key = cache_key(ptx, arch, toolchain_version, driver_version, options)
    try:
        payload = store.get(key)
    except (CacheError, OSError) as exc:
        _warn_once(store.directory, f"cannot read it ({_reason(exc)})")
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
        _warn_once(store.directory, f"cannot write it ({_reason(exc)})")
        return payload, None
    return payload, False


def _reason(exc: BaseException) -> str:
    return exc.message if isinstance(exc, CacheError) else f"{type(exc).__name__}: {exc}"


def _warn_once(directory: Path, what: str) -> None:
    with _state_lock:
        if str(directory) in _warned:
            return
        _warned.add(str(directory))
    log.warning("cubin cache %s: %s; going on without the cache", directory, what)
    loc = user_loc()
    warnings.warn_explicit(f"cubin cache {directory}: {what}; going on without the cache "
                           "(set PTXDSL_CACHE_DIR to a writable folder, or PTXDSL_CACHE=0 "
                           "to silence this)", PtxdslCacheWarning, loc.file, loc.line)
