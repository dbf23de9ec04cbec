"""On-disk cache of assembled cubins.

Key: sha256 over (PTX text, arch, toolchain version, driver version), so a new nvJitLink, a
new driver, another GPU or one changed character of PTX all miss.

Entry file `<key>.cubin` = 48-byte header + payload. The header holds a magic, the payload
length and the payload's sha256: a truncated or overwritten entry is detected, removed and
rebuilt instead of being handed to the driver. Writes go to a temporary file in the same
directory and are published with os.replace, which is atomic on POSIX and Windows: several
processes may fill the same entry at once and a reader sees either no file or a whole one.

Disabled by `PTXDSL_CACHE=0` (also 'false', 'no', 'off') or `cache=False`; the directory is
`cache_dir`, else `$PTXDSL_CACHE_DIR`, else `~/.cache/ptxdsl`.

The cache is an optimisation, never a reason to fail a load: when the directory cannot be
created, read or written (read-only, disk full, a file or folder in the way,
PTXDSL_CACHE_DIR naming a file), `cached_assemble` uses the freshly built cubin uncached and
says so with one `PtxdslCacheWarning` per directory and process. Temporary files a killed
writer left behind are removed once they are older than `STALE_TMP_S` (a live writer's
temporary file is seconds old, so sweeping by age cannot take one from under it).
"""

from __future__ import annotations

import hashlib
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
    return Path.home() / ".cache" / "ptxdsl"


def cache_key(ptx: str, arch: str, toolchain_version: str, driver_version: int | str) -> str:
    """sha256 hex over the inputs, each length-prefixed so no two tuples collide."""
    h = hashlib.sha256()
    for part in (ptx, arch, str(toolchain_version), str(driver_version)):
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
            # Another process may have just replaced it with a good entry; removing that one
            # only costs a rebuild, so no lock is needed.
            try:
                path.unlink()
            except OSError:
                pass
        return payload

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
            self.directory.mkdir(parents=True, exist_ok=True)
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


def cached_assemble(ptx: str, arch: str, assemble: Callable[[str, str], bytes],
                    toolchain_version: str, driver_version: int | str, *, cache: bool = True,
                    cache_dir: str | os.PathLike | None = None) -> tuple[bytes, bool | None]:
    """Assemble `ptx` for `arch` through the cache: (cubin, hit); hit is None when disabled."""
    if not cache_enabled(cache):
        return assemble(ptx, arch), None
    try:
        store = CubinCache(cache_dir if cache_dir is not None else default_cache_dir())
    except RuntimeError as exc:   # Path.home(): no HOME and no password entry
        _warn_once(Path("~"), f"cannot find a home folder for it ({exc})")
        return assemble(ptx, arch), None
    key = cache_key(ptx, arch, toolchain_version, driver_version)
    try:
        payload = store.get(key)
    except (CacheError, OSError) as exc:
        _warn_once(store.directory, f"cannot read it ({_reason(exc)})")
        return assemble(ptx, arch), None
    if payload is not None:
        store.hits += 1
        return payload, True
    store.misses += 1
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
    loc = user_loc()
    warnings.warn_explicit(f"cubin cache {directory}: {what}; going on without the cache "
                           "(set PTXDSL_CACHE_DIR to a writable folder, or PTXDSL_CACHE=0 "
                           "to silence this)", PtxdslCacheWarning, loc.file, loc.line)
