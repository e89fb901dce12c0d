"""``transpile lint [options] [PATH ...]`` (``-`` reads stdin).

Prints one finding per line (``path:line:col: CODE message``), or JSON, SARIF
2.1.0, or GitHub Actions annotations. Settings come from ``[tool.transpile.lint]``
(:mod:`transpiler.lint.settings`); ``--select``/``--ignore``/``--exclude`` and
friends override them. Results are cached (:mod:`transpiler.lint.cache`) in
the project's cache directory unless ``--no-cache``. ``--fix`` on stdin (``-``) writes the fixed source to
stdout (the input unchanged when there is nothing to fix) and the findings left
to stderr; a ``--fix`` that changes nothing says so in one line on stderr.
Unsafe fixes (``@once_differentiable`` on a Function's backward) are applied or
shown only with ``--unsafe-fixes``. Exit status: 0 no findings (always with ``--exit-zero``), 1 findings
(after ``--fix``: findings left; with ``--diff``: fixes to apply), 2 usage
error, configuration error, unreadable input or a dead worker process.
"""
from __future__ import annotations

import argparse
import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path

from transpiler.diagnostics import Diagnostic, printable
from transpiler.lint import output
from transpiler.lint.runner import LintResult, WorkerDied, lint
from transpiler.lint.settings import ConfigError, Settings, codes, load_settings
from transpiler.project import ProjectError, build_cache, find_project

DEFAULT_PATHS = ["."]             # as ruff and flake8: the working directory, less the excludes
STDIN = "-"
CACHE_DIRECTORY = "lint-cache"       # in the build cache; a hyphen: no library (an identifier) is named so


def _code_list(text: str) -> list[str]:
    return [code for code in text.replace(" ", ",").split(",") if code]


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``transpile lint``."""
    parser = argparse.ArgumentParser(prog="transpile lint", description=(
        "Check backward formulas (closure rules) and torch.autograd.Function subclasses "
        "(ctx rules) statically: the files read are never imported or executed."))
    parser.add_argument("paths", nargs="*", metavar="PATH",
                        help="files or directories (searched for *.py), or - for stdin; default: . (less the excludes)")
    parser.add_argument("--format", choices=output.FORMATS, default="text", help="output format")
    parser.add_argument("--fix", action="store_true",
                        help="rewrite files in place where a (safe) fix exists, then report what is left "
                             "(on stdin: print the fixed source, report to stderr)")
    parser.add_argument("--diff", action="store_true",
                        help="print the fixes --fix would make as a unified diff, write nothing "
                             "(exit 1 when there are some)")
    parser.add_argument("--unsafe-fixes", action="store_true",
                        help="with --fix or --diff, include the unsafe fixes too (they change behaviour: "
                             "@once_differentiable on a Function's backward makes double backward raise)")
    parser.add_argument("--select", type=_code_list, metavar="CODES",
                        help="codes or prefixes to report, comma-separated (default: all, or the configuration's)")
    parser.add_argument("--ignore", type=_code_list, metavar="CODES", help="codes or prefixes not to report")
    parser.add_argument("--extend-ignore", type=_code_list, default=[], metavar="CODES",
                        help="codes or prefixes not to report, in addition to the configuration's")
    parser.add_argument("--exclude", type=_code_list, metavar="PATTERNS",
                        help="file or directory patterns to skip (replaces the default excludes)")
    parser.add_argument("--extend-exclude", type=_code_list, default=[], metavar="PATTERNS",
                        help="patterns to skip in addition to the default (or configured) excludes")
    parser.add_argument("--force-exclude", action="store_true",
                        help="apply the excludes to files named on the command line too (for pre-commit)")
    parser.add_argument("--no-respect-gitignore", dest="respect_gitignore", action="store_false", default=None,
                        help="walk into paths that .gitignore files ignore")
    parser.add_argument("--config", type=Path, metavar="PYPROJECT",
                        help="the pyproject.toml to read (default: the nearest one with [tool.transpile.lint])")
    parser.add_argument("--isolated", action="store_true", help="ignore every configuration file")
    parser.add_argument("--stdin-filename", metavar="PATH",
                        help="the name of the file read from stdin (for messages, per-file-ignores)")
    parser.add_argument("--exit-zero", action="store_true", help="exit 0 even when there are findings")
    parser.add_argument("--statistics", action="store_true",
                        help="print counts (files, Function subclasses analysed, findings per code) to stderr")
    parser.add_argument("--no-cache", action="store_true",
                        help="check every file again: neither read nor write the result cache")
    parser.add_argument("--cache-dir", type=Path, metavar="DIR",
                        help="where results are cached (default: lint-cache/ in the project's build cache, "
                             "$TRANSPILE_BUILD_DIR or ~/.cache/derivatives-transpiler)")
    parser.add_argument("--no-bytecode-cache", dest="trust_bytecode", action="store_false",
                        help="syntax-check every file, even those whose up-to-date bytecode is cached")
    parser.add_argument("--jobs", type=int, default=None, metavar="N",
                        help="worker processes for large runs (default: the available cores)")
    parser.add_argument("--version", action=_Version, nargs=0, help="print the version and exit")
    return parser


class _Version(argparse.Action):
    """``--version``: the installed version, looked up only when asked (importlib.metadata is slow
    to import, and every run builds the parser)."""

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"transpile lint {version()}")
        parser.exit()


def version() -> str:
    """The installed distribution's version."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as distribution_version

    try:
        return distribution_version("derivatives-transpiler")
    except PackageNotFoundError:
        return "unknown (not installed)"


def settings_from(args: argparse.Namespace) -> Settings:
    """The configuration file's settings with the command line's overrides; raises ConfigError."""
    settings = Settings() if args.isolated else load_settings(args.config)
    changes: dict[str, object] = {"force_exclude": args.force_exclude}
    if args.select is not None:
        changes["select"] = codes("--select", args.select, "--select")
    ignore = settings.ignore if args.ignore is None else codes("--ignore", args.ignore, "--ignore")
    changes["ignore"] = (*ignore, *codes("--extend-ignore", args.extend_ignore, "--extend-ignore"))
    exclude = settings.exclude if args.exclude is None else tuple(args.exclude)
    changes["exclude"] = (*exclude, *args.extend_exclude)
    if args.respect_gitignore is not None:
        changes["respect_gitignore"] = args.respect_gitignore
    return replace(settings, **changes)


def cache_directory(args: argparse.Namespace) -> Path | None:
    """The result cache's directory (None: ``--no-cache``)."""
    if args.no_cache:
        return None
    if args.cache_dir is not None:
        return args.cache_dir
    try:
        return find_project().build_dir / CACHE_DIRECTORY
    except ProjectError:                     # [tool.transpile] is not lint's to judge: the per-user cache
        return build_cache() / CACHE_DIRECTORY


def _write(text: str) -> None:
    """Line by line: a reader that goes away (``| head``) is noticed at once (BrokenPipeError,
    which ``transpile`` turns into a quiet exit), not lost inside one large write."""
    for line in text.splitlines(keepends=True):
        sys.stdout.write(line)


def _usage_error(message: str) -> int:
    print(f"transpile lint: error: {message}", file=sys.stderr)
    return 2


def main(argv: list[str]) -> int:
    """``transpile lint``: lint the paths (or stdin), report, fix when asked; the exit status."""
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exit_request:       # usage error (2), --help or --version (0), already printed
        return int(exit_request.code or 0)
    stdin = None
    if STDIN in args.paths:
        if args.paths != [STDIN]:
            return _usage_error("- (stdin) cannot be combined with other paths")
        stdin = (args.stdin_filename or "<stdin>", sys.stdin.buffer.read())
    elif args.stdin_filename is not None:
        return _usage_error("--stdin-filename needs - (stdin) as the path")
    try:
        settings = settings_from(args)
        result = lint(args.paths or DEFAULT_PATHS, fix=args.fix, jobs=args.jobs,
                      trust_bytecode=args.trust_bytecode, settings=settings, diff=args.diff, stdin=stdin,
                      cache_dir=cache_directory(args), unsafe_fixes=args.unsafe_fixes, edits=args.format == "sarif")
    except (ConfigError, WorkerDied) as error:
        return _usage_error(str(error))
    if result.cache_warning is not None:
        print(f"transpile lint: warning: {result.cache_warning}", file=sys.stderr)
    for note in result.skipped:
        print(f"transpile lint: note: {note}", file=sys.stderr)
    for diagnostic in result.unreadable:
        print(f"transpile lint: error: {printable(diagnostic.path)}: {diagnostic.message}", file=sys.stderr)
    if args.diff:
        _write("".join(result.diffs))
        if result.unsafe_hidden:
            print(f"transpile lint: not shown: {_hidden(result.unsafe_hidden)} (add --unsafe-fixes)", file=sys.stderr)
        return 2 if result.unreadable else 1 if result.diffs and not args.exit_zero else 0
    findings = result.findings
    if result.fixed_stdin is not None:       # like ruff: the fixed source to stdout, what is left to stderr
        sys.stdout.buffer.write(result.fixed_stdin)
        sys.stdout.flush()
        sys.stderr.write(output.render(args.format, findings, version))
        if findings and result.fixed_stdin == stdin[1]:
            print(nothing_fixed(findings, result.unsafe_hidden), file=sys.stderr)
        return 1 if findings and not args.exit_zero else 0
    _write(output.render(args.format, findings, version))
    for path in result.fixed:
        print(f"transpile lint: fixed {path}", file=sys.stderr)
    if args.fix and findings and not result.fixed:
        print(nothing_fixed(findings, result.unsafe_hidden), file=sys.stderr)
    if args.statistics:
        print(statistics(result), file=sys.stderr)
    if result.unreadable:
        return 2
    return 1 if findings and not args.exit_zero else 0


def nothing_fixed(findings: tuple[Diagnostic, ...], unsafe_hidden: int) -> str:
    """One line for a ``--fix`` that changed nothing: how many findings, and why none was fixed."""
    found = f"{len(findings)} finding{'s' if len(findings) != 1 else ''}"
    if unsafe_hidden:
        return (f"transpile lint: --fix fixed nothing: {found}, of which {unsafe_hidden} "
                f"{'has' if unsafe_hidden == 1 else 'have'} an unsafe fix (add --unsafe-fixes to apply it)")
    return f"transpile lint: --fix fixed nothing: {found}, none fixable (each message names its remedy)"


def _hidden(count: int) -> str:
    return "1 finding's unsafe fix" if count == 1 else f"{count} findings' unsafe fixes"


def statistics(result: LintResult) -> str:
    """A few lines: what was checked and how many findings of each code."""
    lines = [
        f"files checked: {result.files}",
        f"torch.autograd.Function subclasses analysed: {result.functions}",
        f"formula files: {result.formula_files}",
    ]
    counts = Counter(d.code for d in result.findings)
    lines.extend(f"{code}: {count}" for code, count in sorted(counts.items()))
    return "\n".join(lines)

