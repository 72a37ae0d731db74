// Reading a description's values out of JS (sizes, arrays, objects, shapes, dtypes, attributes): the one
// vocabulary of the description parser (parse.h) and of runKernel. Each mistake is a description Failure of the
// JS class it has always had (TypeError), its text naming `what`, its fields saying `where`.
#pragma once
#include <napi.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/failure.h"
#include "core/tensor.h"

namespace fsm {

bool isInteger(double x);

/** A non-negative integer that fits a size (byte counts, offsets, indices). */
size_t sizeOf(const Napi::Value& v, const std::string& what, const Where& where = {});

/** `v` as an array / object. */
Napi::Array arrayOf(const Napi::Value& v, const std::string& what, const Where& where = {});
Napi::Object objectOf(const Napi::Value& v, const std::string& what, const Where& where = {});

/** An array of non-negative integers. */
std::vector<int64_t> shapeOf(const Napi::Value& v, const std::string& what, const Where& where = {});

/** {name: number | boolean | string | number[]} (undefined/null: none); `what` names the owner. */
Attrs attrsOf(const Napi::Value& v, const std::string& what, const Where& where = {});

/** "f32", "i32", "bf16" or "f16". */
DType dtypeOf(const Napi::Value& v, const std::string& what, const Where& where = {});

}  // namespace fsm
