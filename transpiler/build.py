"""``python -m transpiler.build``: compile ``out_cpp/`` into a library ``torch.ops.load_library`` loads.

Uses ``torch.utils.cpp_extension.load`` (ninja, one object per ``.cpp`` so
files compile in parallel and an unchanged file is not recompiled), cached in
``build/<name>/``. A content stamp of the sources, flags and torch version is
kept next to the library: a second run with nothing changed prints the path
without importing torch at all. The last line printed is always the library's
path (or, on failure, the compiler's errors on stderr and exit status 1).
"""
from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_SOURCES = REPO / "out_cpp"
DEFAULT_BUILD = REPO / "build"
DEFAULT_NAME = "formulas_ops"
CFLAGS = ("-O2", "-DNDEBUG")

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
    return build_dir / name / f"{name}.so"


def build(sources: Path = DEFAULT_SOURCES, build_dir: Path = DEFAULT_BUILD, name: str = DEFAULT_NAME,
          verbose: bool = False) -> Path:
    """Compile ``sources`` (cached) and return the shared library's path."""
    sources, build_dir = sources.resolve(), build_dir.resolve()
    target = library_path(build_dir, name)
    stamp_file = target.with_suffix(".stamp")
    current = stamp(sources)
    if target.exists() and stamp_file.exists() and stamp_file.read_text() == current:
        return target
    from torch.utils.cpp_extension import load

    target.parent.mkdir(parents=True, exist_ok=True)
    header = precompile_headers(sources, target.parent, name)
    load(
        name=name,
        sources=[str(p) for p in source_files(sources) if p.suffix == ".cpp"],
        extra_cflags=[*CFLAGS, "-include", str(header)],
        extra_include_paths=[str(sources)],
        build_directory=str(target.parent),
        is_python_module=False,
        verbose=verbose,
    )
    stamp_file.write_text(current)
    return target


def precompile_headers(sources: Path, directory: Path, name: str) -> Path:
    """Write and precompile the common libtorch headers with the flags cpp_extension will use."""
    import sysconfig

    from torch.utils.cpp_extension import include_paths

    header = directory / "precompiled.h"
    flags = [f"-DTORCH_EXTENSION_NAME={name}", "-DTORCH_API_INCLUDE_EXTENSION_H", f"-I{sources}"]
    flags += [f"-isystem{path}" for path in [*include_paths(), sysconfig.get_paths()["include"]]]
    flags += ["-fPIC", "-std=c++20", *CFLAGS]
    recipe = PRECOMPILED + "// " + " ".join(flags) + "\n"
    compiled = directory / "precompiled.h.gch"
    if not (header.exists() and header.read_text() == recipe and compiled.exists()):
        header.write_text(recipe)
        subprocess.run(["c++", *flags, "-x", "c++-header", str(header), "-o", str(compiled)],
                       check=True, capture_output=True, text=True)
    return header


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m transpiler.build", description=__doc__.splitlines()[0])
    parser.add_argument("--sources", type=Path, default=DEFAULT_SOURCES, help="generated C++ (default: out_cpp/)")
    parser.add_argument("--build-dir", type=Path, default=DEFAULT_BUILD, help="cache directory (default: build/)")
    parser.add_argument("--name", default=DEFAULT_NAME, help="library name (default: formulas_ops)")
    parser.add_argument("--verbose", action="store_true", help="show the compiler commands")
    args = parser.parse_args(argv)
    if not args.sources.is_dir() or not any(p.suffix == ".cpp" for p in args.sources.iterdir()):
        print(f"{args.sources}: no generated C++ here; run `transpile` first", file=sys.stderr)
        return 1
    try:
        path = build(args.sources, args.build_dir, args.name, args.verbose)
    except subprocess.CalledProcessError as error:
        print(f"precompiling the libtorch headers failed:\n{error.stderr}", file=sys.stderr)
        return 1
    except (RuntimeError, OSError) as error:   # cpp_extension reports compiler failures as RuntimeError
        print(f"build of {args.sources} failed:\n{error}", file=sys.stderr)
        return 1
    print(os.fspath(path))
    return 0


if __name__ == "__main__":
    sys.exit(main())
