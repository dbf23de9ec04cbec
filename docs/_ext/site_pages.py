"""The documentation pages written from the code at build time (docs/_generated, not in git):
the environment variables from `ptxdsl.settings`, the command-line reference from the
argparse parsers of `python -m ptxdsl`, and one page per sample. Generated, so they cannot
drift from what the code does; a page is rewritten only when its text changes, so an
incremental build does not redo every page.

A Sphinx extension (conf.py lists it); `tests/test_docs_site.py` calls the page functions.
"""

from __future__ import annotations

import argparse
import ast
import os
from pathlib import Path

DOCS = Path(__file__).resolve().parent.parent
OUT = DOCS / "_generated"
HELP_WIDTH = 96     # argparse wraps to the terminal's width: fixed, for the same page anywhere


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists() or path.read_text() != text:
        path.write_text(text)


# -- environment variables --------------------------------------------------------------------

def settings_page() -> str:
    from ptxdsl import settings
    out = ["# Environment variables", "",
           "Generated from `ptxdsl.settings`, where every variable ptxdsl reads is declared once "
           "(no other module reads them). Each is read when it is used, not at import, so "
           "setting it in the process (`os.environ[...] = ...`) before the call works. An "
           "empty value counts as unset; a value that cannot be read gives the default and "
           "one warning naming the variable and what it takes (`PtxdslSettingWarning`, or "
           "`PtxdslCacheWarning` for the cache's size).", ""]
    groups = [("users", "Everyday use"), ("developers", "Debugging and the test suite")]
    for audience, title in groups:
        out += [f"## {title}", ""]
        for knob in settings.KNOBS:
            if knob.audience != audience:
                continue
            out += [f"### `{knob.name}`", "", knob.doc, "",
                    f"- Values: {knob.expected}", f"- Default: {knob.shown_default}",
                    f"- Read by: `{knob.read_by}`", ""]
    return "\n".join(out)


# -- command line -----------------------------------------------------------------------------

def _fixed_width(parser: argparse.ArgumentParser) -> None:
    base = parser.formatter_class

    def formatter(prog: str) -> argparse.HelpFormatter:
        return base(prog, width=HELP_WIDTH)
    parser.formatter_class = formatter


def _help(parser: argparse.ArgumentParser) -> str:
    _fixed_width(parser)
    return parser.format_help().rstrip()


def subcommands(parser: argparse.ArgumentParser) -> dict[str, tuple[str, argparse.ArgumentParser]]:
    """name -> (one-line help, parser) of each subcommand, in the parser's order."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            return {name: (helps.get(name, ""), sub) for name, sub in action.choices.items()}
    return {}


def _fuzz_parser() -> argparse.ArgumentParser | None:
    try:
        from ptxdsl.fuzz.__main__ import parser
    except ModuleNotFoundError as e:   # the fuzz extra (hypothesis) is not installed here
        if e.name != "hypothesis":
            raise
        return None
    return parser("python -m ptxdsl fuzz")


def cli_page() -> str:
    from ptxdsl.__main__ import parser
    top = parser()
    out = ["# Command line: `python -m ptxdsl`", "",
           "Generated from the command's argparse parsers (`python -m ptxdsl COMMAND --help` "
           "prints the same). The package also installs the command as `ptxdsl`.", "",
           "```text", _help(top), "```", ""]
    for name, (summary, sub) in subcommands(top).items():
        out += [f"## `{name}`", "", summary[:1].upper() + summary[1:] + ".", ""]
        if name == "fuzz":
            # The top-level parser only lists fuzz; its options are ptxdsl.fuzz's own parser.
            fuzz = _fuzz_parser()
            if fuzz is None:
                out += ["(The options of `python -m ptxdsl.fuzz`; hypothesis, the `fuzz` extra, "
                        "was not installed where this page was built.)", ""]
                continue
            sub = fuzz
        out += ["```text", _help(sub), "```", ""]
    return "\n".join(out)


# -- examples ---------------------------------------------------------------------------------

def sample_files() -> list[Path]:
    from ptxdsl.__main__ import sample_files as samples
    return samples()


def example_page(sample: Path, page_dir: Path) -> str:
    doc = ast.get_docstring(ast.parse(sample.read_text())) or ""
    source = Path(os.path.relpath(sample, page_dir)).as_posix()
    return "\n".join([
        f"# {sample.stem}", "",
        f"`samples/{sample.name}`: run it with `python -m ptxdsl demo {sample.stem}` (builds, "
        f"writes the PTX under `out/`, assembles it, and on the GPU it is built for (Hopper; "
        f"Blackwell for gemm_blackwell) runs it and checks the results), or "
        f"`python samples/{sample.name}` from a checkout.", "",
        doc, "",
        "## Source", "",
        f"```{{literalinclude}} {source}",
        ":language: python", ":linenos:", "```", ""])


def examples_pages() -> dict[Path, str]:
    where = OUT / "examples"
    return {where / f"{s.stem}.md": example_page(s, where) for s in sample_files()}


def write_pages(app=None) -> None:
    _write(OUT / "environment.md", settings_page())
    _write(OUT / "cli.md", cli_page())
    pages = examples_pages()
    for path, text in pages.items():
        _write(path, text)
    # A sample removed since the last build: its page goes too (the toctree globs the folder).
    for old in (OUT / "examples").glob("*.md"):
        if old not in pages:
            old.unlink()


def setup(app):
    app.connect("builder-inited", write_pages)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
