// runKernel(op, inputs, attrs, outputs[, {device}]): inputs [{data: Float32Array|Int32Array|Uint16Array, shape,
// dtype?}], attrs {name: number|boolean|string|number[]}, outputs [{shape, dtype: "f32"|"i32"|"bf16"|"f16"}] →
// fresh zero-filled typed arrays the kernel wrote (Uint16Array, raw bits, for bf16 and f16). A Uint16Array
// operand must say its dtype ("bf16" or "f16"); for the others dtype is optional and must match the array.
// device "cpu" (default) runs on the calling thread over the JS arrays; "simt" and "cuda" run on a fresh device
// of that kind, the operands copied into its memory and the outputs back. Argument mistakes are
// TypeErrors/RangeErrors naming what is wrong; kernel failures are Errors; both carry fields.
#include "js/kernel_binding.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "core/failure.h"
#include "core/js_error.h"
#include "core/program.h"
#include "core/values.h"
#include "device/cpu/cpu_device.h"
#include "device/cpu/registry.h"
#include "device/create.h"
#include "device/gpu_kinds.h"
#include "js/js_values.h"

namespace fsm {
namespace {

/** A kernel call with its operands parsed and its outputs allocated (as JS typed arrays in `result`). */
struct Call {
  std::string op;
  KernelCall call;
  Napi::Array result;
};

Tensor inputOf(const Napi::Value& x, const std::string& what) {
  if (!x.IsObject()) refuse(JsClass::TypeError, {}, what + " must be {data, shape}");
  Napi::Object o = x.As<Napi::Object>();
  Tensor t;
  t.shape = shapeOf(o.Get("shape"), what);
  Napi::Value data = o.Get("data");
  const std::string arrays = what + ": data must be a Float32Array, an Int32Array or a Uint16Array";
  if (!data.IsTypedArray()) refuse(JsClass::TypeError, {}, arrays);
  Napi::TypedArray a = data.As<Napi::TypedArray>();
  const bool given = !o.Get("dtype").IsUndefined();
  const std::string needs = what + ": a Uint16Array operand needs dtype \"bf16\" or \"f16\"";
  switch (a.TypedArrayType()) {
    case napi_float32_array:
      t.dtype = DType::F32;
      break;
    case napi_int32_array:
      t.dtype = DType::I32;
      break;
    case napi_uint16_array:
      if (!given) refuse(JsClass::TypeError, {}, needs);
      t.dtype = dtypeOf(o.Get("dtype"), what);
      if (t.dtype != DType::BF16 && t.dtype != DType::F16) refuse(JsClass::TypeError, {}, needs);
      break;
    default:
      refuse(JsClass::TypeError, {}, arrays);
  }
  t.data = static_cast<uint8_t*>(a.ArrayBuffer().Data()) + a.ByteOffset();
  if (given && dtypeOf(o.Get("dtype"), what) != t.dtype) {
    refuse(JsClass::TypeError, {}, what + ": dtype \"" + o.Get("dtype").As<Napi::String>().Utf8Value() + "\" does not match its data");
  }
  if (static_cast<int64_t>(a.ElementLength()) != t.numel()) refuse(JsClass::RangeError, {}, what + ": data length does not match its shape");
  return t;
}

/** The device kind of a call's options object ({device: "cpu" | "simt" | "cuda"}), default cpu. */
std::string kindOf(const Napi::Value& options, const std::string& what) {
  if (options.IsUndefined()) return "cpu";
  Napi::Object o = objectOf(options, what + ": options");
  Napi::Value d = o.Get("device");
  if (d.IsUndefined()) return "cpu";
  if (!d.IsString()) refuse(JsClass::TypeError, {}, what + ": options.device must be \"cpu\", \"simt\" or \"cuda\"");
  return d.As<Napi::String>().Utf8Value();
}

Call prepare(const Napi::CallbackInfo& info, const char* usage) {
  Napi::Env env = info.Env();
  if (info.Length() < 4 || !info[0].IsString() || !info[1].IsArray() || !info[3].IsArray()) refuse(JsClass::TypeError, {}, usage);
  Call c;
  c.op = info[0].As<Napi::String>().Utf8Value();
  const std::string& op = c.op;
  c.call.kernel = hostDevice().resolve(op);
  Napi::Array ins = info[1].As<Napi::Array>();
  for (uint32_t i = 0; i < ins.Length(); i++) c.call.inputs.push_back(inputOf(ins.Get(i), "runKernel " + op + ": input " + std::to_string(i)));
  c.call.attrs = attrsOf(info[2], "runKernel " + op);
  Napi::Array outs = info[3].As<Napi::Array>();
  c.result = Napi::Array::New(env, outs.Length());
  for (uint32_t i = 0; i < outs.Length(); i++) {
    const std::string what = "runKernel " + op + ": output " + std::to_string(i);
    Napi::Object o = objectOf(outs.Get(i), what);
    Tensor t;
    t.shape = shapeOf(o.Get("shape"), what);
    t.dtype = o.Get("dtype").IsUndefined() || o.Get("dtype").IsNull() ? DType::F32 : dtypeOf(o.Get("dtype"), what);
    c.result.Set(i, newTypedArray(env, t.dtype, static_cast<size_t>(t.numel()), t.data));
    c.call.outputs.push_back(t);
  }
  return c;
}

[[noreturn]] void kernelFailed(const Call& c, const std::string& what) {
  Failure f = failureAt(FailureKind::Kernel, JsClass::Error, {}, "native kernel " + c.op + ": " + what);
  f.where.op = c.op;
  f.message = what;
  throw FailureError(f);
}

void invoke(Call& c) {
  try {
    hostDevice().run(kComputeStream, c.call);
  } catch (const std::exception& e) {
    kernelFailed(c, e.what());
  }
}

// The call on a fresh device of `kind`: every operand copied into one arena (256-byte aligned pieces, the
// outputs zero as the arena is), prepared and run as a program's instruction is, the outputs copied back.
void invokeOn(Call& c, const std::string& kind) {
  std::unique_ptr<Device> dev = createDevice(Plugin{kind, {}, "options.device"}, 0, std::nullopt, 0);
  KernelCall dc = c.call;
  dc.kernel = dev->resolve(c.op);
  size_t total = 0;
  std::vector<size_t> at;
  auto place = [&](const Tensor& t) {
    at.push_back(total);
    total += (t.bytes() + 255) / 256 * 256;
  };
  for (const Tensor& t : dc.inputs) place(t);
  for (const Tensor& t : dc.outputs) place(t);
  Arena arena = dev->allocate(total);
  struct Release {
    Device& d;
    Arena& a;
    ~Release() { d.release(a); }
  } release{*dev, arena};
  size_t k = 0;
  for (Tensor& t : dc.inputs) {
    t.data = arena.base + at[k++];
    dev->copyIn(kComputeStream, t.data, c.call.inputs[&t - dc.inputs.data()].data, t.bytes());
  }
  for (Tensor& t : dc.outputs) t.data = arena.base + at[k++];
  dc.zero.assign(dc.outputs.size(), 0);
  Device::Preparation prep;
  prep.calls = {&dc};
  dev->prepare(prep);
  dev->beginRun(false);
  try {
    dev->run(kComputeStream, dc);
  } catch (const std::exception& e) {
    dev->endRun();
    kernelFailed(c, e.what());
  }
  dev->endRun();
  if (std::optional<DeviceFault> f = dev->takeFault()) kernelFailed(c, f->message);
  for (size_t i = 0; i < dc.outputs.size(); i++) dev->copyOut(kComputeStream, c.call.outputs[i].data, dc.outputs[i].data, dc.outputs[i].bytes());
}

}  // namespace

Napi::Value runKernel(const Napi::CallbackInfo& info) {
  return atBoundary(info.Env(), [&]() -> Napi::Value {
    Call c = prepare(info, "runKernel(op: string, inputs: {data, shape}[], attrs: object, outputs: {shape, dtype}[], options?: {device})");
    const std::string kind = kindOf(info[4], "runKernel " + c.op);
    if (kind != "cpu") {
      invokeOn(c, kind);
      return c.result;
    }
    // Fresh typed arrays are zero-filled already; nothing is zeroed twice.
    c.call.zero.assign(c.call.outputs.size(), 0);
    invoke(c);
    return c.result;
  });
}

// timeKernel(op, inputs, attrs, outputs, repeats) → median seconds of `repeats` runs after a warm-up, each as a
// program runs an instruction (outputs zeroed, then the kernel: Device::run), timed natively: no JS call
// overhead is counted (what `fsm calibrate` measures).
Napi::Value timeKernel(const Napi::CallbackInfo& info) {
  return atBoundary(info.Env(), [&]() -> Napi::Value {
    Call c = prepare(info, "timeKernel(op, inputs, attrs, outputs, repeats)");
    if (info.Length() != 5 || !info[4].IsNumber() || info[4].As<Napi::Number>().Int32Value() < 1) {
      refuse(JsClass::RangeError, {}, "timeKernel: repeats must be a positive integer");
    }
    const int repeats = info[4].As<Napi::Number>().Int32Value();
    c.call.zero = outputsToZero(c.call.inputs, c.call.outputs, false);
    std::vector<double> times;
    for (int r = 0; r <= repeats; r++) {
      const auto t0 = std::chrono::steady_clock::now();
      invoke(c);
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (r > 0) times.push_back(s);  // the first run warms caches up
    }
    std::sort(times.begin(), times.end());
    return Napi::Number::New(info.Env(), times[times.size() / 2]);
  });
}

// deviceReservedBytes(kind, calls: [{op, inputs: [{shape, dtype}], outputs: [{shape, dtype}], attrs, stream?}]): the bytes
// a device of kind "simt" or "cuda" reserves besides its arena for a program with these kernel calls — what
// compile adds to a GPU plan's predicted memory, from the kernels' own scratch formulas.
Napi::Value deviceReservedBytes(const Napi::CallbackInfo& info) {
  return atBoundary(info.Env(), [&]() -> Napi::Value {
    const char* usage = "deviceReservedBytes(kind: \"simt\" | \"cuda\", calls: {op, inputs, outputs, attrs}[])";
    if (info.Length() != 2 || !info[0].IsString() || !info[1].IsArray()) refuse(JsClass::TypeError, {}, usage);
    const std::string kind = info[0].As<Napi::String>().Utf8Value();
    Napi::Array list = info[1].As<Napi::Array>();
    std::vector<OpCall> calls;
    auto tensors = [](const Napi::Value& v, const std::string& what) {
      std::vector<Tensor> out;
      if (!v.IsArray()) refuse(JsClass::TypeError, {}, what + " must be an array");
      Napi::Array a = v.As<Napi::Array>();
      for (uint32_t i = 0; i < a.Length(); i++) {
        Napi::Object o = objectOf(a.Get(i), what);
        Tensor t;
        t.shape = shapeOf(o.Get("shape"), what);
        t.dtype = dtypeOf(o.Get("dtype"), what);
        out.push_back(t);
      }
      return out;
    };
    for (uint32_t i = 0; i < list.Length(); i++) {
      const std::string what = "deviceReservedBytes: call " + std::to_string(i);
      Napi::Object o = objectOf(list.Get(i), what);
      if (!o.Get("op").IsString()) refuse(JsClass::TypeError, {}, what + ": op must be a string");
      OpCall c;
      c.op = o.Get("op").As<Napi::String>().Utf8Value();
      c.call.inputs = tensors(o.Get("inputs"), what + ": inputs");
      c.call.outputs = tensors(o.Get("outputs"), what + ": outputs");
      c.call.attrs = attrsOf(o.Get("attrs"), what);
      c.call.stream = o.Get("stream").IsNumber() && o.Get("stream").As<Napi::Number>().Int32Value() == kCommStream ? kCommStream : kComputeStream;
      calls.push_back(std::move(c));
    }
    size_t bytes = 0;
    if (kind == "simt") bytes = simt::reservedBytesFor(calls);
#ifdef FSM_HAVE_CUDA
    else if (kind == "cuda") bytes = cuda::reservedBytesFor(calls);
#endif
    else refuse(JsClass::TypeError, {}, std::string(usage) + ": kind must be simt or cuda (a cuda build)");
    return Napi::Number::New(info.Env(), static_cast<double>(bytes));
  });
}

// kernelNames([kind]): the ops a device kind has kernels for (default cpu); [] for a kind this addon lacks.
Napi::Value kernelNames(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const std::string kind = info.Length() > 0 && info[0].IsString() ? info[0].As<Napi::String>().Utf8Value() : "cpu";
  std::vector<std::string> names;
  if (kind == "cpu") names = cpuKernelNames();
  else if (kind == "simt") names = simt::kernelOps();
#ifdef FSM_HAVE_CUDA
  else if (kind == "cuda") names = cuda::kernelOps();
#endif
  Napi::Array out = Napi::Array::New(env, names.size());
  for (size_t i = 0; i < names.size(); i++) out.Set(static_cast<uint32_t>(i), names[i]);
  return out;
}

}  // namespace fsm
