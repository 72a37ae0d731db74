// PromiseWorker: the one way a long native call runs — its work on a libuv worker thread (no JS there), its
// Promise settled on the main thread: resolved with what `resolve` makes of the result, or rejected with the
// structured error of a FailureError the work (or `resolve`) threw.
#pragma once
#include <napi.h>

#include <functional>
#include <optional>
#include <string>
#include <utility>

#include "core/js_error.h"

namespace fsm {

template <typename Result>
class PromiseWorker final : public Napi::AsyncWorker {
 public:
  /** Worker thread. Throws FailureError (rejects with its fields) or std::exception (a plain Error). */
  using Work = std::function<Result()>;
  /** Main thread: the resolved value. May throw FailureError or Napi::Error, which rejects instead. */
  using Resolve = std::function<Napi::Value(Napi::Env, Result&)>;
  /** Main thread, before the promise settles either way (e.g. marking the owner idle again). */
  using Settled = std::function<void()>;

  /** Queues `work` and returns its promise. `keepAlive` (if not empty) is referenced until it settles: the
   *  object whose native state the work uses. The worker deletes itself once settled. */
  static Napi::Promise queue(Napi::Env env, const char* name, Work work, Resolve resolve, Settled settled = nullptr,
                             Napi::Object keepAlive = Napi::Object()) {
    auto* w = new PromiseWorker(env, name, std::move(work), std::move(resolve), std::move(settled));
    if (!keepAlive.IsEmpty()) w->keepAlive_ = Napi::Persistent(keepAlive);
    Napi::Promise promise = w->deferred_.Promise();
    w->Queue();
    return promise;
  }

 protected:
  void Execute() override {
    try {
      result_ = work_();
    } catch (const FailureError& e) {
      failure_ = e.failure();
      SetError(failure_->text);
    } catch (const std::exception& e) {
      SetError(e.what());
    }
  }

  void OnOK() override {
    if (settled_) settled_();
    Napi::Env env = Env();
    try {
      deferred_.Resolve(resolve_(env, *result_));
    } catch (const FailureError& e) {
      deferred_.Reject(toJsError(env, e.failure()).Value());
    } catch (const Napi::Error& e) {
      deferred_.Reject(e.Value());
    }
  }

  void OnError(const Napi::Error& e) override {
    if (settled_) settled_();
    deferred_.Reject(failure_ ? toJsError(Env(), *failure_).Value() : e.Value());
  }

 private:
  PromiseWorker(Napi::Env env, const char* name, Work work, Resolve resolve, Settled settled)
      : Napi::AsyncWorker(env, name),
        deferred_(Napi::Promise::Deferred::New(env)),
        work_(std::move(work)),
        resolve_(std::move(resolve)),
        settled_(std::move(settled)) {}

  Napi::Promise::Deferred deferred_;
  Work work_;
  Resolve resolve_;
  Settled settled_;
  Napi::ObjectReference keepAlive_;
  std::optional<Result> result_;
  std::optional<Failure> failure_;
};

/** The result of work that has nothing to return. */
struct Done {};

}  // namespace fsm
