// js_values.h: shapes and attributes from JS values.
#include "js_values.h"

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

}  // namespace fsm
