// buildInfo(): how this addon was built (BLAS kind, Node-API version, compiler) and the host's thread count.
#include "js/build_info.h"

#include <string>
#include <thread>

#include "core/failure.h"
#include "core/js_error.h"
#include "device/cpu/gemm.h"
#include "device/gpu_kinds.h"
#ifdef FSM_HAVE_MPI
#include "comm/mpi/mpi_world.h"
#endif

namespace fsm {

namespace {

std::string compilerName() {
#if defined(__clang__)
  return std::string("clang ") + __clang_version__;
#elif defined(__GNUC__)
  return std::string("gcc ") + __VERSION__;
#elif defined(_MSC_VER)
  return "msvc " + std::to_string(_MSC_FULL_VER);
#else
  return "unknown";
#endif
}

}  // namespace

Napi::Value buildInfo(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Napi::Object out = Napi::Object::New(env);
  out.Set("blas", blasKind());
  out.Set("napiVersion", NAPI_VERSION);
  out.Set("compiler", compilerName());
  // 0 when the standard library cannot tell; reported as is rather than guessed.
  out.Set("threads", std::thread::hardware_concurrency());
  // The MPI library the mpi communicator runs on (null: not built); MPI need not be started to say.
#ifdef FSM_HAVE_MPI
  out.Set("mpi", mpi::libraryVersion());
#else
  out.Set("mpi", env.Null());
#endif
  // The cuda device kind's build ("nvcc 13.0.88, sm_75, sm_90"), or null when nvcc was not found.
#ifdef FSM_HAVE_CUDA
  out.Set("cuda", FSM_CUDA_DESCRIPTION);
#else
  out.Set("cuda", env.Null());
#endif
  return out;
}

namespace {

Napi::Value describe(Napi::Env env, const GpuKindInfo& k) {
  Napi::Object out = Napi::Object::New(env);
  out.Set("devices", k.devices);
  out.Set("none", k.none);
  out.Set("driverVersion", k.driverVersion);
  out.Set("runtimeVersion", k.runtimeVersion);
  Napi::Array gpus = Napi::Array::New(env, k.gpus.size());
  for (size_t i = 0; i < k.gpus.size(); i++) {
    Napi::Object g = Napi::Object::New(env);
    g.Set("name", k.gpus[i].name);
    g.Set("memoryBytes", static_cast<double>(k.gpus[i].memoryBytes));
    g.Set("multiprocessors", k.gpus[i].multiprocessors);
    g.Set("major", k.gpus[i].major);
    g.Set("minor", k.gpus[i].minor);
    gpus.Set(static_cast<uint32_t>(i), g);
  }
  out.Set("gpus", gpus);
  return out;
}

}  // namespace

Napi::Value gpuKind(const Napi::CallbackInfo& info) {
  return atBoundary(info.Env(), [&]() -> Napi::Value {
    const std::string kind = info.Length() > 0 && info[0].IsString() ? info[0].As<Napi::String>().Utf8Value() : "";
    if (kind == "simt") return describe(info.Env(), simt::kindInfo());
    if (kind == "cuda") {
#ifdef FSM_HAVE_CUDA
      return describe(info.Env(), cuda::kindInfo());
#else
      return info.Env().Null();
#endif
    }
    refuse(JsClass::TypeError, {}, "gpuKind(kind): kind must be \"simt\" or \"cuda\"");
  });
}

Napi::Value gpuMemory(const Napi::CallbackInfo& info) {
  return atBoundary(info.Env(), [&]() -> Napi::Value {
    const std::string kind = info.Length() > 0 && info[0].IsString() ? info[0].As<Napi::String>().Utf8Value() : "";
    const int ordinal = info.Length() > 1 && info[1].IsNumber() ? info[1].As<Napi::Number>().Int32Value() : 0;
    size_t freeBytes = 0, totalBytes = 0;
    if (kind == "simt") simt::memoryInfo(ordinal, freeBytes, totalBytes);
#ifdef FSM_HAVE_CUDA
    else if (kind == "cuda") cuda::memoryInfo(ordinal, freeBytes, totalBytes);
#endif
    else refuse(JsClass::TypeError, {}, "gpuMemory(kind, ordinal): kind must be \"simt\" or \"cuda\" (a cuda build)");
    Napi::Object out = Napi::Object::New(info.Env());
    out.Set("freeBytes", static_cast<double>(freeBytes));
    out.Set("totalBytes", static_cast<double>(totalBytes));
    return out;
  });
}

}  // namespace fsm
