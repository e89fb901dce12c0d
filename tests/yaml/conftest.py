"""Session fixtures: the installed torch's derivatives.yaml imported once into a temporary directory.

The imported formulas are PyTorch's content and are never committed; every
run regenerates them from the installed torchgen.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable

import pytest
import torchgen

from transpiler.yaml_import.emit import emit_yaml
from transpiler.output import replace_directory
from transpiler.yaml_import.importer import ImportResult, import_yaml, read_entries
from transpiler.yaml_import.model import Entry
from transpiler.yaml_import.reader import read_directory

TORCHGEN = Path(torchgen.__file__).parent
DERIVATIVES_YAML = TORCHGEN / "packaged" / "autograd" / "derivatives.yaml"


@pytest.fixture(scope="session")
def yaml_text() -> str:
    return DERIVATIVES_YAML.read_text(encoding="utf-8")


@pytest.fixture(scope="session")
def original_entries(yaml_text: str) -> list[Entry]:
    entries = read_entries(yaml_text)
    assert all(isinstance(e, Entry) for e in entries)
    return entries


@pytest.fixture(scope="session")
def import_result(yaml_text: str) -> ImportResult:
    return import_yaml(yaml_text, str(DERIVATIVES_YAML))


@pytest.fixture(scope="session")
def imported_dir(import_result: ImportResult, tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("imported") / "torch_derivatives"
    replace_directory(directory, import_result.files)
    return directory


@pytest.fixture(scope="session")
def read_back(imported_dir: Path) -> list[Entry]:
    return read_directory(imported_dir)


@pytest.fixture(scope="session")
def emitted_yaml(read_back: list[Entry], tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("emitted") / "derivatives.yaml"
    path.write_text(emit_yaml(read_back, "imported"), encoding="utf-8")
    return path


def _torchgen(derivatives_yaml: Path, out: Path) -> Path:
    """torchgen's load_derivatives + gen_autograd_functions_lib: Functions.h/.cpp into ``out``."""
    from torchgen.packaged.autograd.gen_autograd_functions import gen_autograd_functions_lib
    from torchgen.packaged.autograd.load_derivatives import load_derivatives

    native = TORCHGEN / "packaged" / "ATen" / "native"
    infos, _ = load_derivatives(str(derivatives_yaml), str(native / "native_functions.yaml"),
                                str(native / "tags.yaml"))
    out.mkdir(parents=True)
    gen_autograd_functions_lib(str(out), infos, str(TORCHGEN / "packaged" / "autograd" / "templates"))
    return out


@pytest.fixture(scope="session")
def torchgen_generate() -> Callable[[Path, Path], Path]:
    return _torchgen


@pytest.fixture(scope="session")
def torchgen_original(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """torchgen's output for the installed derivatives.yaml."""
    return _torchgen(DERIVATIVES_YAML, tmp_path_factory.mktemp("torchgen") / "original")
