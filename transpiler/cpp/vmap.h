#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <ATen/functorch/BatchedTensorImpl.h>
#include <ATen/ops/stack.h>
#include <c10/core/impl/LocalDispatchKeySet.h>

#include <algorithm>
#include <optional>
#include <tuple>
#include <vector>

namespace formulas::runtime {

// An operator's arguments with the tensors batched at one vmap level unwrapped (a tensor, the
// entries of a Tensor[] or Tensor?[]), and each example of the batch taken from them.
class ExampleArguments {
 public:
  ExampleArguments(const std::vector<c10::IValue>& arguments, int64_t level) {
    for (const auto& argument : arguments) {
      unwrapped_.push_back(unwrap(argument, level));
    }
  }
  std::optional<int64_t> batch_size() const { return batch_size_; }

  // The innermost vmap level among the arguments' tensors (-1: none is batched). The rule runs
  // at the innermost vmap level: an argument batched there has the highest level of all (levels
  // grow inward); where none is, the examples are those of an outer level, which is the same map.
  static int64_t innermost_level(const std::vector<c10::IValue>& arguments) {
    int64_t level = -1;
    auto see = [&level](const at::Tensor& tensor) {
      if (const auto* batched = at::functorch::maybeGetBatchedImpl(tensor)) {
        level = std::max(level, batched->level());
      }
    };
    for (const auto& argument : arguments) {
      if (argument.isTensor()) {
        see(argument.toTensor());
      } else if (argument.isTensorList()) {
        for (const at::Tensor& entry : argument.toTensorList().vec()) {
          see(entry);
        }
      } else if (argument.isOptionalTensorList()) {
        for (const std::optional<at::Tensor>& entry : argument.toOptionalTensorList().vec()) {
          if (entry.has_value() && entry->defined()) {
            see(*entry);
          }
        }
      }
    }
    return level;
  }

  // The arguments of example `index`: a batched tensor's slice, everything else as it is.
  std::vector<c10::IValue> example(int64_t index) const {
    std::vector<c10::IValue> values;
    for (const auto& argument : unwrapped_) {
      values.push_back(select(argument, index));
    }
    return values;
  }

 private:
  struct Unwrapped {
    c10::IValue value;                              // with batched tensors unwrapped
    std::vector<std::optional<int64_t>> batch_dims;  // per tensor (one for a tensor, one per entry of a list)
  };

  Unwrapped unwrap(const c10::IValue& argument, int64_t level) {
    if (argument.isTensor()) {
      auto [tensor, dim] = unwrap_tensor(argument.toTensor(), level);
      return {c10::IValue(tensor), {dim}};
    }
    if (argument.isTensorList()) {
      c10::List<at::Tensor> tensors;
      std::vector<std::optional<int64_t>> dims;
      for (const at::Tensor& entry : argument.toTensorList().vec()) {
        auto [tensor, dim] = unwrap_tensor(entry, level);
        tensors.push_back(tensor);
        dims.push_back(dim);
      }
      return {c10::IValue(tensors), dims};
    }
    if (argument.isOptionalTensorList()) {
      c10::List<std::optional<at::Tensor>> tensors;
      std::vector<std::optional<int64_t>> dims;
      for (const std::optional<at::Tensor>& entry : argument.toOptionalTensorList().vec()) {
        if (entry.has_value() && entry->defined()) {
          auto [tensor, dim] = unwrap_tensor(*entry, level);
          tensors.push_back(tensor);
          dims.push_back(dim);
        } else {
          tensors.push_back(std::nullopt);
          dims.push_back(std::nullopt);
        }
      }
      return {c10::IValue(tensors), dims};
    }
    return {argument, {}};
  }

  std::tuple<at::Tensor, std::optional<int64_t>> unwrap_tensor(const at::Tensor& tensor, int64_t level) {
    const auto* batched = at::functorch::maybeGetBatchedImpl(tensor);
    if (batched == nullptr || batched->level() != level) {
      return {tensor, std::nullopt};
    }
    batch_size_ = batched->value().size(batched->bdim());
    return {batched->value(), batched->bdim()};
  }

  static at::Tensor slice(const at::Tensor& tensor, std::optional<int64_t> dim, int64_t index) {
    return dim.has_value() ? tensor.select(*dim, index) : tensor;
  }

  static c10::IValue select(const Unwrapped& argument, int64_t index) {
    const c10::IValue& value = argument.value;
    if (value.isTensor()) {
      return slice(value.toTensor(), argument.batch_dims[0], index);
    }
    if (value.isTensorList()) {
      c10::List<at::Tensor> tensors;
      auto entries = value.toTensorList().vec();
      for (size_t i = 0; i < entries.size(); ++i) {
        tensors.push_back(slice(entries[i], argument.batch_dims[i], index));
      }
      return tensors;
    }
    if (value.isOptionalTensorList()) {
      c10::List<std::optional<at::Tensor>> tensors;
      auto entries = value.toOptionalTensorList().vec();
      for (size_t i = 0; i < entries.size(); ++i) {
        tensors.push_back(entries[i].has_value() ? std::optional<at::Tensor>(slice(*entries[i], argument.batch_dims[i], index))
                                                 : std::nullopt);
      }
      return tensors;
    }
    return value;
  }

  std::vector<Unwrapped> unwrapped_;
  std::optional<int64_t> batch_size_;
};

// torch.vmap's rule for an operator with a list of tensors among its arguments (Tensor[] or
// Tensor?[]: cat's inputs, index.Tensor's indices), for which torch generates no fallback: the
// operator on each example of the batch, the results stacked along dim 0 (what torch's generated
// fallback does for the other operators). Registered at the FuncTorchBatched key, as the Python
// path's custom ops register theirs (formulas.torch.custom_ops).
inline void vmap_by_example(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const auto& schema = op.schema();
  const size_t argument_count = schema.arguments().size();
  const size_t return_count = schema.returns().size();
  c10::impl::ExcludeDispatchKeyGuard guard(c10::DispatchKey::FuncTorchBatched);
  auto popped = torch::jit::pop(*stack, argument_count);
  const int64_t level = ExampleArguments::innermost_level(popped);
  ExampleArguments arguments(popped, level);
  if (!arguments.batch_size().has_value()) {      // nothing batched at this level
    for (auto& value : arguments.example(0)) {
      torch::jit::push(stack, std::move(value));
    }
    op.callBoxed(stack);
    return;
  }
  TORCH_CHECK(*arguments.batch_size() > 0, "torch.vmap over ", schema.name(),
              ": a batch of size 0 gives no example to run the operator on");
  // per return: its value for every example (a Tensor[] return: one list per example)
  std::vector<std::vector<c10::IValue>> results(return_count);
  for (int64_t index = 0; index < *arguments.batch_size(); ++index) {
    torch::jit::Stack example;
    for (auto& value : arguments.example(index)) {
      example.push_back(std::move(value));
    }
    op.callBoxed(&example);
    for (size_t r = 0; r < return_count; ++r) {
      results[r].push_back(std::move(example[r]));
    }
  }
  for (const auto& per_example : results) {
    if (per_example[0].isTensor()) {
      std::vector<at::Tensor> tensors;
      for (const auto& value : per_example) {
        tensors.push_back(value.toTensor());
      }
      torch::jit::push(stack, at::functorch::makeBatched(at::stack(tensors), 0, level));
      continue;
    }
    TORCH_CHECK(per_example[0].isTensorList(), "torch.vmap over ", schema.name(),
                ": a return that is neither a tensor nor a list of tensors has no batching rule");
    const size_t length = per_example[0].toTensorList().size();
    c10::List<at::Tensor> stacked;
    for (size_t i = 0; i < length; ++i) {
      std::vector<at::Tensor> tensors;
      for (const auto& value : per_example) {
        auto entries = value.toTensorList();
        TORCH_CHECK(entries.size() == length, "torch.vmap over ", schema.name(),
                    ": the examples return lists of different lengths, which cannot be stacked");
        tensors.push_back(entries.get(i));
      }
      stacked.push_back(at::functorch::makeBatched(at::stack(tensors), 0, level));
    }
    torch::jit::push(stack, stacked);
  }
}

}  // namespace formulas::runtime
