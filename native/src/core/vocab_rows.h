// The rows of an embedding table a device holds: all of them, or under tensor parallelism (the pass's `parts`,
// and `tensor_rank`, which lowering adds per device) the vocabulary-parallel rank's rows [first, first + num) of
// the whole table's num · parts — as the CPU and CUDA lookup kernels both read it. Ids of other ranks' rows look
// up zeros and add to no row of this device.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace fsm {

struct VocabRows {
  int64_t first = 0;  // the first row of the whole table held here
  int64_t num = 0;    // rows held here
  int64_t whole = 0;  // rows of the whole table (valid ids are below it)
};

/** A table of `num` rows held on a device with these attributes. */
inline VocabRows vocabRows(const Attrs& attrs, int64_t num) {
  const int64_t parts = attrs.has("parts") ? static_cast<int64_t>(attrs.number("parts")) : 1;
  const int64_t rank = attrs.has("tensor_rank") ? static_cast<int64_t>(attrs.number("tensor_rank")) : 0;
  return {parts > 1 ? rank * num : 0, num, num * parts};
}

}  // namespace fsm
