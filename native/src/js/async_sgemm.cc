// sgemmAsync: repeated sgemm on a libuv worker thread behind a Promise (a PromiseWorker, as every long call).
#include "js/async_sgemm.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <vector>

#include "core/async.h"
#include "device/cpu/gemm.h"
#include "js/gemm_binding.h"

namespace fsm {

namespace {

// Copies of A, B and C owned by the work while it runs, so JS may do anything with its arrays meanwhile (even
// detach them) without the worker touching freed memory; C is copied back on the main thread when it is done.
struct SgemmJob {
  bool transA, transB;
  int M, N, K, lda, ldb, ldc;
  float alpha, beta;
  int repeats;
  std::vector<float> a, b, c;
  Napi::Reference<Napi::Float32Array> cRef;
};

}  // namespace

Napi::Value sgemmAsync(const Napi::CallbackInfo& info) {
  const GemmArgs g = parseGemmArgs(info, "sgemmAsync");
  const int repeats = intArg(info, 10, "sgemmAsync", "repeats", 1, 1 << 30);
  auto job = std::make_shared<SgemmJob>(SgemmJob{g.transA, g.transB, g.M, g.N, g.K, g.lda(), g.ldb(), g.ldc(), g.alpha, g.beta, repeats,
                                                 std::vector<float>(g.A.Data(), g.A.Data() + g.A.ElementLength()),
                                                 std::vector<float>(g.B.Data(), g.B.Data() + g.B.ElementLength()),
                                                 std::vector<float>(g.C.Data(), g.C.Data() + g.C.ElementLength()), Napi::Persistent(g.C)});
  return PromiseWorker<double>::queue(
      info.Env(), "fsm:sgemmAsync",
      // Worker thread: no Node-API calls here. Resolves with the elapsed seconds of the multiplies.
      [job] {
        const auto t0 = std::chrono::steady_clock::now();
        for (int r = 0; r < job->repeats; ++r) {
          sgemm(job->transA, job->transB, job->M, job->N, job->K, job->alpha, job->a.data(), job->lda, job->b.data(), job->ldb, job->beta,
                job->c.data(), job->ldc);
        }
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      },
      [job](Napi::Env env, double& seconds) -> Napi::Value {
        Napi::Float32Array c = job->cRef.Value();
        if (c.ElementLength() != job->c.size()) {
          throw Napi::Error::New(env, "sgemmAsync: C was resized or detached while the multiply ran; its result was dropped");
        }
        std::copy(job->c.begin(), job->c.end(), c.Data());
        return Napi::Number::New(env, seconds);
      });
}

}  // namespace fsm
