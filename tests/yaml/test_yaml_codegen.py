"""Autograd node C++ from an imported directory, and its content-hash cache."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from transpiler.yaml_import.codegen import CodegenError, cpp_type, generate, main
from transpiler.output import replace_directory
from transpiler.yaml_import.importer import import_yaml
from transpiler.schema import parse_type

SMALL_YAML = """\
- name: max.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)
  self: value_selecting_reduction_backward_symint(grad, dim, indices, self.sym_sizes(), keepdim)
  output_differentiability: [True, False]

- name: max.other(Tensor self, Tensor other) -> Tensor
  self, other: maximum_backward(grad, self, other, grad_input_mask)

- name: cat(Tensor[] tensors, int dim=0) -> Tensor
  tensors: cat_tensors_backward(grad, to_args_sizes_symint(tensors), to_args_scalartypes(tensors), dim)

- name: rand_like(Tensor self, *, ScalarType? dtype=None) -> Tensor
  self: non_differentiable
"""


@pytest.fixture()
def small_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "small"
    replace_directory(directory, import_yaml(SMALL_YAML, "small.yaml").files)
    return directory


def test_nodes_save_only_what_the_formulas_read(small_dir: Path, tmp_path: Path):
    report = generate(small_dir, tmp_path / "out")
    assert report.nodes == 3          # rand_like has no gradient formula, so no node
    header = (tmp_path / "out" / "Functions.h").read_text()
    source = (tmp_path / "out" / "Functions.cpp").read_text()
    assert """struct TORCH_API MaxBackward0 : public TraceableFunction {
  TORCH_API MaxBackward0() = default;
  variable_list apply(variable_list&& grads) override;
  std::string name() const override { return "MaxBackward0"; }
  void release_variables() override {
    std::lock_guard<std::mutex> lock(mutex_);
    indices_.reset_data();
  }
  std::vector<c10::SymInt> self_sym_sizes;
  int64_t dim;
  bool keepdim;
  SavedVariable indices_;
};""" in header
    # self is read only for its sizes: the sizes are saved, not the tensor
    assert "SavedVariable self_;" not in header.split("struct TORCH_API MaxBackward1")[0]
    assert "value_selecting_reduction_backward_symint(grad, dim, indices, self_sym_sizes, keepdim)" in source
    assert """  if (task_should_compute_output({ self_ix, other_ix })) {
    auto grad_input_mask = std::array<bool, 2>{
      task_should_compute_output({ self_ix }),
      task_should_compute_output({ other_ix }),
    };
    auto grad_result = maximum_backward(grad, self, other, grad_input_mask);
    if (task_should_compute_output({ self_ix })) {
      copy_range(grad_inputs, self_ix, std::get<0>(grad_result));
    }""" in source
    # cat reads only metadata of its list: the sizes and dtypes are saved, the tensors are not
    assert """  ::std::vector<::std::vector<c10::SymInt>> tensors_args_sizes_symint;
  ::std::vector<at::ScalarType> tensors_args_scalartypes;
  int64_t dim;
  size_t tensors_size_;
};""" in header
    assert "auto tensors_ix = gen.range(tensors_size_);" in source
    assert "cat_tensors_backward(grad, tensors_args_sizes_symint, tensors_args_scalartypes, dim)" in source


def test_cache_skips_unchanged_files(small_dir: Path, tmp_path: Path):
    out, cache = tmp_path / "out", tmp_path / "cache"
    first = generate(small_dir, out, cache)
    assert (first.files_read, first.unchanged) == (1, False)
    before = (out / "Functions.cpp").read_text()
    again = generate(small_dir, out, cache)
    assert again.unchanged and again.files_read == 0
    assert (out / "Functions.cpp").read_text() == before

    formulas = small_dir / "derivatives_000.py"
    formulas.write_text(formulas.read_text().replace("maximum_backward(grad, self, other, needs_input_grad)",
                                                     "maximum_backward(grad, other, self, needs_input_grad)"))
    changed = generate(small_dir, out, cache)
    assert (changed.files_read, changed.unchanged) == (1, False)
    cached_text = (out / "Functions.cpp").read_text()
    assert "maximum_backward(grad, other, self, grad_input_mask)" in cached_text
    generate(small_dir, tmp_path / "fresh")          # no cache: same output
    assert (tmp_path / "fresh" / "Functions.cpp").read_text() == cached_text


def test_node_names_follow_torchgen(imported_dir: Path, torchgen_original: Path, tmp_path: Path):
    """Same names, same order as torchgen's Functions.h (which adds nodes for the view_copy ops)."""
    generate(imported_dir, tmp_path)
    ours = re.findall(r"^struct TORCH_API (\w+) :", (tmp_path / "Functions.h").read_text(), re.M)
    theirs = re.findall(r"^struct TORCH_API (\w+) :", (torchgen_original / "Functions.h").read_text(), re.M)
    assert len(ours) > 600
    assert [name for name in theirs if name in set(ours)] == ours


def _members(header: str) -> dict[str, dict[str, str]]:
    """struct name -> {member: type} of a Functions.h (list bookkeeping members left out)."""
    nodes = {}
    for match in re.finditer(r"^struct TORCH_API (\w+) : public \w+ \{(.*?)\n\};", header, re.S | re.M):
        members = (re.match(r"  ([\w:<>, ]+?) (\w+)(?: = [^;]*)?;$", line) for line in match.group(2).splitlines())
        nodes[match.group(1)] = {m.group(2): m.group(1) for m in members
                                 if m and not m.group(2).endswith(("_released_", "_size_"))}
    return nodes


def test_saved_members_match_torchgen(imported_dir: Path, torchgen_original: Path, tmp_path: Path):
    """Every node saves what torchgen's saves, with the same C++ types, except where torchgen's
    regular expressions see a name that is not a variable of the formula."""
    generate(imported_dir, tmp_path)
    ours = _members((tmp_path / "Functions.h").read_text())
    theirs = _members((torchgen_original / "Functions.h").read_text())
    differing = {name: {k: v for k, v in theirs[name].items() if ours[name].get(k) != v}
                 for name in ours if ours[name] != theirs[name]}
    assert differing == {
        "ComplexBackward0": {"real_": "SavedVariable", "imag_": "SavedVariable"},   # at::real(grad)
        "BatchNormBackwardBackward0": {"reserve_": "SavedVariable"},               # "...backward reserve"
        "CudnnBatchNormBackwardBackward0": {"reserveSpace_": "SavedVariable"},     # "... reserveSpace"
        "SparseCompressedTensorBackward0": {"values_": "SavedVariable"},           # .values()
    }
    assert all(set(ours[name]) < set(theirs[name]) for name in differing)
    assert sum(len(members) for members in ours.values()) > 1500


def test_member_types():
    assert cpp_type(parse_type("int[1]?")[0]) == "c10::OptionalArray<int64_t>"
    assert cpp_type(parse_type("float?")[0]) == "::std::optional<double>"
    assert cpp_type(parse_type("bool[3]")[0]) == "std::array<bool, 3>"
    assert cpp_type(parse_type("SymInt[]")[0]) == "std::vector<c10::SymInt>"
    with pytest.raises(CodegenError, match="Storage"):
        cpp_type(parse_type("Storage")[0])


def test_command(small_dir: Path, tmp_path: Path, capsys):
    out, cache = tmp_path / "out", tmp_path / "cache"
    assert main([str(small_dir), "-o", str(out), "--cache", str(cache)]) == 0
    assert capsys.readouterr().out.strip().endswith("3 nodes from 1 formula files (1 read)")
    assert main([str(small_dir), "-o", str(out), "--cache", str(cache)]) == 0
    assert "up to date" in capsys.readouterr().out
    formulas = small_dir / "derivatives_000.py"
    formulas.write_text(formulas.read_text().replace("maximum_backward(", "maximum_backward((", 1))
    assert main([str(small_dir), "-o", str(out), "--cache", str(cache)]) == 1
    assert capsys.readouterr().err.startswith(f"{formulas}:")


def test_foreach_formulas_are_applied_per_element(imported_dir: Path, torchgen_original: Path, tmp_path: Path):
    generate(imported_dir, tmp_path)
    source = (tmp_path / "Functions.cpp").read_text()
    loop = "for (const auto & i : c10::irange(grads.size())) {"
    assert source.count(loop) == (torchgen_original / "Functions.cpp").read_text().count(loop) > 10
    assert (f"    {loop}\n      grad_result.emplace_back(grads[i].defined() ? (at::where(self[i] == scalar, "
            "grads[i] / 2, grads[i]).masked_fill_(self[i] < scalar, 0)) : Tensor());\n    }") in source
