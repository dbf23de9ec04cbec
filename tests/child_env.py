"""The environment of a test's child Python (`subprocess.run([sys.executable, ...],
env=child_env())`): the child imports the same ptxdsl as the tests that start it.

Normally that is the checkout's: the checkout goes first on PYTHONPATH. In the wheel job
(.ci/wheel: `PTXDSL_TEST_INSTALLED=1`, the conftest checks that this run imports the installed
ptxdsl) it is the installed wheel's; PYTHONPATH always precedes site-packages, so the checkout
is not put there: tests/child_site's sitecustomize appends it after site-packages, where the
child still finds what only the checkout has (the `tests` package), and PYTHONSAFEPATH keeps
the child's working folder or script folder off sys.path. PTXDSL_TEST_INSTALLED=1 stays set,
so a child pytest is held to the wheel by the conftest too."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHILD_SITE = ROOT / "tests" / "child_site"
INSTALLED = "PTXDSL_TEST_INSTALLED"


def in_wheel_job() -> bool:
    """Whether this run tests the installed wheel (.ci/wheel), not the checkout."""
    return os.environ.get(INSTALLED) == "1"


def child_env(base: Mapping[str, str] | None = None, *, installed: bool | None = None,
              **extra: str) -> dict[str, str]:
    """`base` (this process's environment when not given) and `extra`, with PYTHONPATH set so
    the child imports this run's ptxdsl; `installed` defaults to `in_wheel_job()`."""
    env = {**(os.environ if base is None else base), **extra}
    if installed is None:
        installed = in_wheel_job()
    first = CHILD_SITE if installed else ROOT
    env["PYTHONPATH"] = os.pathsep.join([str(first), *filter(None, [env.get("PYTHONPATH")])])
    if installed:
        env.update({"PYTHONSAFEPATH": "1", INSTALLED: "1"})
    return env
