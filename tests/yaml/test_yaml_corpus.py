"""The installed derivatives.yaml: imported 100%, round-tripped exactly, accepted by torchgen."""
from __future__ import annotations

import filecmp
import subprocess
import sys
from pathlib import Path

import yaml

from transpiler.yaml_import import cpp
from transpiler.yaml_import.importer import FOREACH_INDEX, import_yaml
from transpiler.yaml_import.model import AUTO_JVP, NON_DIFFERENTIABLE, Entry, is_backward_line
from transpiler.schema import parse_schema

REPO = Path(__file__).resolve().parents[2]



def _lines_by_key(entry: Entry) -> dict[tuple[str | None, str], str]:
    return {(s.dispatch, line.key): line.formula for s in entry.sections for line in s.lines}


def test_every_entry_is_imported(import_result, original_entries):
    assert [p.format() for p in import_result.problems] == []
    assert import_result.imported == len(original_entries) == 687
    formula_files = [n for n in import_result.files if n.startswith("derivatives_")]
    assert len(formula_files) == -(-687 // 32)
    assert {"externals.py", "__init__.py"} <= set(import_result.files)


def test_import_is_deterministic(yaml_text, import_result):
    assert import_yaml(yaml_text, "elsewhere/derivatives.yaml").files == import_result.files


def test_entries_read_back_in_order(original_entries, read_back):
    assert [e.name for e in read_back] == [e.name for e in original_entries]
    assert [e.output_differentiability for e in read_back] == [e.output_differentiability for e in original_entries]
    assert [[s.dispatch for s in e.sections] for e in read_back] == \
        [[s.dispatch for s in e.sections] for e in original_entries]


def test_every_formula_round_trips_token_identical(original_entries, read_back):
    failures = []
    for original, back in zip(original_entries, read_back):
        theirs, ours = _lines_by_key(original), _lines_by_key(back)
        if theirs.keys() != ours.keys():
            failures.append(f"{original.name}: keys {sorted(map(str, theirs))} != {sorted(map(str, ours))}")
            continue
        for key, formula in theirs.items():
            if cpp.token_texts(formula) != cpp.token_texts(ours[key]):
                failures.append(f"{original.name} [{key}]: {formula!r} -> {ours[key]!r}")
    assert failures == []


def test_every_formula_round_trips_byte_identical(original_entries, read_back):
    """With the layout comments, the text itself comes back (spacing and /*comments*/ included)."""
    failures = [
        f"{o.name} [{key}]"
        for o, b in zip(original_entries, read_back)
        for key, formula in _lines_by_key(o).items()
        if _lines_by_key(b).get(key) != formula
    ]
    assert failures == []


def test_forward_mode_formulas_are_carried(original_entries, read_back):
    def forward_lines(entries):
        found = []
        for entry in entries:
            schema = parse_schema(entry.name)
            for section in entry.sections:
                found += [(entry.name, section.dispatch, line.key, line.formula)
                          for line in section.lines if not is_backward_line(line, schema)]
        return sorted(found)

    theirs = forward_lines(original_entries)
    assert len(theirs) > 380
    assert sum(1 for *_, formula in theirs if formula in AUTO_JVP) > 150
    assert forward_lines(read_back) == theirs


def test_non_differentiable_markers_are_kept(original_entries, read_back):
    def marked(entries):
        return sorted((e.name, s.dispatch, line.key) for e in entries for s in e.sections
                      for line in s.lines if line.formula == NON_DIFFERENTIABLE)
    assert marked(read_back) == marked(original_entries)
    assert len(marked(original_entries)) > 50


def test_an_entry_whose_every_input_is_non_differentiable_has_no_differentiable_output(import_result):
    """torchgen builds no node for ``special_airy_ai`` (``x: non_differentiable``, no gradient line):
    its output carries no gradient, as ``output_differentiability=[False]`` says; ``gather``'s
    ``index: non_differentiable`` beside ``self``'s gradient leaves its output differentiable."""
    text = "".join(str(body) for name, body in import_result.files.items() if name.startswith("derivatives_"))
    assert '@derivative("special_airy_ai(Tensor x) -> Tensor", output_differentiability=[False])' in text
    assert '@derivative("gather(Tensor self, int dim, Tensor index, *, bool sparse_grad=False) -> Tensor")\n' in text


def test_a_tensor_input_without_a_line_is_imported_as_torchgen_treats_it(import_result):
    """torchgen gives a tensor input no line names no edge: ``_standard_gamma_grad``'s ``output``
    it ignores (``ignores_grad``), ``binary_cross_entropy``'s ``weight`` it refuses to see requiring
    grad (``refuses_grad``: "not differentiable with respect to argument"); an entry without a
    gradient line (``special_airy_ai``) has neither, and the round trip writes neither back."""
    text = "".join(str(body) for name, body in import_result.files.items() if name.startswith("derivatives_"))
    assert ('@yaml_entry(ignores_grad=("output",))\n'
            'def _standard_gamma_grad(self, output):') in text
    assert ('@yaml_entry(refuses_grad=("weight",))\n'
            'def binary_cross_entropy(self, target, weight, reduction):') in text
    assert ('@yaml_entry(non_differentiable=("nested_size", "nested_strides"), refuses_grad=("offsets",))\n'
            'def _nested_view_from_buffer(') in text
    assert text.count("refuses_grad=") > 40 and text.count("ignores_grad=") == 1


def test_emitted_yaml_loads_to_the_same_data(yaml_text, emitted_yaml):
    original = yaml.load(yaml_text, Loader=yaml.CSafeLoader)
    emitted = yaml.load(emitted_yaml.read_text(encoding="utf-8"), Loader=yaml.CSafeLoader)
    mismatched = [a.get("name") for a, b in zip(original, emitted) if a != b]
    assert mismatched == [] and len(original) == len(emitted)


def test_torchgen_output_is_byte_identical(emitted_yaml, torchgen_original, torchgen_generate, tmp_path):
    """load_derivatives accepts the emitted file and Functions.h/.cpp come out byte-identical.

    torchgen copies each backward formula's text into Functions.cpp verbatim
    (after its own regex substitutions), so this also proves the spacing and
    comments survive the round trip.
    """
    emitted = torchgen_generate(emitted_yaml, tmp_path / "emitted")
    for generated in ("Functions.h", "Functions.cpp"):
        assert filecmp.cmp(torchgen_original / generated, emitted / generated, shallow=False), generated
    # The layout matters: a formula with a /*comment*/ reaches Functions.cpp as written.
    assert "/*training=*/false" in (emitted / "Functions.cpp").read_text()


def test_layouts_are_only_written_where_spacing_differs(import_result):
    """A line the main dialect rewrote keeps its YAML formula instead (the spacing comes with it)."""
    lines = [line for text in import_result.files.values() for line in text.splitlines()]
    layout_lines = [line for line in lines if "  # cpp: " in line]
    original_lines = [line for line in lines if "  # yaml: " in line]
    assert 5 < len(layout_lines) < 60
    assert 600 < len(original_lines) < 700


def test_imported_files_are_clean_python(imported_dir):
    """Every name bound, nothing shadowed (a formula named like a C++ helper it calls would be),
    except the ``_foreach_`` element index ``i``: declared (``node_value``) for a jvp, which is
    applied per element, and the loop variable of a backward's element loop, one meaning."""
    import ast

    from pyflakes.checker import Checker
    from pyflakes.messages import ImportShadowedByLoopVar

    warnings = [f"{path.name}:{message}" for path in sorted(imported_dir.glob("*.py"))
                for message in Checker(ast.parse(path.read_text(encoding="utf-8")), str(path)).messages
                if not (isinstance(message, ImportShadowedByLoopVar) and message.message_args[0] == FOREACH_INDEX)]
    assert warnings == []


def test_imported_package_imports(imported_dir):
    """The decorators run: each entry registers with formulas.derivative (in the package's own
    registry, not the library's), details with yaml_entry."""
    script = (
        "import importlib, pkgutil, sys\n"
        f"sys.path[:0] = [{str(imported_dir.parent)!r}, {str(REPO)!r}]\n"
        f"package = importlib.import_module({imported_dir.name!r})\n"
        "modules = [importlib.import_module(f'{package.__name__}.{m.name}') for m in pkgutil.iter_modules(package.__path__)]\n"
        "from formulas import FORMULAS, registry\n"
        "print(len(registry(package.__name__).formulas), len(FORMULAS),\n"
        "      sum(hasattr(f, 'yaml_entry') for m in modules for f in vars(m).values()))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=imported_dir.parent)
    assert done.returncode == 0, done.stderr
    registered, in_library, with_details = map(int, done.stdout.split())
    assert registered == 687       # one per operator: the dispatch variants of an entry share it
    assert in_library == 0         # the library's registry is not the corpus's
    assert with_details > 300


def test_cpp_semantics_survive_the_import(import_result):
    """C++'s integer division stays integer division (channel_shuffle's ``grad.sym_size(1) / groups``
    is not Python's true division), ``at::sum_to`` is the ``sum_to`` helper rather than an operator,
    and a factory's spelled-out options go by keyword (``_to_copy``'s jvp)."""
    text = "".join(import_result.files.values())
    assert "channel_shuffle(grad, cpp.int_div(grad.size(1), groups))" in text
    assert "at.sum_to(" not in text and "grad_self = sum_to(grad, self.sizes())" in text
    assert ("at._to_copy(self_t, dtype=dtype, layout=layout, device=device, pin_memory=pin_memory, "
            "non_blocking=non_blocking, memory_format=memory_format)") in text
