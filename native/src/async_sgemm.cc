// sgemmAsync: repeated sgemm on a libuv worker thread behind a Promise (the pattern for long native calls).
#include "async_sgemm.h"

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <vector>

#include "gemm.h"
#include "gemm_binding.h"

namespace fsm {

namespace {

// Owns copies of A, B and C while it runs, so JS may do anything with its arrays meanwhile (even detach
// them) without the worker touching freed memory; C is copied back on the main thread when the work is done.
class SgemmWorker : public Napi::AsyncWorker {
 public:
  SgemmWorker(Napi::Env env, const GemmArgs& g, int repeats)
      : Napi::AsyncWorker(env, "fsm:sgemmAsync"),
        deferred_(Napi::Promise::Deferred::New(env)),
        transA_(g.transA),
        transB_(g.transB),
        M_(g.M),
        N_(g.N),
        K_(g.K),
        lda_(g.lda()),
        ldb_(g.ldb()),
        ldc_(g.ldc()),
        alpha_(g.alpha),
        beta_(g.beta),
        repeats_(repeats),
        a_(g.A.Data(), g.A.Data() + g.A.ElementLength()),
        b_(g.B.Data(), g.B.Data() + g.B.ElementLength()),
        c_(g.C.Data(), g.C.Data() + g.C.ElementLength()),
        cRef_(Napi::Persistent(g.C)) {}

  Napi::Promise promise() const { return deferred_.Promise(); }

 protected:
  // Runs on a libuv thread-pool thread: no Node-API calls here.
  void Execute() override {
    const auto t0 = std::chrono::steady_clock::now();
    for (int r = 0; r < repeats_; ++r) {
      sgemm(transA_, transB_, M_, N_, K_, alpha_, a_.data(), lda_, b_.data(), ldb_, beta_, c_.data(), ldc_);
    }
    seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }

  void OnOK() override {
    Napi::Env env = Env();
    Napi::Float32Array c = cRef_.Value();
    if (c.ElementLength() != c_.size()) {
      deferred_.Reject(Napi::Error::New(env, "sgemmAsync: C was resized or detached while the multiply ran; "
                                             "its result was dropped")
                           .Value());
      return;
    }
    std::copy(c_.begin(), c_.end(), c.Data());
    deferred_.Resolve(Napi::Number::New(env, seconds_));
  }

  void OnError(const Napi::Error& e) override { deferred_.Reject(e.Value()); }

 private:
  Napi::Promise::Deferred deferred_;
  const bool transA_, transB_;
  const int M_, N_, K_, lda_, ldb_, ldc_;
  const float alpha_, beta_;
  const int repeats_;
  std::vector<float> a_, b_, c_;
  Napi::Reference<Napi::Float32Array> cRef_;
  double seconds_ = 0.0;
};

}  // namespace

Napi::Value sgemmAsync(const Napi::CallbackInfo& info) {
  const GemmArgs g = parseGemmArgs(info, "sgemmAsync");
  const int repeats = intArg(info, 10, "sgemmAsync", "repeats", 1, 1 << 30);
  auto* worker = new SgemmWorker(info.Env(), g, repeats);  // deletes itself after OnOK/OnError
  const Napi::Promise promise = worker->promise();
  worker->Queue();
  return promise;
}

}  // namespace fsm
