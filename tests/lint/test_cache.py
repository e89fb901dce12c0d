"""The result cache: a warm run reports exactly what a fresh one does, and a change to anything a
result depends on (the file, a base class or helper in another file, a module that appears,
the formula library, the configuration, the linter) is seen; a broken or unwritable cache
only costs speed."""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from lint.test_driver import FORMULA, child_env, function_file, run_cli, write

from transpiler import library_discovery
from transpiler.lint import cache as result_cache
from transpiler.lint import runner, workers
from transpiler.lint.cache import FileStamp
from transpiler.lint.runner import lint

REPO = Path(__file__).resolve().parents[2]

BASE = '''\
import torch


class Base({base}):
    @staticmethod
    def backward(ctx, grad):
        (kept,) = ctx.saved_tensors
        return grad * kept
'''
IMPL = '''\
from pkg.base import Base
from pkg.helpers import normalize


class Impl(Base):
    @staticmethod
    def forward(ctx, x):
        y, rstd = normalize(x)
        ctx.save_for_backward(rstd)
        return y
'''
HELPER_COMPUTES = "def normalize(x):\n    rstd = x.pow(2).mean(-1, keepdim=True).rsqrt()\n    return x * rstd, rstd\n"
HELPER_PASSES_INPUT = "def normalize(x):\n    return x, x\n"


@pytest.fixture
def checked(monkeypatch) -> list[str]:
    """The paths the per-file pass really checks (not taken from the cache)."""
    seen: list[str] = []
    check_file = workers.check_file

    def spy(path, *args, **kwargs):
        seen.append(Path(path).name)
        return check_file(path, *args, **kwargs)

    monkeypatch.setattr(workers, "check_file", spy)
    return seen


def cached(paths: list[Path], cache_dir: Path) -> list[tuple[str, int, str]]:
    """The findings of a cached run, which must be those of a fresh one."""
    found = lint([str(p) for p in paths], cache_dir=cache_dir)
    fresh = lint([str(p) for p in paths])
    assert found == fresh
    return [(Path(d.path).name, d.line, d.code) for d in found.diagnostics]


def package(root: Path, base: str = "torch.autograd.Function", helper: str = HELPER_COMPUTES) -> Path:
    write(root / "pkg" / "__init__.py", "")
    write(root / "pkg" / "base.py", BASE.format(base=base))
    write(root / "pkg" / "helpers.py", helper)
    write(root / "pkg" / "impl.py", IMPL)
    return root / "pkg"


def test_a_warm_run_checks_nothing_again_and_reports_the_same(tmp_path, checked):
    function_file(tmp_path / "src" / "f.py")
    write(tmp_path / "src" / "plain.py", "x = 1\n")
    write(tmp_path / "src" / "broken.py", "def (\n")
    first = cached([tmp_path / "src"], tmp_path / "cache")
    assert first == [("broken.py", 1, "DB000"), ("f.py", 8, "DB100"), ("f.py", 14, "DB104")]
    checked.clear()
    warm = lint([str(tmp_path / "src")], cache_dir=tmp_path / "cache")
    assert checked == []
    assert warm == lint([str(tmp_path / "src")])


def test_an_edited_file_is_checked_again_and_only_it(tmp_path, checked):
    function_file(tmp_path / "f.py")
    write(tmp_path / "g.py", "x = 1\n")
    assert cached([tmp_path], tmp_path / "cache") == [("f.py", 8, "DB100"), ("f.py", 14, "DB104")]
    function_file(tmp_path / "f.py", noqa="  # noqa: DB100")
    checked.clear()
    warm = lint([str(tmp_path)], cache_dir=tmp_path / "cache")
    assert checked == ["f.py"]
    assert warm == lint([str(tmp_path)])
    assert [(d.line, d.code) for d in warm.diagnostics] == [(14, "DB104")]


def test_a_followed_helper_in_another_file_is_a_dependency(tmp_path):
    pkg = package(tmp_path)
    assert cached([pkg], tmp_path / "cache") == [("impl.py", 9, "DB100")]
    write(pkg / "helpers.py", HELPER_PASSES_INPUT)               # rstd is now the input itself
    assert cached([pkg], tmp_path / "cache") == []
    write(pkg / "helpers.py", HELPER_COMPUTES)
    assert cached([pkg], tmp_path / "cache") == [("impl.py", 9, "DB100")]


def test_a_base_class_in_another_file_is_a_dependency(tmp_path):
    pkg = package(tmp_path, base="object")                       # Impl is no Function: nothing to check
    write(pkg / "other.py", BASE.format(base="torch.autograd.Function"))   # a Function named Base elsewhere
    assert cached([pkg], tmp_path / "cache") == []
    write(pkg / "base.py", BASE.format(base="torch.autograd.Function"))
    assert cached([pkg], tmp_path / "cache") == [("impl.py", 9, "DB100")]
    write(pkg / "base.py", BASE.format(base="object"))
    assert cached([pkg], tmp_path / "cache") == []


def test_a_module_that_appears_in_the_tree_is_followed(tmp_path):
    pkg = package(tmp_path)
    (pkg / "helpers.py").unlink()                                 # normalize cannot be followed
    assert cached([pkg], tmp_path / "cache") == []
    write(pkg / "helpers.py", HELPER_COMPUTES)
    assert cached([pkg], tmp_path / "cache") == [("impl.py", 9, "DB100")]


def test_the_files_a_run_excludes_are_no_longer_followed(tmp_path, monkeypatch, capsys):
    pkg = package(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert run_cli(["pkg"], capsys)[0] == 1
    write(tmp_path / "pyproject.toml", '[tool.transpile.lint]\nextend-exclude = ["helpers.py"]\n')
    assert run_cli(["pkg"], capsys) == (0, "", "")
    assert pkg.is_dir()


def test_the_configuration_applies_to_cached_findings(tmp_path, monkeypatch, capsys):
    function_file(tmp_path / "f.py")
    monkeypatch.chdir(tmp_path)
    status, out, _ = run_cli(["f.py"], capsys)
    assert (status, [line.split()[1] for line in out.splitlines()]) == (1, ["DB100", "DB104"])
    write(tmp_path / "pyproject.toml", '[tool.transpile.lint]\nignore = ["DB100"]\n')
    status, out, _ = run_cli(["f.py"], capsys)
    assert (status, [line.split()[1] for line in out.splitlines()]) == (1, ["DB104"])
    write(tmp_path / "pyproject.toml", '[tool.transpile.lint]\nper-file-ignores = {"f.py" = ["DB1"]}\n')
    assert run_cli(["f.py"], capsys) == (0, "", "")


LIBRARY = '''\
from formulas import at, derivative


@derivative("cos(Tensor self) -> Tensor")
def cos(self):
    def backward(grad):
        return -grad * at.sin(self)

    return at.cos(self), backward
'''


def test_the_formula_library_is_a_dependency(tmp_path, monkeypatch):
    shipped = tmp_path / "shipped"
    write(shipped / "trig.py", LIBRARY)
    monkeypatch.setattr(library_discovery, "SHIPPED_FORMULAS", shipped)
    formula = write(tmp_path / "mine" / "op.py",
                    FORMULA.replace("at.sin(self)", "at.cos(self)").replace("grad * c", "at.cos(grad)"))
    assert cached([formula], tmp_path / "cache") == []
    (shipped / "trig.py").unlink()                               # at.cos has no formula any more
    assert cached([formula], tmp_path / "cache") == [("op.py", 6, "DB201"), ("op.py", 10, "DB105")]
    write(shipped / "trig.py", LIBRARY)
    assert cached([formula], tmp_path / "cache") == []


def test_the_formula_package_of_a_linted_file_is_a_dependency(tmp_path):
    write(tmp_path / "ops" / "__init__.py", "")
    op = write(tmp_path / "ops" / "op.py", FORMULA.replace("at.sin(self)", "at.frobnicate(self)")
               .replace("sin(Tensor", "sin_of_frobnicate(Tensor"))
    refused = cached([op], tmp_path / "cache")
    assert ("op.py", 6, "DB201") in refused                     # an operator the package does not declare
    write(tmp_path / "ops" / "frob.py", LIBRARY.replace("cos", "frobnicate").replace("at.sin", "at.cos"))
    assert ("op.py", 6, "DB201") not in cached([op], tmp_path / "cache")


def test_another_linter_computes_everything_again(tmp_path, checked, monkeypatch):
    function_file(tmp_path / "f.py")
    lint([str(tmp_path)], cache_dir=tmp_path / "cache")
    checked.clear()
    monkeypatch.setattr(result_cache, "tool_fingerprint", lambda: "another version")
    lint([str(tmp_path)], cache_dir=tmp_path / "cache")
    assert checked == ["f.py"]


def test_the_linter_is_identified_by_the_bytes_of_its_sources(tmp_path, monkeypatch):
    """An edit of the linter that keeps its sources' sizes and modification times is another linter."""
    source = write(tmp_path / "linter" / "rule.py", "MESSAGE = 'old'\n")
    status = source.stat()
    monkeypatch.setattr(result_cache, "PACKAGE", tmp_path / "linter")
    before = result_cache.tool_fingerprint()
    source.write_text("MESSAGE = 'new'\n")
    os.utime(source, ns=(status.st_atime_ns, status.st_mtime_ns))
    assert source.stat().st_size == status.st_size
    assert result_cache.tool_fingerprint() != before


def forged_bytecode(path: Path) -> None:
    """A hash-based pyc that matches ``path``'s bytes, as if CPython had compiled them."""
    header = importlib.util.MAGIC_NUMBER + (0b11).to_bytes(4, "little") + importlib.util.source_hash(path.read_bytes())
    pyc = Path(importlib.util.cache_from_source(str(path)))
    pyc.parent.mkdir(exist_ok=True)
    pyc.write_bytes(header)


def test_a_result_that_trusted_bytecode_is_not_reused_without_that_trust(tmp_path):
    broken = write(tmp_path / "src" / "broken.py", "def (\n")
    forged_bytecode(broken)
    assert lint([str(tmp_path / "src")], cache_dir=tmp_path / "cache").diagnostics == ()   # trusted
    untrusting = lint([str(tmp_path / "src")], trust_bytecode=False, cache_dir=tmp_path / "cache")
    assert [(d.line, d.code) for d in untrusting.diagnostics] == [(1, "DB000")]
    assert lint([str(tmp_path / "src")], cache_dir=tmp_path / "cache").diagnostics == ()


@pytest.mark.parametrize("garbage", [b"", b"\x00\xff not json", b"[]", b'{"format": 1, "entries": []}',
                                     b'{"format": 1, "entries": {"file:x": 3}}'])
def test_a_corrupt_cache_is_an_empty_one(tmp_path, garbage):
    function_file(tmp_path / "src" / "f.py")
    lint([str(tmp_path / "src")], cache_dir=tmp_path / "cache")
    (cache_file,) = (tmp_path / "cache").glob("*.json")
    cache_file.write_bytes(garbage)
    assert cached([tmp_path / "src"], tmp_path / "cache") == [("f.py", 8, "DB100"), ("f.py", 14, "DB104")]
    assert json.loads(cache_file.read_bytes())["format"] == result_cache.FORMAT     # written again, whole


HOSTILE_CACHES = {
    "fifo": lambda path: os.mkfifo(path),
    "device": lambda path: os.symlink("/dev/zero", path),
    "symlink loop": lambda path: os.symlink(path.name, path),
    "deeply nested": lambda path: path.write_text('{"format": 1, "entries": ' + "[" * 100_000 + "]" * 100_000 + "}"),
    "nested within the parser's depth": lambda path: path.write_text(
        '{"format": 1, "entries": {"file:x": {"value": ' + "[" * 500 + "]" * 500 + ', "depends": {}}}}'),
    "huge": lambda path: path.write_bytes(b" " * (result_cache.MAX_CACHE_BYTES + 1)),
}


@pytest.mark.parametrize("kind", HOSTILE_CACHES)
def test_a_cache_file_that_is_special_huge_or_deep_is_rebuilt_in_bounded_time(tmp_path, kind):
    """A FIFO is never waited on, a device or a huge file never read whole, a deep document never
    a RecursionError: the run reports what a fresh one does, and writes a cache of its own."""
    source = function_file(tmp_path / "src" / "f.py")
    argv = [sys.executable, "-m", "transpiler", "lint", "--cache-dir", str(tmp_path / "cache"), str(source)]
    fresh = subprocess.run(argv[:4] + ["--no-cache", str(source)], capture_output=True, text=True, timeout=120,
                           env=child_env())
    subprocess.run(argv, capture_output=True, timeout=120, env=child_env())
    (cache_file,) = (tmp_path / "cache").glob("*.json")
    cache_file.unlink()
    HOSTILE_CACHES[kind](cache_file)
    run = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=child_env())
    assert (run.returncode, run.stdout, run.stderr) == (1, fresh.stdout, "")
    assert cache_file.is_file() and not cache_file.is_symlink()
    assert json.loads(cache_file.read_bytes())["format"] == result_cache.FORMAT


DAMAGES = [
    lambda entry: entry["depends"].update(files={"x": "not a stamp"}),
    lambda entry: entry["depends"].update(modules=["not", "a", "table"]),
    lambda entry: entry.update(value=3),
    lambda entry: entry.update(value=[[["one", 1, "DB100", "m", None, []]], 1, False, [], []]),
    lambda entry: entry.update(value=[[], 1, False, [], [7]]),
]


@pytest.mark.parametrize("damage", DAMAGES)
def test_damaged_entries_are_computed_again(tmp_path, damage):
    function_file(tmp_path / "src" / "f.py")
    write(tmp_path / "src" / "formula.py", FORMULA)
    first = cached([tmp_path / "src"], tmp_path / "cache")
    (cache_file,) = (tmp_path / "cache").glob("*.json")
    document = json.loads(cache_file.read_bytes())
    assert set(document["entries"]) == {"file:" + str(tmp_path / "src" / name) for name in ("f.py", "formula.py")} | {
        "closure"}
    for entry in document["entries"].values():
        damage(entry)
    cache_file.write_text(json.dumps(document))
    assert cached([tmp_path / "src"], tmp_path / "cache") == first
    assert ("formula.py", 10, "DB100") in first


def test_an_unwritable_cache_directory_is_one_warning_and_the_same_result(tmp_path, capsys):
    function_file(tmp_path / "f.py")
    write(tmp_path / "a-file", "")
    expected = run_cli(["--no-cache", str(tmp_path / "f.py")], capsys)
    status, out, err = run_cli(["--cache-dir", str(tmp_path / "a-file" / "lint"), str(tmp_path / "f.py")], capsys)
    assert (status, out) == expected[:2]
    (warning,) = err.splitlines()
    assert warning.startswith(f"transpile lint: warning: {tmp_path / 'a-file'}") and "not cached" in warning


def test_the_default_cache_is_in_the_project_build_cache(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("TRANSPILE_BUILD_DIR", str(tmp_path / "build"))
    function_file(tmp_path / "f.py")
    assert run_cli([str(tmp_path / "f.py")], capsys)[0] == 1
    assert len(list((tmp_path / "build" / "lint-cache").glob("*.json"))) == 1
    assert run_cli(["--no-cache", str(tmp_path / "f.py")], capsys)[0] == 1
    assert len(list((tmp_path / "build" / "lint-cache").glob("*.json"))) == 1


def test_unreadable_files_and_stdin_are_never_cached(tmp_path, monkeypatch, checked):
    function_file(tmp_path / "f.py")
    missing = str(tmp_path / "gone.py")
    assert [d.code for d in lint([missing], cache_dir=tmp_path / "cache").diagnostics] == ["DB001"]
    source = (tmp_path / "f.py").read_bytes()
    stdin = lint([], stdin=("f.py", source), cache_dir=tmp_path / "cache")
    assert [d.code for d in stdin.diagnostics] == ["DB100", "DB104"]
    assert not (tmp_path / "cache").exists()


def test_internal_errors_are_not_cached(tmp_path, monkeypatch):
    function_file(tmp_path / "f.py")

    def broken(*_):
        raise RuntimeError("boom")

    with monkeypatch.context() as patch:
        patch.setattr(runner.ctx, "check_module", broken)
        assert [d.code for d in lint([str(tmp_path)], cache_dir=tmp_path / "cache").diagnostics] == ["DB002"]
    assert cached([tmp_path], tmp_path / "cache") == [("f.py", 8, "DB100"), ("f.py", 14, "DB104")]


def test_a_stamp_of_a_recently_changed_file_compares_the_bytes(tmp_path):
    path = write(tmp_path / "f.py", "x = 1\n")
    status = os.stat(path)
    stamp = FileStamp.of(status, path.read_bytes())              # just written: not settled yet
    assert stamp.digest is not None and stamp.matches(str(path))
    assert not stamp._replace(digest=FileStamp.of(status, b"x = 2\n").digest).matches(str(path))
    long_ago = 1_700_000_000 * 10**9
    settled = SimpleNamespace(st_mtime_ns=long_ago, st_ctime_ns=long_ago, st_size=6, st_ino=status.st_ino)
    assert FileStamp.of(settled, b"x = 1\n").digest is None       # changed long ago: the status suffices


def test_a_same_size_edit_that_keeps_the_modification_time_is_seen(tmp_path):
    path = function_file(tmp_path / "f.py")
    os.utime(path, ns=(1_700_000_000 * 10**9, 1_700_000_000 * 10**9))
    assert cached([path], tmp_path / "cache") == [("f.py", 8, "DB100"), ("f.py", 14, "DB104")]
    before = os.stat(path)
    path.write_text(path.read_text().replace("save_for_backward(y)", "save_for_backward(x)"))   # an input
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert os.stat(path).st_size == before.st_size
    assert cached([path], tmp_path / "cache") == [("f.py", 14, "DB104")]


def test_the_package_a_file_is_in_is_a_dependency(tmp_path):
    # `from .function import Function` is autograd's Function only inside the package torch.autograd
    write(tmp_path / "torch" / "__init__.py", "")
    write(tmp_path / "torch" / "autograd" / "__init__.py", "")
    mine = write(tmp_path / "torch" / "autograd" / "mine.py", (
        "from .function import Function\n\n\n"
        "class Keep(Function):\n"
        "    @staticmethod\n"
        "    def forward(ctx, x):\n"
        "        y = x.exp()\n"
        "        ctx.save_for_backward(y)\n"
        "        return x.clone()\n\n"
        "    @staticmethod\n"
        "    def backward(ctx, grad):\n"
        "        (y,) = ctx.saved_tensors\n"
        "        return grad * y\n"))
    assert cached([mine], tmp_path / "cache") == [("mine.py", 8, "DB100")]
    (tmp_path / "torch" / "__init__.py").unlink()                # now the package autograd: another Function
    assert cached([mine], tmp_path / "cache") == []


def test_the_cache_keeps_what_the_last_run_used_and_the_most_recent_files(tmp_path):
    function_file(tmp_path / "src" / "f.py")
    write(tmp_path / "src" / "gone.py", "x = 1\n")
    for number in range(result_cache.KEPT_FILES + 5):
        write(tmp_path / "cache" / f"{number:024x}.json", "{}")
        os.utime(tmp_path / "cache" / f"{number:024x}.json", (1_700_000_000 + number,) * 2)
    lint([str(tmp_path / "src")], cache_dir=tmp_path / "cache")
    (tmp_path / "src" / "gone.py").unlink()
    lint([str(tmp_path / "src")], cache_dir=tmp_path / "cache")
    kept = sorted((tmp_path / "cache").glob("*.json"), key=lambda p: p.stat().st_mtime)
    assert len(kept) == result_cache.KEPT_FILES and kept[0].name == f"{6:024x}.json"
    assert list(json.loads(kept[-1].read_bytes())["entries"]) == [f"file:{tmp_path / 'src' / 'f.py'}"]
