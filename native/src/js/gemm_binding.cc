// The JS face of sgemm: argument validation shared by sgemm and sgemmAsync, and the synchronous binding.
#include "js/gemm_binding.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "device/cpu/gemm.h"

namespace fsm {

namespace {

[[noreturn]] void throwType(Napi::Env env, const std::string& message) {
  throw Napi::TypeError::New(env, message);
}

[[noreturn]] void throwRange(Napi::Env env, const std::string& message) {
  throw Napi::RangeError::New(env, message);
}

bool boolArg(const Napi::CallbackInfo& info, size_t index, const char* fn, const char* name) {
  if (!info[index].IsBoolean()) throwType(info.Env(), std::string(fn) + ": " + name + " must be a boolean");
  return info[index].As<Napi::Boolean>().Value();
}

float floatArg(const Napi::CallbackInfo& info, size_t index, const char* fn, const char* name) {
  if (!info[index].IsNumber()) throwType(info.Env(), std::string(fn) + ": " + name + " must be a number");
  return info[index].As<Napi::Number>().FloatValue();
}

Napi::Float32Array matrixArg(const Napi::CallbackInfo& info, size_t index, const char* fn, const char* name,
                             int rows, int cols) {
  const Napi::Value v = info[index];
  if (!v.IsTypedArray() || v.As<Napi::TypedArray>().TypedArrayType() != napi_float32_array) {
    throwType(info.Env(), std::string(fn) + ": " + name + " must be a Float32Array");
  }
  Napi::Float32Array a = v.As<Napi::Float32Array>();
  const uint64_t want = static_cast<uint64_t>(rows) * static_cast<uint64_t>(cols);
  if (a.ElementLength() != want) {
    throwRange(info.Env(), std::string(fn) + ": " + name + " has " + std::to_string(a.ElementLength()) +
                               " elements, expected " + std::to_string(rows) + " x " + std::to_string(cols) +
                               " = " + std::to_string(want));
  }
  return a;
}

bool overlaps(const Napi::Float32Array& x, const Napi::Float32Array& y) {
  const auto* x0 = reinterpret_cast<const uint8_t*>(x.Data());
  const auto* y0 = reinterpret_cast<const uint8_t*>(y.Data());
  return x.ByteLength() > 0 && y.ByteLength() > 0 && x0 < y0 + y.ByteLength() && y0 < x0 + x.ByteLength();
}

}  // namespace

int intArg(const Napi::CallbackInfo& info, size_t index, const char* fn, const char* name, int min, int max) {
  if (!info[index].IsNumber()) throwType(info.Env(), std::string(fn) + ": " + name + " must be a number");
  const double d = info[index].As<Napi::Number>().DoubleValue();
  if (!std::isfinite(d) || d != std::floor(d) || d < min || d > max) {
    throwRange(info.Env(), std::string(fn) + ": " + name + " must be an integer in [" + std::to_string(min) +
                               ", " + std::to_string(max) + "], got " + info[index].ToString().Utf8Value());
  }
  return static_cast<int>(d);
}

GemmArgs parseGemmArgs(const Napi::CallbackInfo& info, const char* fn) {
  constexpr int kMaxDim = std::numeric_limits<int>::max();
  GemmArgs g;
  g.transA = boolArg(info, 0, fn, "transA");
  g.transB = boolArg(info, 1, fn, "transB");
  g.M = intArg(info, 2, fn, "M", 0, kMaxDim);
  g.N = intArg(info, 3, fn, "N", 0, kMaxDim);
  g.K = intArg(info, 4, fn, "K", 0, kMaxDim);
  g.alpha = floatArg(info, 5, fn, "alpha");
  g.A = g.transA ? matrixArg(info, 6, fn, "A", g.K, g.M) : matrixArg(info, 6, fn, "A", g.M, g.K);
  g.B = g.transB ? matrixArg(info, 7, fn, "B", g.N, g.K) : matrixArg(info, 7, fn, "B", g.K, g.N);
  g.beta = floatArg(info, 8, fn, "beta");
  g.C = matrixArg(info, 9, fn, "C", g.M, g.N);
  if (overlaps(g.C, g.A) || overlaps(g.C, g.B)) {
    throwRange(info.Env(), std::string(fn) + ": C must not share memory with A or B");
  }
  return g;
}

Napi::Value sgemmSync(const Napi::CallbackInfo& info) {
  GemmArgs g = parseGemmArgs(info, "sgemm");
  sgemm(g.transA, g.transB, g.M, g.N, g.K, g.alpha, g.A.Data(), g.lda(), g.B.Data(), g.ldb(), g.beta, g.C.Data(),
        g.ldc());
  return info.Env().Undefined();
}

}  // namespace fsm
