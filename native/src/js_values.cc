// js_values.h: sizes, arrays, objects, slots, shapes and attributes from JS values.
#include "js_values.h"

#include <cmath>
#include <cstring>

namespace fsm {

std::vector<int64_t> shapeOf(const Napi::Env& env, const Napi::Value& v, const std::string& what) {
  if (!v.IsArray()) throw Napi::TypeError::New(env, what + ": shape must be an array of non-negative integers");
  Napi::Array a = v.As<Napi::Array>();
  std::vector<int64_t> shape;
  for (uint32_t i = 0; i < a.Length(); i++) {
    Napi::Value d = a.Get(i);
    if (!d.IsNumber() || d.As<Napi::Number>().DoubleValue() < 0) throw Napi::TypeError::New(env, what + ": shape must be an array of non-negative integers");
    shape.push_back(static_cast<int64_t>(d.As<Napi::Number>().DoubleValue()));
  }
  return shape;
}

Attrs attrsOf(const Napi::Env& env, const Napi::Value& v, const std::string& what) {
  Attrs attrs;
  if (v.IsUndefined() || v.IsNull()) return attrs;
  if (!v.IsObject()) throw Napi::TypeError::New(env, what + ": attrs must be an object");
  Napi::Object o = v.As<Napi::Object>();
  Napi::Array keys = o.GetPropertyNames();
  for (uint32_t i = 0; i < keys.Length(); i++) {
    std::string k = keys.Get(i).As<Napi::String>().Utf8Value();
    Napi::Value x = o.Get(k);
    if (x.IsNumber()) attrs.numbers[k] = x.As<Napi::Number>().DoubleValue();
    else if (x.IsBoolean()) attrs.bools[k] = x.As<Napi::Boolean>().Value();
    else if (x.IsString()) attrs.strings[k] = x.As<Napi::String>().Utf8Value();
    else if (x.IsArray()) attrs.shapes[k] = shapeOf(env, x, what + ": attribute " + k);
    else throw Napi::TypeError::New(env, what + ": attribute " + k + " must be a number, boolean, string or shape");
  }
  return attrs;
}

DType dtypeOf(const Napi::Env& env, const Napi::Value& v, const std::string& what) {
  DType dtype;
  if (!v.IsString() || !parseDType(v.As<Napi::String>().Utf8Value(), dtype)) {
    throw Napi::TypeError::New(env, what + ": dtype must be \"f32\", \"i32\", \"bf16\" or \"f16\"");
  }
  return dtype;
}

void copyIntoTensor(const Napi::Env& env, const Tensor& t, const Napi::Value& data, const std::string& call) {
  if (!data.IsTypedArray()) throw Napi::TypeError::New(env, call + ": data must be a Float32Array, an Int32Array or a Uint16Array");
  Napi::TypedArray a = data.As<Napi::TypedArray>();
  const napi_typedarray_type type = a.TypedArrayType();
  const bool match = (type == napi_float32_array && t.dtype == DType::F32) || (type == napi_int32_array && t.dtype == DType::I32) ||
                     (type == napi_uint16_array && (t.dtype == DType::BF16 || t.dtype == DType::F16));
  if (!match) {
    const char* want = t.dtype == DType::F32 ? "Float32Array" : t.dtype == DType::I32 ? "Int32Array" : "Uint16Array";
    throw Napi::TypeError::New(env, call + ": the data's element type does not match the slot's (" + dtypeName(t.dtype) + ", a " + want + ")");
  }
  if (static_cast<int64_t>(a.ElementLength()) != t.numel()) throw Napi::RangeError::New(env, call + ": the data's length does not match the slot's");
  std::memcpy(t.data, static_cast<uint8_t*>(a.ArrayBuffer().Data()) + a.ByteOffset(), a.ByteLength());
}

Napi::Value tensorCopy(const Napi::Env& env, const Tensor& t) {
  const size_t n = static_cast<size_t>(t.numel());
  if (t.dtype == DType::I32) {
    Napi::Int32Array a = Napi::Int32Array::New(env, n);
    std::memcpy(a.Data(), t.data, t.bytes());
    return a;
  }
  if (t.dtype == DType::BF16 || t.dtype == DType::F16) {
    Napi::Uint16Array a = Napi::Uint16Array::New(env, n);
    std::memcpy(a.Data(), t.data, t.bytes());
    return a;
  }
  Napi::Float32Array a = Napi::Float32Array::New(env, n);
  std::memcpy(a.Data(), t.data, t.bytes());
  return a;
}

Napi::Value timingsArray(const Napi::Env& env, const std::vector<double>& timings) {
  Napi::Float64Array a = Napi::Float64Array::New(env, timings.size());
  std::memcpy(a.Data(), timings.data(), timings.size() * sizeof(double));
  return a;
}

// A non-negative integer that fits a size (byte counts, offsets, indices).
size_t sizeOf(const Napi::Env& env, const Napi::Value& v, const std::string& what) {
  const double x = v.IsNumber() ? v.As<Napi::Number>().DoubleValue() : -1;
  if (!std::isfinite(x) || std::floor(x) != x || x < 0) {
    throw Napi::TypeError::New(env, what + " must be a non-negative integer");
  }
  return static_cast<size_t>(v.As<Napi::Number>().DoubleValue());
}

Napi::Array arrayOf(const Napi::Env& env, const Napi::Value& v, const std::string& what) {
  if (!v.IsArray()) throw Napi::TypeError::New(env, what + " must be an array");
  return v.As<Napi::Array>();
}

Napi::Object objectOf(const Napi::Env& env, const Napi::Value& v, const std::string& what) {
  if (!v.IsObject()) throw Napi::TypeError::New(env, what + " must be an object");
  return v.As<Napi::Object>();
}

Tensor slotOf(const Napi::Env& env, const Napi::Value& v, const std::string& what, uint8_t* arena, size_t arenaBytes) {
  Napi::Object s = objectOf(env, v, what);
  Tensor t;
  t.shape = shapeOf(env, s.Get("shape"), what);
  t.dtype = dtypeOf(env, s.Get("dtype"), what);
  const size_t offset = sizeOf(env, s.Get("offset"), what + ": offset");
  const size_t bytes = t.bytes(), align = elementBytes(t.dtype);
  if (offset % align != 0) {
    throw Napi::RangeError::New(env, what + ": offset " + std::to_string(offset) + " is not a multiple of " + std::to_string(align) +
                                         " (the size of a " + dtypeName(t.dtype) + " element)");
  }
  if (offset > arenaBytes || bytes > arenaBytes - offset) {
    throw Napi::RangeError::New(env, what + " (bytes " + std::to_string(offset) + ".." + std::to_string(offset + bytes) +
                                         ") lies outside the arena of " + std::to_string(arenaBytes) + " bytes");
  }
  t.data = arena + offset;
  return t;
}

}  // namespace fsm
