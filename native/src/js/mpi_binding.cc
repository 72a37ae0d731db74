// The process world for JS (mpi_binding.h).
#include "js/mpi_binding.h"

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/async.h"
#include "core/js_error.h"
#ifdef FSM_HAVE_MPI
#include "comm/mpi/mpi_world.h"
#endif

namespace fsm {

namespace {

[[maybe_unused]] double timeoutOf(const Napi::Value& v) {
  const double t = v.IsNumber() ? v.As<Napi::Number>().DoubleValue() : NAN;
  if (!(std::isfinite(t) && t > 0 && t <= 1e6)) refuse(JsClass::RangeError, {}, "timeoutSeconds must be a number of seconds in (0, 1e6]");
  return t;
}

#ifndef FSM_HAVE_MPI
[[noreturn]] void notBuilt() {
  refuse(JsClass::Error, {}, "this fsm was built without MPI (apt-get install -y libopenmpi-dev openmpi-bin, then npm run build:native)");
}
#endif

}  // namespace

Napi::Value mpiBuilt(const Napi::CallbackInfo& info) {
#ifdef FSM_HAVE_MPI
  return Napi::Boolean::New(info.Env(), true);
#else
  return Napi::Boolean::New(info.Env(), false);
#endif
}

#ifdef FSM_HAVE_MPI

Napi::Value mpiWorld(const Napi::CallbackInfo& info) {
  return atBoundary(info.Env(), [&]() -> Napi::Value {
    const mpi::WorldInfo* w = nullptr;
    try {
      w = &mpi::world();
    } catch (const std::exception& e) {
      refuse(JsClass::Error, {}, std::string("MPI could not start: ") + e.what());
    }
    Napi::Object out = Napi::Object::New(info.Env());
    out.Set("size", w->size);
    out.Set("rank", w->rank);
    out.Set("library", w->library);
    return out;
  });
}

Napi::Value mpiAllGather(const Napi::CallbackInfo& info) {
  return atBoundary(info.Env(), [&]() -> Napi::Value {
    if (info.Length() != 2 || !info[0].IsTypedArray() || info[0].As<Napi::TypedArray>().TypedArrayType() != napi_uint8_array) {
      refuse(JsClass::TypeError, {}, "mpiAllGather(bytes: Uint8Array, timeoutSeconds)");
    }
    Napi::Uint8Array a = info[0].As<Napi::Uint8Array>();
    std::vector<uint8_t> bytes(a.Data(), a.Data() + a.ElementLength());
    const double timeout = timeoutOf(info[1]);
    mpi::world();
    return PromiseWorker<std::vector<std::vector<uint8_t>>>::queue(
        info.Env(), "fsm:mpi.allGather", [bytes, timeout] { return mpi::allGather(bytes, timeout); },
        [](Napi::Env env, std::vector<std::vector<uint8_t>>& all) -> Napi::Value {
          Napi::Array out = Napi::Array::New(env, all.size());
          for (size_t p = 0; p < all.size(); p++) {
            Napi::Uint8Array v = Napi::Uint8Array::New(env, all[p].size());
            std::memcpy(v.Data(), all[p].data(), all[p].size());
            out.Set(static_cast<uint32_t>(p), v);
          }
          return out;
        });
  });
}

Napi::Value mpiBarrier(const Napi::CallbackInfo& info) {
  return atBoundary(info.Env(), [&]() -> Napi::Value {
    const double timeout = timeoutOf(info[0]);
    mpi::world();
    return PromiseWorker<Done>::queue(
        info.Env(), "fsm:mpi.barrier",
        [timeout] {
          mpi::barrier(timeout);
          return Done{};
        },
        [](Napi::Env env, Done&) -> Napi::Value { return env.Undefined(); });
  });
}

Napi::Value mpiFinalize(const Napi::CallbackInfo& info) {
  mpi::finalize();
  return info.Env().Undefined();
}

#else

Napi::Value mpiWorld(const Napi::CallbackInfo& info) {
  return atBoundary(info.Env(), []() -> Napi::Value { notBuilt(); });
}
Napi::Value mpiAllGather(const Napi::CallbackInfo& info) { return mpiWorld(info); }
Napi::Value mpiBarrier(const Napi::CallbackInfo& info) { return mpiWorld(info); }
Napi::Value mpiFinalize(const Napi::CallbackInfo& info) { return info.Env().Undefined(); }

#endif

}  // namespace fsm
