// Reading kernel descriptions from JS values, shared by runKernel/timeKernel and NativeProgram: shapes and
// attributes, each mistake a TypeError naming what is wrong.
#pragma once
#include <napi.h>

#include <string>
#include <vector>

#include "kernels/kernel.h"

namespace fsm {

/** An array of non-negative integers; `what` names the value in the error. */
std::vector<int64_t> shapeOf(const Napi::Env& env, const Napi::Value& v, const std::string& what);

/** {name: number | boolean | string | number[]} (undefined/null: none); `what` names the owner in errors. */
Attrs attrsOf(const Napi::Env& env, const Napi::Value& v, const std::string& what);

}  // namespace fsm
