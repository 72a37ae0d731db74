// Failure: every error the runtime reports, as structured data (kind, location, peers, busy devices, sizes) plus
// the text a person reads; FailureError carries one through C++ to the boundary (core/js_error.h turns it into
// a JS Error with fields, so TypeScript never parses a message). No Node-API here: devices, communicators and
// the executor use it.
#pragma once

#include <cstdint>
#include <exception>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace fsm {

/** kernel: a kernel threw (or an injected fault on a kernel); comm: the communicator refused a call (mismatched
 *  counts, a bad group; or an injected fault on a communication op); timeout: a rank waited past the timeout
 *  for peers; aborted: the step stopped because something else had failed (or could not start); oom: an arena
 *  over its device's memory or one the machine cannot allocate; hang: an injected hang that nothing woke;
 *  description: a malformed description or call. */
enum class FailureKind { Kernel, Comm, Timeout, Aborted, Oom, Hang, Description };
const char* failureKindName(FailureKind kind);

/** The JS class the Error gets: argument mistakes keep the TypeError / RangeError they have always had. */
enum class JsClass { Error, TypeError, RangeError };

/** A device that was inside a kernel when a communicator timed out: busy computing, not waiting, so the
 *  likelier cause than the ranks the timeout names (which may be waiting on it). */
struct BusyDevice {
  int device = -1;  // global rank
  int64_t instruction = -1;
  std::string op;
  double seconds = 0;
};

/** Where in a description or a step something happened; unset fields are -1 / empty. */
struct Where {
  int device = -1;       // global rank
  int localDevice = -1;  // index among this process's devices
  int64_t instruction = -1;
  std::string op;
  /** "", "device D", "device D instruction I" or "device D instruction I (op)": how messages begin. */
  std::string prefix() const;
};

struct Failure {
  FailureKind kind = FailureKind::Description;
  JsClass jsClass = JsClass::Error;
  /** The root cause alone, without the location. */
  std::string message;
  /** What a person reads (the JS Error's message): location, cause and notes, e.g. "device 1 instruction 4
   *  (linear): embedding index 5 is out of range [0, 3)". */
  std::string text;
  Where where;
  std::vector<int> peers;  // timeout: the ranks that never arrived
  std::vector<BusyDevice> busy;
  std::optional<uint64_t> arenaBytes;  // oom
  std::optional<uint64_t> limitBytes;  // oom over a memory limit
};

/** A Failure whose text is `text`; the message is that text less the location prefix `where` gives it (and
 *  the ": " or " " that follows it), so messages keep the form they have always had. */
Failure failureAt(FailureKind kind, JsClass cls, const Where& where, const std::string& text);

/** Carries a Failure through C++ frames to the boundary (js/, core/async.h). */
class FailureError : public std::exception {
 public:
  explicit FailureError(Failure failure) : failure_(std::move(failure)) {}
  const Failure& failure() const { return failure_; }
  const char* what() const noexcept override { return failure_.text.c_str(); }

 private:
  Failure failure_;
};

/** Throws a description failure (a malformed description or argument) at `where`. */
[[noreturn]] void refuse(JsClass cls, const Where& where, const std::string& text);

/** "; busy computing, not waiting: device D instruction I (op) for T s, ..." (empty for an empty list). */
std::string busyNote(const std::vector<BusyDevice>& busy);

}  // namespace fsm
