// Typed arrays for tensors (js_values.h).
#include "js/js_values.h"

#include <cstring>

#include "core/failure.h"

namespace fsm {

Napi::TypedArray newTypedArray(Napi::Env env, DType dtype, size_t n, void*& data) {
  switch (dtype) {
    case DType::I32: {
      Napi::Int32Array a = Napi::Int32Array::New(env, n);
      data = a.Data();
      return a;
    }
    case DType::BF16:
    case DType::F16: {
      Napi::Uint16Array a = Napi::Uint16Array::New(env, n);
      data = a.Data();
      return a;
    }
    case DType::F32:
      break;
  }
  Napi::Float32Array a = Napi::Float32Array::New(env, n);
  data = a.Data();
  return a;
}

const void* bytesFor(const Tensor& t, const Napi::Value& data, const std::string& call) {
  if (!data.IsTypedArray()) refuse(JsClass::TypeError, {}, call + ": data must be a Float32Array, an Int32Array or a Uint16Array");
  Napi::TypedArray a = data.As<Napi::TypedArray>();
  const napi_typedarray_type type = a.TypedArrayType();
  const bool match = (type == napi_float32_array && t.dtype == DType::F32) || (type == napi_int32_array && t.dtype == DType::I32) ||
                     (type == napi_uint16_array && (t.dtype == DType::BF16 || t.dtype == DType::F16));
  if (!match) {
    const char* want = t.dtype == DType::F32 ? "Float32Array" : t.dtype == DType::I32 ? "Int32Array" : "Uint16Array";
    refuse(JsClass::TypeError, {}, call + ": the data's element type does not match the slot's (" + dtypeName(t.dtype) + ", a " + want + ")");
  }
  if (static_cast<int64_t>(a.ElementLength()) != t.numel()) refuse(JsClass::RangeError, {}, call + ": the data's length does not match the slot's");
  return static_cast<const uint8_t*>(a.ArrayBuffer().Data()) + a.ByteOffset();
}

Napi::Value timingsArray(Napi::Env env, const std::vector<double>& timings) {
  Napi::Float64Array a = Napi::Float64Array::New(env, timings.size());
  std::memcpy(a.Data(), timings.data(), timings.size() * sizeof(double));
  return a;
}

}  // namespace fsm
