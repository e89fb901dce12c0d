"""Where the commands read and write by default: the user's project, never the installed package.

The project is the nearest directory, from the working directory upwards, whose
``pyproject.toml`` has a ``[tool.transpile]`` table; without one, the working
directory itself. Keys (paths relative to that ``pyproject.toml``)::

    [tool.transpile]
    formulas = "formulas"      # the formula package (default: formulas/)
    out = "out_cpp"            # the generated C++ (default: out_cpp/)
    namespace = "myops"        # torch.ops.<namespace> (default: the formula directory's name,
                               # or the project's for a directory called formulas/)
    build-dir = "build"        # compiled libraries (default: the per-user cache below)

The build cache is, first found: ``--build-dir``, ``$TRANSPILE_BUILD_DIR``,
``build-dir`` above, ``$XDG_CACHE_HOME/derivatives-transpiler``,
``~/.cache/derivatives-transpiler``; ``transpile lint`` keeps its results in
``lint-cache/`` there (:mod:`transpiler.lint.cache`).
"""
from __future__ import annotations

import keyword
import os
import re
from dataclasses import dataclass
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:   # Python 3.10
    import tomli as tomllib

CACHE_ENV = "TRANSPILE_BUILD_DIR"
SHIPPED_NAMESPACE = "formulas"
# Namespaces torch or C++ already use: a package registered there would clash with them.
RESERVED_NAMESPACES = frozenset({"aten", "prim", "prims", "torch", "at", "c10", "c10d", "std", "caffe2",
                                 "_caffe2", "quantized", "_quantized", "profiler", "cuda", "mkldnn", "ops"})
_NAMESPACE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class ProjectError(Exception):
    """A configuration that cannot be used; ``str()`` is the one-line diagnostic."""


@dataclass(frozen=True)
class Project:
    """The resolved defaults of one project."""

    root: Path                 # the directory of the pyproject.toml with [tool.transpile], or the working directory
    formulas: Path
    out: Path
    namespace: str | None      # None: derived from the formula directory's name
    build_dir: Path


def find_project(start: Path | None = None) -> Project:
    """The project around ``start`` (default: the working directory)."""
    start = (start or Path.cwd()).resolve()
    for directory in (start, *start.parents):
        table = _transpile_table(directory / "pyproject.toml")
        if table is not None:
            return _project(directory, table)
    return _project(start, {})


def _transpile_table(pyproject: Path) -> dict | None:
    if not pyproject.is_file():
        return None
    try:
        text = pyproject.read_text(encoding="utf-8")
        document = tomllib.loads(text)
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        if isinstance(error, tomllib.TOMLDecodeError) and "transpile" not in text:
            return None        # someone else's broken pyproject.toml: not ours to judge
        raise ProjectError(f"{pyproject}: cannot read it: {error}") from None
    table = document.get("tool", {}).get("transpile")
    if table is not None and not isinstance(table, dict):
        raise ProjectError(f"{pyproject}: [tool.transpile] must be a table")
    return table


def _project(root: Path, table: dict) -> Project:
    unknown = set(table) - {"formulas", "out", "namespace", "build-dir", "lint"}   # [tool.transpile.lint]: lint's
    if unknown:
        raise ProjectError(f"{root / 'pyproject.toml'}: unknown [tool.transpile] key(s) {', '.join(sorted(unknown))}")
    namespace = table.get("namespace")
    if namespace is not None:
        check_namespace(namespace)
    configured_build = table.get("build-dir")
    return Project(root, root / table.get("formulas", "formulas"), root / table.get("out", "out_cpp"),
                   namespace, build_cache(root / configured_build if configured_build else None))


def build_cache(configured: Path | None = None) -> Path:
    """Where compiled libraries go when ``--build-dir`` is not given."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    if configured is not None:
        return configured
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "derivatives-transpiler"


def check_namespace(name: str) -> str:
    """``name`` if it can be a ``torch.ops`` namespace and a C++ identifier."""
    if not isinstance(name, str) or not _NAMESPACE.fullmatch(name) or keyword.iskeyword(name):
        raise ProjectError(f"namespace {name!r}: must be an identifier (letters, digits, underscores)")
    if name in RESERVED_NAMESPACES:
        raise ProjectError(f"namespace {name!r}: torch uses it already; choose another")
    return name


def default_namespace(formulas: Path, shipped: Path) -> str:
    """A package's namespace: its directory's name as an identifier (``my-ops`` -> ``my_ops``); a
    user's directory called ``formulas`` (the default) is named after its parent, the project, so
    that only the ``shipped`` library registers as ``torch.ops.formulas``."""
    directory = formulas.resolve()
    if directory.name == SHIPPED_NAMESPACE and directory != shipped.resolve():
        directory = directory.parent
    name = re.sub(r"\W", "_", directory.name) or "formulas_ops"
    name = f"_{name}" if name[0].isdigit() else name
    return name if name not in RESERVED_NAMESPACES and not keyword.iskeyword(name) else f"{name}_ops"
