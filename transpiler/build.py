"""``python -m transpiler.build``: compile generated C++ into a library ``torch.ops.load_library`` loads.

Defaults come from the user's project (:mod:`transpiler.project`): the
sources are its ``out_cpp/``, the library is named ``<namespace>_ops`` after
the namespace in the sources' ``MANIFEST``, and it is built in the per-user
cache (``~/.cache/derivatives-transpiler/<name>/``; ``--build-dir``,
``$TRANSPILE_BUILD_DIR`` or ``build-dir`` in ``[tool.transpile]`` move it),
never in the installed package or the source tree.

Uses ``torch.utils.cpp_extension.load`` (ninja, one object per ``.cpp`` so
files compile in parallel and an unchanged file is not recompiled). A content
stamp of the sources, flags and torch version is kept next to the library: a
second run with nothing changed prints the path without importing torch at
all; so is the list of operators the library registers, which
:func:`load_library` checks before loading (torch aborts the whole process
when a library registers an operator that is registered already). The last
line printed is always the library's path; a compiler failure prints its
errors on stderr and exits 1; a build directory that cannot or must not be
written (:mod:`transpiler.output`) is one line and exit 2.
"""
from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

from transpiler.build_progress import Progress, ninja_progress
from transpiler.needs import TorchMissing, torch_missing
from transpiler.output import OutputError, check_directory, describe, locked
from transpiler.project import SHIPPED_NAMESPACE, ProjectError, find_project

MANIFEST = "MANIFEST"
MARKER = ".transpiler-build"    # marks a build directory as ours: only such a directory is written
# -O1: generated code is glue around libtorch calls, where the time is spent; -O2 optimised it no
# faster (benchmarks/torch_backend.py, compiled / builtin: sin, mul.Tensor, sum.dim_IntList 1.07,
# 1.04, 1.06x at -O2 and 1.06, 1.03, 1.08x at -O1) and cost a fifth more compile time.
CFLAGS = ("-O1", "-DNDEBUG")
PRECOMPILED_DIRECTORY = "precompiled"   # in the build directory: the shared precompiled headers

# The libtorch headers every generated file includes: parsing them is most of a file's compile
# time, so they are precompiled once (a GCC precompiled header; if it cannot be used, GCC
# silently parses the headers as usual).
PRECOMPILED = """\
#include <ATen/core/Tensor.h>
#include <ATen/TensorOperators.h>
#include <ATen/core/LegacyTypeDispatch.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/utils.h>
#include <torch/csrc/autograd/saved_variable.h>
#include <torch/library.h>
"""


def source_files(directory: Path) -> list[Path]:
    """The sources of a generated tree: every ``.cpp`` and ``.h``, sorted."""
    return sorted(p for p in directory.iterdir() if p.suffix in (".cpp", ".h"))


def stamp(directory: Path) -> str:
    """A hash of what the library depends on: source bytes, flags, torch version."""
    digest = hashlib.sha256()
    digest.update(metadata.version("torch").encode())
    digest.update(" ".join(CFLAGS).encode() + PRECOMPILED.encode())
    for path in source_files(directory):
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def library_path(build_dir: Path, name: str) -> Path:
    """Where the build of library ``name`` under ``build_dir`` leaves its shared object."""
    return build_dir / name / f"{name}.so"


def default_name(sources: Path) -> str:
    """``<namespace>_ops``, the namespace read from the sources' MANIFEST (``formulas``, the only
    namespace earlier versions wrote, when it records none)."""
    manifest = sources / MANIFEST
    lines = manifest.read_text(encoding="utf-8", errors="replace").splitlines() if manifest.is_file() else []
    namespaces = [line.split(" ", 1)[1] for line in lines if line.startswith("namespace ")]
    return f"{namespaces[0] if namespaces else SHIPPED_NAMESPACE}_ops"


def _ours(directory: Path) -> bool:
    return any((directory / name).exists() for name in (MARKER, "build.ninja")) or any(directory.glob("*.stamp"))


def build(sources: Path, build_dir: Path, name: str, verbose: bool = False, quiet: bool = False) -> Path:
    """Compile ``sources`` (cached in ``build_dir/name/``) and return the shared library's path,
    saying on stderr what it does (unless ``quiet``; ``verbose`` shows the compiler commands
    instead). Raises :class:`OutputError` when that directory must not or cannot be written."""
    sources, build_dir = sources.resolve(), build_dir.resolve()
    target = library_path(build_dir, name)
    stamp_file, ops_file = target.with_suffix(".stamp"), target.with_suffix(".ops")
    current = stamp(sources)

    def built() -> bool:
        return target.exists() and stamp_file.exists() and stamp_file.read_text() == current and ops_file.exists()

    if built():
        return target
    check_directory(target.parent, _ours, lambda d: {p.name for p in d.iterdir()}, "the build", [sources])
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        (target.parent / MARKER).touch()
    except OSError as error:
        raise describe(error, target.parent) from None
    progress = Progress(name, quiet=quiet or verbose)
    with locked(target.parent, target.parent):
        if built():         # by the run this one waited for
            return target
        import torch
        from torch.utils.cpp_extension import load

        header = precompile_headers(build_dir, progress)
        for own in ("precompiled.h", "precompiled.h.gch"):   # the per-library header of earlier versions
            (target.parent / own).unlink(missing_ok=True)
        before = set(torch._C._dispatch_get_all_op_names())

        def compile_and_load() -> None:   # is_python_module=False loads it too: the registered names follow
            load(name=name, sources=[str(p) for p in source_files(sources) if p.suffix == ".cpp"],
                 extra_cflags=[*CFLAGS, "-include", str(header)], extra_include_paths=[str(sources)],
                 build_directory=str(target.parent), is_python_module=False, verbose=True)

        if verbose:
            compile_and_load()
        else:
            with ninja_progress(progress) as compiler_output:
                try:
                    compile_and_load()
                except RuntimeError as error:     # its message lacks what ninja printed: add it
                    raise RuntimeError("\n".join([*compiler_output, str(error)])) from None
        progress.done()
        registered = sorted(set(torch._C._dispatch_get_all_op_names()) - before)
        ops_file.write_text("".join(f"{op}\n" for op in registered))
        stamp_file.write_text(current)
    return target


def load_library(path: str | os.PathLike) -> None:
    """``torch.ops.load_library(path)`` for a library this module built, refused with a clear
    ``RuntimeError`` (instead of torch aborting the process) when an operator it registers is
    registered already, by another package in the same namespace or another copy of it."""
    import torch

    path = Path(path).resolve()
    if str(path) in torch.ops.loaded_libraries:
        return
    ops_file = path.with_suffix(".ops")
    if ops_file.is_file():
        present = set(torch._C._dispatch_get_all_op_names())
        taken = [op for op in ops_file.read_text().split() if op in present]
        if taken:
            shown = ", ".join(taken[:3]) + (f" and {len(taken) - 3} more" if len(taken) > 3 else "")
            raise RuntimeError(f"{path}: not loaded: {shown} already registered by a library loaded before; "
                               "give one of the packages another namespace (transpile --namespace NAME) "
                               "and rebuild it")
    torch.ops.load_library(str(path))


def precompile_headers(build_dir: Path, progress: Progress) -> Path:
    """The common libtorch headers precompiled with the flags cpp_extension will use, shared by
    every library of ``build_dir`` built with the same torch, compiler and flags (keyed on them
    in ``build_dir/precompiled/``); built once, under a lock, atomically."""
    import sysconfig

    from torch.utils.cpp_extension import include_paths

    # A library's own flags (-DTORCH_EXTENSION_NAME, -I of its sources) are left out: GCC accepts a
    # precompiled header under other definitions of macros the header does not use, and other -I.
    flags = ["-DTORCH_API_INCLUDE_EXTENSION_H"]
    flags += [f"-isystem{path}" for path in [*include_paths(), sysconfig.get_paths()["include"]]]
    flags += ["-fPIC", "-std=c++20", *CFLAGS]
    compiler = subprocess.run(["c++", "--version"], capture_output=True, text=True, check=True).stdout
    recipe = PRECOMPILED + "// " + " ".join(flags) + "\n"
    key = hashlib.sha256("\0".join([metadata.version("torch"), compiler, recipe]).encode()).hexdigest()[:16]
    directory = build_dir / PRECOMPILED_DIRECTORY / key
    header, compiled = directory / "precompiled.h", directory / "precompiled.h.gch"
    if compiled.exists():
        return header
    check_directory(directory, _ours, lambda d: {p.name for p in d.iterdir()}, "the build", [])
    try:
        directory.mkdir(parents=True, exist_ok=True)
        (directory / MARKER).touch()
    except OSError as error:
        raise describe(error, directory) from None
    with locked(directory, directory):
        if not compiled.exists():     # another build may have made it while this one waited
            progress.say(f"precompiling the libtorch headers (once for this torch and these flags: {directory})")
            header.write_text(recipe)
            partial = directory / "precompiled.h.gch.partial"
            subprocess.run(["c++", *flags, "-x", "c++-header", str(header), "-o", str(partial)],
                           check=True, capture_output=True, text=True)
            os.replace(partial, compiled)
    return header


def main(argv: list[str] | None = None) -> int:
    """``python -m transpiler.build``: compile the generated C++ into a library (cached), report where it is."""
    parser = argparse.ArgumentParser(prog="python -m transpiler.build", description=__doc__.splitlines()[0])
    parser.add_argument("--sources", type=Path, help="generated C++ (default: the project's out_cpp/)")
    parser.add_argument("--build-dir", type=Path,
                        help="cache directory (default: $TRANSPILE_BUILD_DIR, the project's build-dir, "
                             "or ~/.cache/derivatives-transpiler)")
    parser.add_argument("--name", help="library name (default: <namespace>_ops, from the sources' MANIFEST)")
    parser.add_argument("--verbose", action="store_true", help="show the compiler commands")
    parser.add_argument("-q", "--quiet", action="store_true", help="print only the library's path")
    args = parser.parse_args(argv)
    try:
        project = find_project()
        sources = args.sources or project.out
        if not sources.is_dir() or not any(p.suffix == ".cpp" for p in sources.iterdir()):
            print(f"{sources}: no generated C++ here; run `transpile` first", file=sys.stderr)
            return 2
        missing = torch_missing("python -m transpiler.build")
        if missing:
            print(missing, file=sys.stderr)
            return 2
        path = build(sources, args.build_dir or project.build_dir, args.name or default_name(sources),
                     args.verbose, args.quiet)
    except (OutputError, ProjectError) as error:
        print(f"python -m transpiler.build: {error}", file=sys.stderr)
        return 2
    except (ImportError, metadata.PackageNotFoundError):
        print(f"{TorchMissing('python -m transpiler.build')}", file=sys.stderr)
        return 2
    except subprocess.CalledProcessError as error:
        print(f"precompiling the libtorch headers failed:\n{error.stderr}", file=sys.stderr)
        return 1
    except OSError as error:
        print(f"python -m transpiler.build: {describe(error, sources)}", file=sys.stderr)
        return 2
    except RuntimeError as error:   # cpp_extension reports compiler failures as RuntimeError
        print(f"build of {sources} failed:\n{error}", file=sys.stderr)
        return 1
    print(os.fspath(path))
    return 0


if __name__ == "__main__":
    sys.exit(main())
