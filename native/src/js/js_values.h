// Moving data between JS and native tensors: typed arrays for a dtype, a typed array checked against the slot
// it is copied into, timings handed back. (Reading descriptions is core/values.h's.)
#pragma once
#include <napi.h>

#include <string>
#include <vector>

#include "core/tensor.h"

namespace fsm {

/** A fresh zero-filled typed array of n elements for `dtype` (Float32Array, Int32Array, or Uint16Array of raw
 *  bits for bf16/f16); `data` is set to its storage. */
Napi::TypedArray newTypedArray(Napi::Env env, DType dtype, size_t n, void*& data);

/** The bytes of `data`, checked against tensor `t`: a Float32Array (f32), Int32Array (i32) or Uint16Array (the
 *  raw bits of bf16 or f16) of exactly its length; `call` names the JS call in errors, e.g. "set(device, slot,
 *  data)". Throws FailureError (description, TypeError / RangeError). */
const void* bytesFor(const Tensor& t, const Napi::Value& data, const std::string& call);

/** Timings as a Float64Array. */
Napi::Value timingsArray(Napi::Env env, const std::vector<double>& timings);

}  // namespace fsm
