// runKernel(op, inputs, attrs, outputs): inputs [{data: Float32Array|Int32Array|Uint16Array, shape, dtype?}],
// attrs {name: number|boolean|string|number[]}, outputs [{shape, dtype: "f32"|"i32"|"bf16"|"f16"}] → fresh
// zero-filled typed arrays the kernel wrote (Uint16Array, raw bits, for bf16 and f16). A Uint16Array operand
// must say its dtype ("bf16" or "f16"); for the others dtype is optional and must match the array. Argument mistakes are TypeErrors/RangeErrors naming what is wrong; kernel failures are Errors.
#include "kernel_binding.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "js_values.h"
#include "kernels/kernel.h"

namespace fsm {
namespace {

/** A kernel call with its operands parsed and its outputs allocated (as JS typed arrays in `result`). */
struct Call {
  std::string op;
  KernelFn fn;
  std::vector<Tensor> inputs;
  std::vector<Tensor> outputs;
  Attrs attrs;
  Napi::Array result;
};

Call prepare(const Napi::CallbackInfo& info, const char* usage) {
  Napi::Env env = info.Env();
  if (info.Length() < 4 || !info[0].IsString() || !info[1].IsArray() || !info[3].IsArray()) throw Napi::TypeError::New(env, usage);
  Call call;
  call.op = info[0].As<Napi::String>().Utf8Value();
  const std::string& op = call.op;
  auto it = kernelRegistry().find(op);
  if (it == kernelRegistry().end()) throw Napi::Error::New(env, "not implemented: native kernel for op '" + op + "'");
  call.fn = it->second;

  Napi::Array ins = info[1].As<Napi::Array>();
  for (uint32_t i = 0; i < ins.Length(); i++) {
    const std::string what = "runKernel " + op + ": input " + std::to_string(i);
    Napi::Value x = ins.Get(i);
    if (!x.IsObject()) throw Napi::TypeError::New(env, what + " must be {data, shape}");
    Napi::Object o = x.As<Napi::Object>();
    Tensor t;
    t.shape = shapeOf(env, o.Get("shape"), what);
    Napi::Value data = o.Get("data");
    if (!data.IsTypedArray()) throw Napi::TypeError::New(env, what + ": data must be a Float32Array, an Int32Array or a Uint16Array");
    Napi::TypedArray a = data.As<Napi::TypedArray>();
    const bool given = !o.Get("dtype").IsUndefined();
    switch (a.TypedArrayType()) {
      case napi_float32_array:
        t.dtype = DType::F32;
        t.data = a.As<Napi::Float32Array>().Data();
        break;
      case napi_int32_array:
        t.dtype = DType::I32;
        t.data = a.As<Napi::Int32Array>().Data();
        break;
      case napi_uint16_array:
        if (!given) throw Napi::TypeError::New(env, what + ": a Uint16Array operand needs dtype \"bf16\" or \"f16\"");
        t.dtype = dtypeOf(env, o.Get("dtype"), what);
        if (t.dtype != DType::BF16 && t.dtype != DType::F16) throw Napi::TypeError::New(env, what + ": a Uint16Array operand needs dtype \"bf16\" or \"f16\"");
        t.data = a.As<Napi::Uint16Array>().Data();
        break;
      default:
        throw Napi::TypeError::New(env, what + ": data must be a Float32Array, an Int32Array or a Uint16Array");
    }
    if (given && dtypeOf(env, o.Get("dtype"), what) != t.dtype) {
      throw Napi::TypeError::New(env, what + ": dtype \"" + o.Get("dtype").As<Napi::String>().Utf8Value() + "\" does not match its data");
    }
    if (static_cast<int64_t>(a.ElementLength()) != t.numel()) throw Napi::RangeError::New(env, what + ": data length does not match its shape");
    call.inputs.push_back(t);
  }
  call.attrs = attrsOf(env, info[2], "runKernel " + op);

  Napi::Array outs = info[3].As<Napi::Array>();
  call.result = Napi::Array::New(env, outs.Length());
  for (uint32_t i = 0; i < outs.Length(); i++) {
    const std::string what = "runKernel " + op + ": output " + std::to_string(i);
    Napi::Object o = outs.Get(i).As<Napi::Object>();
    Tensor t;
    t.shape = shapeOf(env, o.Get("shape"), what);
    t.dtype = o.Get("dtype").IsUndefined() || o.Get("dtype").IsNull() ? DType::F32 : dtypeOf(env, o.Get("dtype"), what);
    const size_t n = static_cast<size_t>(t.numel());
    Napi::TypedArray a;
    switch (t.dtype) {
      case DType::I32: {
        Napi::Int32Array b = Napi::Int32Array::New(env, n);
        t.data = b.Data();
        a = b;
        break;
      }
      case DType::BF16:
      case DType::F16: {
        Napi::Uint16Array b = Napi::Uint16Array::New(env, n);
        t.data = b.Data();
        a = b;
        break;
      }
      case DType::F32: {
        Napi::Float32Array b = Napi::Float32Array::New(env, n);
        t.data = b.Data();
        a = b;
        break;
      }
    }
    call.result.Set(i, a);
    call.outputs.push_back(t);
  }
  return call;
}

void invoke(const Napi::Env& env, Call& call) {
  try {
    call.fn(call.inputs, call.outputs, call.attrs);
  } catch (const std::exception& e) {
    throw Napi::Error::New(env, "native kernel " + call.op + ": " + e.what());
  }
}

}  // namespace

Napi::Value runKernel(const Napi::CallbackInfo& info) {
  Call call = prepare(info, "runKernel(op: string, inputs: {data, shape}[], attrs: object, outputs: {shape, dtype}[])");
  invoke(info.Env(), call);
  return call.result;
}

// timeKernel(op, inputs, attrs, outputs, repeats) → median seconds of `repeats` runs after a warm-up, each as a
// step program runs an instruction (outputs zeroed, then the kernel), timed natively: no JS call overhead is
// counted (what `fsm calibrate` measures).
Napi::Value timeKernel(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Call call = prepare(info, "timeKernel(op, inputs, attrs, outputs, repeats)");
  if (info.Length() != 5 || !info[4].IsNumber() || info[4].As<Napi::Number>().Int32Value() < 1) throw Napi::RangeError::New(env, "timeKernel: repeats must be a positive integer");
  const int repeats = info[4].As<Napi::Number>().Int32Value();
  std::vector<double> times;
  for (int r = 0; r <= repeats; r++) {
    const auto t0 = std::chrono::steady_clock::now();
    for (Tensor& t : call.outputs) std::memset(t.data, 0, t.bytes());
    invoke(env, call);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (r > 0) times.push_back(s);  // the first run warms caches up
  }
  std::sort(times.begin(), times.end());
  return Napi::Number::New(env, times[times.size() / 2]);
}

Napi::Value kernelNames(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Napi::Array names = Napi::Array::New(env);
  uint32_t i = 0;
  for (const auto& [name, fn] : kernelRegistry()) names.Set(i++, name);
  return names;
}

}  // namespace fsm
