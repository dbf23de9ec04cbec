"""The README's two commands stay in step with CI and the CLI."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    return re.findall(r"```bash\n(.*?)\n```", text, re.S)


def test_ci_runs_the_readme_test_command():
    test_cmd = next(c for c in _commands() if "pytest" in c)
    ci = (ROOT / ".ci" / "run").read_text()
    assert test_cmd in ci.splitlines(), "'.ci/run' must run the README's test command verbatim"


def test_readme_main_command_is_the_demo():
    main_cmd = next(c for c in _commands() if "demo" in c)
    assert "pip install -e ." in main_cmd and main_cmd.endswith("python -m ptxdsl demo")


def test_ci_type_checks_before_the_tests():
    """mypy runs once, in the README's test command (configured by pyproject's [tool.mypy]),
    after ruff and before the tests."""
    test_cmd = next(c for c in _commands() if "pytest" in c)
    steps = [s.strip() for s in test_cmd.split("&&")]
    assert "mypy" in steps
    assert steps.index("ruff check .") < steps.index("mypy") < steps.index("python -m pytest -q")


def test_ci_builds_the_docs_with_warnings_as_errors():
    test_cmd = next(c for c in _commands() if "pytest" in c)
    assert "'.[test,docs]'" in test_cmd
    assert "sphinx-build -W" in test_cmd and test_cmd.endswith("docs docs/_build")
