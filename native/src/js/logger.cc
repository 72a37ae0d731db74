// The native-to-JS log channel: a JS logger function reachable from any native thread through a thread-safe
// function, plus setLogger() and logTest() (a native thread that logs n messages, proving the path works).
#include "js/logger.h"

#include <atomic>
#include <thread>
#include <utility>

#include "js/addon_state.h"
#include "js/gemm_binding.h"

namespace fsm {

void callLogger(Napi::Env env, Napi::Function fn, std::nullptr_t*, LogItem* raw) {
  std::unique_ptr<LogItem> item(raw);
  // A null env means the environment is being torn down: the item is only freed.
  if (static_cast<napi_env>(env) == nullptr) return;
  if (item->then) {
    item->then(env);
    return;
  }
  // The raw call tells the two failures apart without C++ exceptions: a logger that threw leaves a pending
  // exception, which is raised as an uncaught exception like a throwing timer callback's (under Node-API 8 it
  // would otherwise be dropped with only a DEP0168 warning); an environment that is shutting down (a worker
  // being terminated) refuses to run JS and leaves none, and the line is dropped.
  napi_value args[2] = {Napi::String::New(env, item->level), Napi::String::New(env, item->message)};
  napi_value result;
  if (napi_call_function(env, env.Undefined(), fn, 2, args, &result) == napi_ok) return;
  bool pending = false;
  napi_value error;
  if (napi_is_exception_pending(env, &pending) == napi_ok && pending &&
      napi_get_and_clear_last_exception(env, &error) == napi_ok) {
    napi_fatal_exception(env, error);
  }
}

std::shared_ptr<Logger> Logger::create(Napi::Env env, Napi::Function fn) {
  Tsfn tsfn = Tsfn::New(env, fn, "fsm:logger", 0 /* unbounded queue */, 1 /* the main thread's reference */);
  tsfn.Unref(env);
  return std::shared_ptr<Logger>(new Logger(tsfn));
}

bool Logger::queue(LogItem* item) const {
  if (tsfn_.BlockingCall(item) == napi_ok) return true;
  delete item;
  return false;
}

bool Logger::log(std::string level, std::string message) const {
  return queue(new LogItem{std::move(level), std::move(message), nullptr});
}

bool Logger::post(std::function<void(Napi::Env)> task) const {
  return queue(new LogItem{std::string(), std::string(), std::move(task)});
}

void Logger::acquire() const { tsfn_.Acquire(); }

void Logger::release() const { tsfn_.Release(); }

void Logger::hold(Napi::Env env) {
  if (holds_++ == 0) tsfn_.Ref(env);
}

void Logger::letGo(Napi::Env env) {
  if (--holds_ == 0) tsfn_.Unref(env);
}

Napi::Value setLogger(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const Napi::Value fn = info[0];
  if (!fn.IsFunction() && !fn.IsNull() && !fn.IsUndefined()) {
    throw Napi::TypeError::New(env, "setLogger: expected a function (level, message) => void, or null");
  }
  AddonState* state = env.GetInstanceData<AddonState>();
  // Threads still logging through the old logger hold their own references; it closes when they finish.
  if (state->logger) state->logger->release();
  state->logger = fn.IsFunction() ? Logger::create(env, fn.As<Napi::Function>()) : nullptr;
  return env.Undefined();
}

namespace {

// The native thread behind one logTest call. Node frees a thread-safe function when its environment is torn
// down (a worker thread terminated, the process ending) even while other threads still hold it, so a thread
// that logs must be stopped and joined before then: by an environment cleanup hook registered after the
// logger's thread-safe function was created, which therefore runs before the function's own teardown (hooks
// run last-in first-out). Whichever runs first on the main thread joins: the hook, or the completion task the
// thread queued behind its lines. `self` keeps the record alive while the hook is registered and is dropped
// only after the join, so the record is never destroyed with a joinable thread.
struct LogTestThread {
  std::thread thread;
  std::atomic<bool> stop{false};
  bool hookRan = false;                // main thread only
  std::shared_ptr<LogTestThread> self;  // main thread only
};

void stopLogTestThread(void* arg) {
  auto* job = static_cast<LogTestThread*>(arg);
  job->stop = true;
  if (job->thread.joinable()) job->thread.join();
  job->hookRan = true;
  job->self.reset();  // may destroy *job: last statement
}

}  // namespace

Napi::Value logTest(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const int n = intArg(info, 0, "logTest", "n", 0, 1000000);
  std::shared_ptr<Logger> logger = env.GetInstanceData<AddonState>()->logger;
  if (!logger) throw Napi::Error::New(env, "logTest: no logger is set; call setLogger(fn) first");

  Napi::Promise::Deferred deferred = Napi::Promise::Deferred::New(env);
  auto job = std::make_shared<LogTestThread>();
  if (napi_add_env_cleanup_hook(env, stopLogTestThread, job.get()) != napi_ok) {
    throw Napi::Error::New(env, "logTest: cannot register an environment cleanup hook");
  }
  job->self = job;
  logger->acquire();
  logger->hold(env);
  try {
    job->thread = std::thread([logger, n, deferred, job]() {
      for (int i = 1; i <= n && !job->stop; ++i) {
        if (!logger->log("info", "logTest " + std::to_string(i) + " of " + std::to_string(n))) break;
      }
      // Queued after the lines, so it runs once the logger has received every one of them.
      logger->post([logger, deferred, job](Napi::Env mainEnv) {
        if (job->hookRan) return;  // the environment is going away and the thread is already joined
        napi_remove_env_cleanup_hook(mainEnv, stopLogTestThread, job.get());
        job->thread.join();  // it has only release() left to do
        job->self.reset();
        logger->letGo(mainEnv);
        deferred.Resolve(mainEnv.Undefined());
      });
      logger->release();
    });
  } catch (...) {
    napi_remove_env_cleanup_hook(env, stopLogTestThread, job.get());
    job->self.reset();
    logger->letGo(env);
    logger->release();
    throw;
  }
  return deferred.Promise();
}

}  // namespace fsm
