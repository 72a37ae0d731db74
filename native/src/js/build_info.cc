// buildInfo(): how this addon was built (BLAS kind, Node-API version, compiler) and the host's thread count.
#include "js/build_info.h"

#include <string>
#include <thread>

#include "device/cpu/gemm.h"
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
  return out;
}

}  // namespace fsm
