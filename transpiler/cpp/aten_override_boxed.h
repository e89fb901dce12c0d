#pragma once

// override(compiled=True) for an operator taking a list of tensors: torch declares some of those
// kernels with another C++ signature than the generated one (aten::cat takes an ITensorListRef, the
// generated kernel an at::TensorList), and the dispatcher refuses an unboxed kernel of another
// signature. Such an operator's kernel for aten's is registered boxed: the arguments, on the stack,
// go to the package's own operator's kernel, the generated forward wrapper its m.def registered at
// CompositeImplicitAutograd (callBoxedForDispatchKey takes a key a kernel is registered at: at an
// autograd key it would find torch's "autograd not implemented" fallback).

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <c10/core/DispatchKey.h>
#include <torch/library.h>

#include <memory>
#include <string>
#include <utility>

namespace formulas::aten_override {

class OwnKernel final : public c10::OperatorKernel {
 public:
  explicit OwnKernel(c10::OperatorHandle own) : own_(std::move(own)) {}

  void operator()(const c10::OperatorHandle& /*aten*/, c10::DispatchKeySet /*keys*/, torch::jit::Stack* stack) {
    own_.callBoxedForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd, *stack);
  }

 private:
  c10::OperatorHandle own_;
};

// Registers `<library_namespace>::<name>.<overload>`'s kernel at `key` for aten's operator of that name.
inline void register_boxed(torch::Library& m, c10::DispatchKey key, const char* library_namespace, const char* name,
                           const char* overload) {
  const c10::OperatorHandle own =
      c10::Dispatcher::singleton().findSchemaOrThrow((std::string(library_namespace) + "::" + name).c_str(), overload);
  const std::string op = *overload ? std::string(name) + "." + overload : std::string(name);
  m.impl(op.c_str(), torch::dispatch(key, torch::CppFunction::makeFromBoxedFunctor(std::make_unique<OwnKernel>(own))));
}

}  // namespace formulas::aten_override
