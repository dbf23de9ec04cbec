"""Small intersphinx inventories of the projects the documentation links to, kept in git so
the build needs no network (CI reaches only package registries, and `sphinx-build -W` would
fail on an inventory it cannot fetch).

Each `<project>.txt` here is an excerpt of that project's real `objects.inv`, in the
inventory's own plain-text form (version 2, uncompressed): the `py:` entries of the objects
ptxdsl's pages and signatures name (`KEEP`). The build compiles them into `objects.inv` files
under docs/_generated (`compile_all`, called by conf.py); links point at the projects' live
documentation (`PROJECTS`).

Refresh from the real inventories (needs network; or give a downloaded copy per project):

    python docs/_intersphinx/inventories.py [--from python=/path/to/objects.inv ...]

It reads `<url>/objects.inv` of each project, keeps the `KEEP` entries, rewrites the `.txt`
files and says which kept name the real inventory no longer has.

Where the files came from: python.txt is the excerpt of Python 3.11.2's real inventory (the
copy Debian's python3.11-doc package ships). numpy.txt, cuda.core.txt and torch.txt were
written where no real inventory could be fetched, entry by entry from the projects'
documentation sources (each name's page as their autosummary/autodoc directives make it:
`generated/cuda.core.Device.html` from cuda.core's api.rst, ...); the first refresh with
network replaces them with excerpts of the real ones.
"""

from __future__ import annotations

import argparse
import sys
import urllib.request
import zlib
from pathlib import Path

HERE = Path(__file__).resolve().parent

# project -> (documentation root the links point at, title)
PROJECTS: dict[str, tuple[str, str]] = {
    "python": ("https://docs.python.org/3", "Python"),
    "numpy": ("https://numpy.org/doc/stable", "NumPy"),
    "cuda.core": ("https://nvidia.github.io/cuda-python/cuda-core/latest", "cuda.core"),
    "torch": ("https://docs.pytorch.org/docs/stable", "PyTorch"),
}

# What each excerpt keeps. Python: builtins (the names without a dot) and the module-level
# objects of the standard modules ptxdsl's signatures use. The others: the objects ptxdsl's
# pages and docstrings name.
PY_MODULES = ("collections", "collections.abc", "enum", "os", "pathlib", "typing", "warnings",
              "logging", "ctypes", "weakref", "types", "dataclasses")
KEEP: dict[str, tuple[str, ...]] = {
    "numpy": ("numpy.ndarray", "numpy.dtype", "numpy.random.Generator",
              "numpy.from_dlpack"),
    "cuda.core": ("cuda.core", "cuda.core.Device", "cuda.core.launch", "cuda.core.Stream",
                  "cuda.core.Event", "cuda.core.LaunchConfig", "cuda.core.Buffer",
                  "cuda.core.Program", "cuda.core.Linker", "cuda.core.ObjectCode",
                  "cuda.core.Kernel", "cuda.core.TensorMapDescriptor",
                  "cuda.core.utils.StridedMemoryView",
                  "cuda.core.utils.args_viewable_as_strided_memory"),
    "torch": ("torch.Tensor", "torch.device", "torch.dtype", "torch.compile",
              "torch.library.Library", "torch.library.custom_op",
              "torch.library.register_fake"),
}

HEADER = ("# Sphinx inventory version 2\n# Project: {title}\n# Version: {version}\n"
          "# The remainder of this file is compressed using zlib.\n")


def _kept(project: str, name: str, role: str) -> bool:
    if not role.startswith("py:"):
        return False
    if project == "python":
        module, _, _ = name.rpartition(".")
        return (not module and role in ("py:class", "py:function", "py:exception")) or \
            (role == "py:module" and name in PY_MODULES) or module in PY_MODULES
    return name in KEEP[project]


def excerpt(project: str, real: bytes) -> tuple[str, list[str]]:
    """The plain-text excerpt of a real objects.inv (compressed, version 2), and the KEEP
    names it lacks."""
    lines = real.split(b"\n", 4)
    if lines[0] != b"# Sphinx inventory version 2":
        raise ValueError(f"{project}: not a version 2 Sphinx inventory")
    header = b"\n".join(lines[:4]).decode() + "\n"
    body = zlib.decompress(lines[4]).decode()
    kept, seen = [], set()
    for line in body.splitlines():
        name, role = line.split(" ", 2)[:2]
        if _kept(project, name, role):
            kept.append(line)
            seen.add(name)
    missing = [n for n in KEEP.get(project, ()) if n not in seen]
    return header + "\n".join(sorted(kept)) + "\n", missing


def compile_text(text: str) -> bytes:
    """A plain-text inventory (four header lines, then entries) as objects.inv bytes."""
    lines = text.split("\n", 4)
    return ("\n".join(lines[:4]) + "\n").encode() + zlib.compress(lines[4].encode(), 9)


def compile_all(out: Path) -> dict[str, tuple[str, str]]:
    """Write `<out>/<project>.inv` for every project; the `intersphinx_mapping` for them."""
    out.mkdir(parents=True, exist_ok=True)
    mapping = {}
    for project, (url, _) in PROJECTS.items():
        data = compile_text((HERE / f"{project}.txt").read_text())
        path = out / f"{project}.inv"
        if not path.exists() or path.read_bytes() != data:
            path.write_bytes(data)
        mapping[project] = (url, str(path))
    return mapping


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--from", dest="sources", action="append", default=[],
                    metavar="PROJECT=PATH", help="read this project's objects.inv from a file")
    ap.add_argument("projects", nargs="*", default=list(PROJECTS),
                    help="projects to refresh (default: all)")
    args = ap.parse_args(argv)
    files = dict(s.split("=", 1) for s in args.sources)
    for project in args.projects:
        url = PROJECTS[project][0] + "/objects.inv"
        if project in files:
            real = Path(files[project]).read_bytes()
        else:
            with urllib.request.urlopen(url, timeout=60) as r:
                real = r.read()
        text, missing = excerpt(project, real)
        (HERE / f"{project}.txt").write_text(text)
        print(f"{project}: {text.count(chr(10)) - 4} entries from "
              f"{files.get(project, url)}", file=sys.stderr)
        for name in missing:
            print(f"  {name}: not in the real inventory any more", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
