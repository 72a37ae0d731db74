// Module init of fsm_native.node: creates the per-environment state and registers the exported functions.
#include <napi.h>

#include "js/addon_state.h"
#include "js/async_sgemm.h"
#include "js/build_info.h"
#include "js/cluster.h"
#include "js/comm_run.h"
#include "js/gemm_binding.h"
#include "js/kernel_binding.h"
#include "js/logger.h"
#include "js/mpi_binding.h"

namespace {

// At global scope: NODE_API_MODULE pastes this name into an identifier.
Napi::Object Init(Napi::Env env, Napi::Object exports) {
  using namespace fsm;
  env.SetInstanceData(new AddonState());  // deleted by Node when the environment goes away
  exports.Set("buildInfo", Napi::Function::New(env, buildInfo, "buildInfo"));
  exports.Set("gpuKind", Napi::Function::New(env, gpuKind, "gpuKind"));
  exports.Set("gpuMemory", Napi::Function::New(env, gpuMemory, "gpuMemory"));
  exports.Set("sgemm", Napi::Function::New(env, sgemmSync, "sgemm"));
  exports.Set("sgemmAsync", Napi::Function::New(env, sgemmAsync, "sgemmAsync"));
  exports.Set("setLogger", Napi::Function::New(env, setLogger, "setLogger"));
  exports.Set("logTest", Napi::Function::New(env, logTest, "logTest"));
  exports.Set("runKernel", Napi::Function::New(env, runKernel, "runKernel"));
  exports.Set("kernelNames", Napi::Function::New(env, kernelNames, "kernelNames"));
  exports.Set("deviceReservedBytes", Napi::Function::New(env, deviceReservedBytes, "deviceReservedBytes"));
  exports.Set("timeKernel", Napi::Function::New(env, timeKernel, "timeKernel"));
  exports.Set("NativeCluster", NativeCluster::Define(env));
  exports.Set("commRun", Napi::Function::New(env, commRun, "commRun"));
  exports.Set("mpiBuilt", Napi::Function::New(env, mpiBuilt, "mpiBuilt"));
  exports.Set("mpiWorld", Napi::Function::New(env, mpiWorld, "mpiWorld"));
  exports.Set("mpiAllGather", Napi::Function::New(env, mpiAllGather, "mpiAllGather"));
  exports.Set("mpiBarrier", Napi::Function::New(env, mpiBarrier, "mpiBarrier"));
  exports.Set("mpiFinalize", Napi::Function::New(env, mpiFinalize, "mpiFinalize"));
  return exports;
}

}  // namespace

NODE_API_MODULE(fsm_native, Init)
