"""Started by Python at startup in a child of the wheel job's tests (tests/child_env.py puts
this folder on the child's PYTHONPATH): the checkout goes after site-packages, so the child
imports the installed ptxdsl and still finds what only the checkout has (the `tests`
package). Only sitecustomize runs after site-packages are on sys.path and is found through
PYTHONPATH (a .pth file is read in site folders only)."""

import sys
from importlib.machinery import PathFinder
from pathlib import Path

_here = Path(__file__).resolve().parent
# This folder leaves sys.path again: the child's path is the interpreter's own plus the
# checkout at the end, as pytest's --import-mode=append makes it for the wheel job itself.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _here]
sys.path.append(str(_here.parents[1]))

# A sitecustomize of the interpreter's own (some distributions ship one) is hidden by this
# one; it runs here instead, so the child starts as the user's Python would.
_theirs = PathFinder.find_spec(__name__, sys.path)
if _theirs is not None and _theirs.loader is not None:
    _theirs.loader.exec_module(sys.modules[__name__])
