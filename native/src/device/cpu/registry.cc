// The CPU kernel table (registry.h): filled by static initializers when the addon loads, read-only after.
#include "device/cpu/registry.h"

#include <map>
#include <stdexcept>

namespace fsm {
namespace {

struct Table {
  std::map<std::string, KernelId> ids;
  std::vector<KernelFn> kernels;
  std::vector<FillsOutputs> fills;
};

Table& table() {
  static Table t;  // built by static initializers, read after module load
  return t;
}

}  // namespace

KernelRegistration::KernelRegistration(const char* op, KernelFn fn, FillsOutputs fills) {
  Table& t = table();
  if (!t.ids.emplace(op, static_cast<KernelId>(t.kernels.size())).second) throw std::logic_error(std::string("kernel registered twice: ") + op);
  t.kernels.push_back(std::move(fn));
  t.fills.push_back(fills);
}

KernelId findCpuKernel(const std::string& op) {
  auto it = table().ids.find(op);
  return it == table().ids.end() ? -1 : it->second;
}

const KernelFn& cpuKernel(KernelId id) { return table().kernels[static_cast<size_t>(id)]; }

bool cpuKernelFillsOutputs(KernelId id) { return table().fills[static_cast<size_t>(id)] == FillsOutputs::Yes; }

std::vector<std::string> cpuKernelNames() {
  std::vector<std::string> names;
  for (const auto& [name, id] : table().ids) names.push_back(name);
  return names;
}

}  // namespace fsm
