// Readers of description values (values.h).
#include "core/values.h"

#include <cmath>

namespace fsm {

bool isInteger(double x) { return std::isfinite(x) && std::floor(x) == x; }

size_t sizeOf(const Napi::Value& v, const std::string& what, const Where& where) {
  const double x = v.IsNumber() ? v.As<Napi::Number>().DoubleValue() : -1;
  if (!isInteger(x) || x < 0) refuse(JsClass::TypeError, where, what + " must be a non-negative integer");
  return static_cast<size_t>(x);
}

Napi::Array arrayOf(const Napi::Value& v, const std::string& what, const Where& where) {
  if (!v.IsArray()) refuse(JsClass::TypeError, where, what + " must be an array");
  return v.As<Napi::Array>();
}

Napi::Object objectOf(const Napi::Value& v, const std::string& what, const Where& where) {
  if (!v.IsObject()) refuse(JsClass::TypeError, where, what + " must be an object");
  return v.As<Napi::Object>();
}

std::vector<int64_t> shapeOf(const Napi::Value& v, const std::string& what, const Where& where) {
  const std::string bad = what + ": shape must be an array of non-negative integers";
  if (!v.IsArray()) refuse(JsClass::TypeError, where, bad);
  Napi::Array a = v.As<Napi::Array>();
  std::vector<int64_t> shape;
  for (uint32_t i = 0; i < a.Length(); i++) {
    Napi::Value d = a.Get(i);
    if (!d.IsNumber() || d.As<Napi::Number>().DoubleValue() < 0) refuse(JsClass::TypeError, where, bad);
    shape.push_back(static_cast<int64_t>(d.As<Napi::Number>().DoubleValue()));
  }
  return shape;
}

Attrs attrsOf(const Napi::Value& v, const std::string& what, const Where& where) {
  Attrs attrs;
  if (v.IsUndefined() || v.IsNull()) return attrs;
  if (!v.IsObject()) refuse(JsClass::TypeError, where, what + ": attrs must be an object");
  Napi::Object o = v.As<Napi::Object>();
  Napi::Array keys = o.GetPropertyNames();
  for (uint32_t i = 0; i < keys.Length(); i++) {
    std::string k = keys.Get(i).As<Napi::String>().Utf8Value();
    Napi::Value x = o.Get(k);
    if (x.IsNumber()) attrs.numbers[k] = x.As<Napi::Number>().DoubleValue();
    else if (x.IsBoolean()) attrs.bools[k] = x.As<Napi::Boolean>().Value();
    else if (x.IsString()) attrs.strings[k] = x.As<Napi::String>().Utf8Value();
    else if (x.IsArray()) attrs.shapes[k] = shapeOf(x, what + ": attribute " + k, where);
    else refuse(JsClass::TypeError, where, what + ": attribute " + k + " must be a number, boolean, string or shape");
  }
  return attrs;
}

DType dtypeOf(const Napi::Value& v, const std::string& what, const Where& where) {
  DType dtype;
  if (!v.IsString() || !parseDType(v.As<Napi::String>().Utf8Value(), dtype)) {
    refuse(JsClass::TypeError, where, what + ": dtype must be \"f32\", \"i32\", \"bf16\" or \"f16\"");
  }
  return dtype;
}

}  // namespace fsm
