#pragma once

#include <torch/csrc/autograd/VariableTypeUtils.h>

#include <memory>
#include <optional>
#include <vector>

namespace formulas::runtime {

// A view function whose state is the plain members of Derived (no SymInts or tensors to
// expose): a clone is a copy.
template <typename Derived>
struct ReplayViewFunc : public torch::autograd::ViewFunc {
  std::unique_ptr<torch::autograd::ViewFunc> clone_and_set(
      std::optional<std::vector<c10::SymInt>> = std::nullopt,
      std::optional<std::vector<at::Tensor>> = std::nullopt) const override {
    return std::make_unique<Derived>(static_cast<const Derived&>(*this));
  }
};

// Whether `out` shares `base`'s storage. Tensors without storage (functorch's wrappers under
// torch.func.jvp / vmap, whose own layers handle aliasing) are never marked here.
inline bool shares_storage(const at::Tensor& out, const at::Tensor& base) {
  return out.has_storage() && base.has_storage() && out.is_alias_of(base);
}

// Mark `out`, which shares `base`'s storage, as a view of `base`: with the creation mode of now
// (grad, no_grad, inference) and, where torch keeps one (a tensor without as_strided, or view
// replay enabled), the view function `make_view_func()` returns (nullptr: as_strided is used).
template <typename MakeViewFunc>
at::Tensor as_view(const at::Tensor& base, const at::Tensor& out, MakeViewFunc make_view_func) {
  std::unique_ptr<torch::autograd::ViewFunc> view_func;
  if (!base.unsafeGetTensorImpl()->support_as_strided() ||
      c10::AutogradState::get_tls_state().get_view_replay_enabled()) {
    view_func = make_view_func();
  }
  const auto creation_meta = c10::InferenceMode::is_enabled()
      ? torch::autograd::CreationMeta::INFERENCE_MODE
      : (at::GradMode::is_enabled() ? torch::autograd::CreationMeta::DEFAULT
                                    : torch::autograd::CreationMeta::NO_GRAD_MODE);
  return torch::autograd::as_view(base, out, /*is_bw_differentiable=*/true, /*is_fw_differentiable=*/true,
                                  std::move(view_func), /*rev_view_func=*/nullptr, creation_meta);
}

// Mark each of `outs` that shares `base`'s storage as one of several views of `base`, as torch marks
// the outputs of split and unbind (CreationMeta::MULTI_OUTPUT_NODE): an in-place write to one of them
// raises torch's error, so none needs a view function.
inline void as_multi_output_views(const at::Tensor& base, std::vector<at::Tensor>& outs) {
  const auto creation_meta = c10::InferenceMode::is_enabled()
      ? torch::autograd::CreationMeta::INFERENCE_MODE
      : (at::GradMode::is_enabled() ? torch::autograd::CreationMeta::MULTI_OUTPUT_NODE
                                    : torch::autograd::CreationMeta::NO_GRAD_MODE);
  for (auto& out : outs) {
    if (shares_storage(out, base)) {
      out = torch::autograd::as_view(base, out, /*is_bw_differentiable=*/true, /*is_fw_differentiable=*/true,
                                     /*view_func=*/nullptr, /*rev_view_func=*/nullptr, creation_meta);
    }
  }
}

}  // namespace formulas::runtime
