#pragma once

// override(compiled=True) from C++: each generated operator's kernel (the forward wrapper that
// records its node) registered for the aten operator of the same name and schema at autograd
// dispatch keys, in a torch::Library owned by one installation. Every module file adds its
// operators' registrars when the library loads (Registrars); install() makes the Library and
// registers the chosen operators; uninstall() destroys it, which removes exactly those
// registrations, so torch's own kernels (or an installation below) come back. The generated
// kernel runs aten's own kernel below autograd (at::<op> under AutoDispatchBelowADInplaceOrView).

#include <ATen/core/List.h>
#include <c10/core/DispatchKey.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>

namespace formulas::aten_override {

// Registers one operator's generated kernel for aten's operator of the same name at one key.
using Registrar = void (*)(torch::Library&, c10::DispatchKey);

struct State {
  std::mutex mutex;
  std::unordered_map<std::string, Registrar> registrars;         // by operator: "sin", "mul.Tensor"
  std::map<int64_t, std::unique_ptr<torch::Library>> installed;  // by installation handle
  int64_t next_handle = 1;
};

// One per loaded library (hidden: two packages' libraries loaded side by side keep their own),
// never destroyed (an installation left at exit is not taken back after the dispatcher is gone).
__attribute__((visibility("hidden"))) inline State& state() {
  static State* const shared = new State();
  return *shared;
}

// A module file's registrars, added when the library loads.
struct Registrars {
  Registrars(std::initializer_list<std::pair<const char*, Registrar>> entries) {
    State& shared = state();
    std::lock_guard<std::mutex> lock(shared.mutex);
    for (const auto& entry : entries) {
      shared.registrars.emplace(entry.first, entry.second);
    }
  }
};

// Registers the generated kernels of `ops` for aten's operators at each of `keys` ("AutogradCPU"...)
// in a new torch::Library; returns its handle for uninstall(). An operator this library does not
// compile is an error, and nothing stays registered.
inline int64_t install(c10::List<std::string> ops, c10::List<std::string> keys) {
  State& shared = state();
  std::lock_guard<std::mutex> lock(shared.mutex);
  auto library = std::make_unique<torch::Library>(torch::Library::IMPL, "aten", std::nullopt, __FILE__, __LINE__);
  for (const std::string& op : ops) {
    const auto found = shared.registrars.find(op);
    TORCH_CHECK(found != shared.registrars.end(), "aten::", op, ": this library has no generated kernel for it; ",
                "rebuild it from the package");
    for (const std::string& key : keys) {
      found->second(*library, c10::parseDispatchKey(key));
    }
  }
  const int64_t handle = shared.next_handle++;
  shared.installed.emplace(handle, std::move(library));
  return handle;
}

// Destroys installation `handle`'s Library (idempotent): its registrations are removed.
inline void uninstall(int64_t handle) {
  State& shared = state();
  std::unique_ptr<torch::Library> library;
  {
    std::lock_guard<std::mutex> lock(shared.mutex);
    const auto found = shared.installed.find(handle);
    if (found == shared.installed.end()) {
      return;
    }
    library = std::move(found->second);
    shared.installed.erase(found);
  }
}

}  // namespace formulas::aten_override
