#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/ops/zeros_like.h>
#include <c10/util/OptionalArrayRef.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/saved_variable.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace formulas::runtime {

using torch::autograd::SavedVariable;
using torch::autograd::variable_list;

// Python's xs[i]: a negative index counts from the end.
inline size_t wrap_index(int64_t index, size_t size) {
  return static_cast<size_t>(index < 0 ? index + static_cast<int64_t>(size) : index);
}

// Python's a // b and a % b on ints (round toward negative infinity).
inline int64_t floordiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
inline int64_t pymod(int64_t a, int64_t b) {
  return a - floordiv(a, b) * b;
}

// Python's xs + ys on lists.
template <typename T, typename U>
std::vector<T> concat(const std::vector<T>& xs, const U& ys) {
  std::vector<T> out(xs.begin(), xs.end());
  out.insert(out.end(), ys.begin(), ys.end());
  return out;
}

// Python's list(xs): an owned copy, xs evaluated once (it may be a temporary).
template <typename V, typename C>
V to_list(const C& xs) { return V(xs.begin(), xs.end()); }

// Owning copies of what the dispatcher lends a kernel, for node members.
template <typename T>
std::vector<T> to_owned(c10::ArrayRef<T> xs) { return xs.vec(); }
inline std::optional<std::vector<int64_t>> to_owned(at::OptionalIntArrayRef xs) {
  return xs.has_value() ? std::optional<std::vector<int64_t>>(xs->vec()) : std::nullopt;
}
inline std::string to_owned(c10::string_view text) { return std::string(text); }
template <typename T>
T to_owned(const T& value) { return value; }

// Node members lent back to the backward function's borrowed parameters.
inline at::OptionalIntArrayRef borrow(const std::optional<std::vector<int64_t>>& xs) {
  return xs.has_value() ? at::OptionalIntArrayRef(*xs) : at::OptionalIntArrayRef();
}
template <typename T>
const T& borrow(const T& value) { return value; }

// A Tensor? argument for an ATen op: formula code holds it as an at::Tensor, undefined for None,
// which ATen must receive as an empty optional (an optional holding an undefined tensor is present).
inline std::optional<at::Tensor> optional_tensor(const at::Tensor& tensor) {
  return tensor.defined() ? std::optional<at::Tensor>(tensor) : std::nullopt;
}

// Saving and restoring a Tensor[] input.
inline std::vector<SavedVariable> save_list(at::TensorList tensors) {
  std::vector<SavedVariable> saved;
  saved.reserve(tensors.size());
  for (const auto& tensor : tensors) {
    saved.emplace_back(tensor, false);
  }
  return saved;
}
inline std::vector<at::Tensor> unpack_list(const std::vector<SavedVariable>& saved) {
  std::vector<at::Tensor> tensors;
  tensors.reserve(saved.size());
  for (const auto& variable : saved) {
    tensors.push_back(variable.unpack());
  }
  return tensors;
}

// Saving and restoring a Tensor?[] input (index tensors; None, a whole dimension, is saved as an
// undefined tensor and restored as None).
inline std::vector<SavedVariable> save_index_list(const c10::List<std::optional<at::Tensor>>& indices) {
  std::vector<SavedVariable> saved;
  saved.reserve(indices.size());
  for (size_t i = 0; i < indices.size(); ++i) {
    const std::optional<at::Tensor> index = indices.get(i);
    saved.emplace_back(index.has_value() ? *index : at::Tensor(), false);
  }
  return saved;
}
inline c10::List<std::optional<at::Tensor>> unpack_index_list(const std::vector<SavedVariable>& saved) {
  c10::List<std::optional<at::Tensor>> indices;
  indices.reserve(saved.size());
  for (const auto& variable : saved) {
    at::Tensor index = variable.unpack();
    indices.push_back(index.defined() ? std::optional<at::Tensor>(std::move(index)) : std::nullopt);
  }
  return indices;
}

// Gradient slots of apply(): one range of edges per differentiable input.
struct IndexRange {
  size_t begin;
  size_t end;
};
class IndexRanges {
 public:
  IndexRange next(size_t count) {
    IndexRange range{size_, size_ + count};
    size_ += count;
    return range;
  }
  size_t size() const { return size_; }

 private:
  size_t size_ = 0;
};

// The library's formulas are derived for real dtypes: recording a complex tensor (a
// differentiable input or output, for backward or with a tangent) is refused, as torch
// refuses complex autograd for an operator whose formula does not handle it, instead of
// returning a wrong derivative.
inline void refuse_complex(const char* op, const at::Tensor& tensor) {
  TORCH_CHECK(!tensor.defined() || !tensor.is_complex(), op,
              ": the formula library's derivatives are for real dtypes; automatic differentiation "
              "of complex tensors is not supported (use torch's built-in operator)");
}
inline void refuse_complex(const char* op, const std::optional<at::Tensor>& tensor) {
  if (tensor.has_value()) {
    refuse_complex(op, *tensor);
  }
}
inline void refuse_complex(const char* op, at::ITensorListRef tensors) {
  for (const auto& tensor : tensors) {
    refuse_complex(op, tensor);
  }
}

// torch's refusal of an input requiring grad that its derivatives.yaml entry gives no line
// (torchgen's check_no_requires_grad), in grad mode.
inline void check_no_requires_grad(const at::Tensor& tensor, const char* name, const char* op) {
  TORCH_CHECK(!tensor.defined() || !tensor.requires_grad(), "The function '", op,
              "' is not differentiable with respect to argument '", name,
              "'. This input cannot have requires_grad True.");
}
inline void check_no_requires_grad(const std::optional<at::Tensor>& tensor, const char* name, const char* op) {
  if (tensor.has_value()) {
    check_no_requires_grad(*tensor, name, op);
  }
}

// Whether autograd differentiates an output of this dtype (floating or complex): `x.long()`,
// `_to_copy` to an integer or bool dtype, gives a result with no history and no tangent, as in torch.
inline bool differentiable_dtype(const at::Tensor& output) {
  return output.defined() && torch::autograd::isDifferentiableType(output.scalar_type());
}
inline bool differentiable_dtype(at::ITensorListRef outputs) {
  for (const auto& output : outputs) {
    if (differentiable_dtype(output)) {
      return true;
    }
  }
  return false;
}

inline bool any_defined(const variable_list& grads) {
  for (const auto& grad : grads) {
    if (grad.defined()) {
      return true;
    }
  }
  return false;
}

inline bool should_compute(const torch::autograd::Node& node, IndexRange range) {
  for (size_t i = range.begin; i < range.end; ++i) {
    if (node.task_should_compute_output(i)) {
      return true;
    }
  }
  return false;
}

// Store a formula's gradient for one input (undefined means zero).
inline void store(variable_list& grad_inputs, IndexRange range, const at::Tensor& grad) {
  if (range.end > range.begin) {
    grad_inputs[range.begin] = grad;
  }
}
inline void store(variable_list& grad_inputs, IndexRange range, const std::vector<at::Tensor>& grads) {
  TORCH_CHECK(grads.empty() || grads.size() == range.end - range.begin,
              "a backward formula returned ", grads.size(), " gradients for a list of ",
              range.end - range.begin, " tensors");
  for (size_t i = 0; i < grads.size(); ++i) {
    grad_inputs[range.begin + i] = grads[i];
  }
}

// Forward mode, as torchgen's VariableType does it (level 0): an input's primal without its
// tangent, its tangent (zeros when it has none: an undefined tangent means zero), and an
// output's tangent set from a jvp result (undefined: the output gets none).
inline at::Tensor primal(const at::Tensor& input) {
  return input.defined() ? input._fw_primal(/*level*/ 0) : input;
}
inline at::Tensor tangent(const at::Tensor& input) {
  if (!input.defined()) {
    return input;
  }
  const auto& raw = input._fw_grad(/*level*/ 0);
  return raw.defined() ? raw : at::zeros_like(primal(input));
}
template <typename F>
std::vector<at::Tensor> each(at::TensorList inputs, F f) {
  std::vector<at::Tensor> values;
  values.reserve(inputs.size());
  for (const auto& input : inputs) {
    values.push_back(f(input));
  }
  return values;
}
inline std::vector<at::Tensor> primals(at::TensorList inputs) {
  return each(inputs, primal);
}
inline std::vector<at::Tensor> tangents(at::TensorList inputs) {
  return each(inputs, tangent);
}
inline void set_tangent(const at::Tensor& output, const at::Tensor& tangent) {
  if (tangent.defined() && output.defined()) {
    output._set_fw_grad(tangent, /*level*/ 0, /*is_inplace_op*/ false);
  }
}
inline void set_tangent(const std::vector<at::Tensor>& outputs, const std::vector<at::Tensor>& tangents) {
  TORCH_CHECK(tangents.size() == outputs.size(), "a jvp returned ", tangents.size(), " tangents for a list of ",
              outputs.size(), " outputs");
  for (size_t i = 0; i < outputs.size(); ++i) {
    set_tangent(outputs[i], tangents[i]);
  }
}

}  // namespace formulas::runtime
