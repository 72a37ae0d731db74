// Moving values between JS and native tensors, shared by runKernel/timeKernel, NativeProgram and
// NativeCluster: shapes and attributes read from descriptions (each mistake a TypeError naming what is
// wrong), slot contents copied in and out, timings handed back.
#pragma once
#include <napi.h>

#include <string>
#include <vector>

#include "kernels/kernel.h"

namespace fsm {

/** A non-negative integer that fits a size (byte counts, offsets, indices); `what` names it in the error. */
size_t sizeOf(const Napi::Env& env, const Napi::Value& v, const std::string& what);

/** `v` as an array / object, or a TypeError naming `what`. */
Napi::Array arrayOf(const Napi::Env& env, const Napi::Value& v, const std::string& what);
Napi::Object objectOf(const Napi::Env& env, const Napi::Value& v, const std::string& what);

/** A slot {shape, dtype, offset} of an arena, every field checked: the offset a multiple of the element size and
 *  the bytes inside the arena (a RangeError naming `what` otherwise). */
Tensor slotOf(const Napi::Env& env, const Napi::Value& v, const std::string& what, uint8_t* arena, size_t arenaBytes);

/** An array of non-negative integers; `what` names the value in the error. */
std::vector<int64_t> shapeOf(const Napi::Env& env, const Napi::Value& v, const std::string& what);

/** {name: number | boolean | string | number[]} (undefined/null: none); `what` names the owner in errors. */
Attrs attrsOf(const Napi::Env& env, const Napi::Value& v, const std::string& what);

/** A slot's or operand's dtype: "f32", "i32", "bf16" or "f16" (anything else: a TypeError naming `what`). */
DType dtypeOf(const Napi::Env& env, const Napi::Value& v, const std::string& what);

/** Copies a Float32Array (f32), Int32Array (i32) or Uint16Array (the raw bits of bf16 or f16) into a tensor's
 *  storage (element type and length must match); `call` names the JS call in errors, e.g. "set(slot, data)". */
void copyIntoTensor(const Napi::Env& env, const Tensor& t, const Napi::Value& data, const std::string& call);

/** A copy of a tensor's storage as a Float32Array, Int32Array, or Uint16Array (bf16 and f16: raw bits). */
Napi::Value tensorCopy(const Napi::Env& env, const Tensor& t);

/** Timings as a Float64Array. */
Napi::Value timingsArray(const Napi::Env& env, const std::vector<double>& timings);

}  // namespace fsm
