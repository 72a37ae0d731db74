// The CUDA kernel table of this build (kernel.h): filled by the kernel files' static initializers when the
// addon loads, read-only after; and the operand helpers every launcher uses.
#include <map>

#include "device/cuda/kernel.h"

namespace fsm {
namespace FSM_CUDA_NS {
namespace {

struct Table {
  std::map<std::string, KernelId> ids;
  std::vector<KernelEntry> kernels;
};

Table& table() {
  static Table t;
  return t;
}

}  // namespace

KernelRegistration::KernelRegistration(const char* op, LaunchFn launch, WorkspaceFn workspace, UsesBlas blas, FillsOutputs fills) {
  Table& t = table();
  if (!t.ids.emplace(op, static_cast<KernelId>(t.kernels.size())).second) throw std::logic_error(std::string("CUDA kernel registered twice: ") + op);
  t.kernels.push_back({launch, workspace, blas, fills});
}

KernelId findKernel(const std::string& op) {
  auto it = table().ids.find(op);
  return it == table().ids.end() ? -1 : it->second;
}

const KernelEntry& kernelEntry(KernelId id) { return table().kernels[static_cast<size_t>(id)]; }

std::vector<std::string> kernelNames() {
  std::vector<std::string> names;
  for (const auto& [name, id] : table().ids) names.push_back(name);
  return names;
}

int floatTypeOf(const Tensor& t, const char* what) {
  switch (t.dtype) {
    case DType::F32: return kF32;
    case DType::BF16: return kBF16;
    case DType::F16: return kF16;
    case DType::I32: break;
  }
  throw std::invalid_argument(std::string(what) + " must be a float tensor (f32, bf16 or f16), got i32");
}

unsigned gridDimension(int64_t n, const char* what, int64_t limit) {
  if (n < 1 || n > limit) throw std::invalid_argument(std::string(what) + ": " + std::to_string(n) + " is outside a CUDA grid's [1, " + std::to_string(limit) + "]");
  return static_cast<unsigned>(n);
}

}  // namespace FSM_CUDA_NS
}  // namespace fsm
