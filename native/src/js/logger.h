// The native-to-JS log channel: a JS logger function reachable from any native thread through a thread-safe
// function, plus setLogger() and logTest() (a native thread that logs n messages, proving the path works).
#pragma once

#include <napi.h>

#include <functional>
#include <memory>
#include <string>

namespace fsm {

// One queued call into JS: a (level, message) log line, or, when `then` is set, a task run on the main
// thread after every line queued before it (the queue is FIFO).
struct LogItem {
  std::string level;
  std::string message;
  std::function<void(Napi::Env)> then;
};

void callLogger(Napi::Env env, Napi::Function fn, std::nullptr_t* context, LogItem* item);

class Logger {
 public:
  using Tsfn = Napi::TypedThreadSafeFunction<std::nullptr_t, LogItem, callLogger>;

  // Main thread. The logger does not keep the process alive while idle (its thread-safe function is
  // unreferenced); hold()/letGo() keep it alive while a native thread still has lines to deliver.
  static std::shared_ptr<Logger> create(Napi::Env env, Napi::Function fn);

  // Any thread. Queue a line for the JS logger, or a task for the main thread after the lines queued so far.
  // False when the environment is shutting down and nothing will be delivered.
  bool log(std::string level, std::string message) const;
  bool post(std::function<void(Napi::Env)> task) const;

  // A native thread that logs calls acquire() on the main thread before it starts and release() when done.
  void acquire() const;
  void release() const;

  // Main thread: counted references on the event loop.
  void hold(Napi::Env env);
  void letGo(Napi::Env env);

 private:
  explicit Logger(Tsfn tsfn) : tsfn_(tsfn) {}
  bool queue(LogItem* item) const;

  Tsfn tsfn_;
  int holds_ = 0;  // touched on the main thread only
};

// setLogger(fn: ((level, message) => void) | null): route native log lines to fn (null: drop them).
Napi::Value setLogger(const Napi::CallbackInfo& info);

// logTest(n) -> Promise<void>: a native std::thread logs n "info" lines through the logger; resolves after the
// logger has received all of them.
Napi::Value logTest(const Napi::CallbackInfo& info);

}  // namespace fsm
