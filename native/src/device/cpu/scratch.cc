// Kernel scratch (scratch.h): buffers that only grow.
#include "device/cpu/scratch.h"

#include <cstdlib>
#include <new>
#include <stdexcept>

namespace fsm {

KernelScratch::~KernelScratch() {
  for (void* p : data_) std::free(p);
}

void* KernelScratch::get(int slot, size_t bytes) {
  if (slot < 0 || slot >= kSlots) throw std::logic_error("kernel scratch slot out of range");
  const size_t rounded = (bytes + 63) / 64 * 64;
  if (rounded > bytes_[slot]) {
    std::free(data_[slot]);  // the old one first: peak memory is the new size, not both
    data_[slot] = nullptr;
    bytes_[slot] = 0;
    data_[slot] = std::aligned_alloc(64, rounded);
    if (data_[slot] == nullptr) throw std::bad_alloc();
    bytes_[slot] = rounded;
  }
  return data_[slot];
}

namespace {
thread_local KernelScratch* current = nullptr;
thread_local KernelScratch own;  // the thread's, when nothing is current
}  // namespace

ScopedKernelScratch::ScopedKernelScratch(KernelScratch* s) : previous_(current) { current = s; }

ScopedKernelScratch::~ScopedKernelScratch() { current = previous_; }

void* scratchBytes(int slot, size_t bytes) { return (current ? *current : own).get(slot, bytes); }

}  // namespace fsm
