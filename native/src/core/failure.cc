// Failure (failure.h): kind names, location prefixes and the busy note.
#include "core/failure.h"

#include <iomanip>
#include <sstream>

namespace fsm {

const char* failureKindName(FailureKind kind) {
  switch (kind) {
    case FailureKind::Kernel: return "kernel";
    case FailureKind::Comm: return "comm";
    case FailureKind::Timeout: return "timeout";
    case FailureKind::Aborted: return "aborted";
    case FailureKind::Oom: return "oom";
    case FailureKind::Hang: return "hang";
    case FailureKind::Description: return "description";
  }
  return "?";
}

std::string Where::prefix() const {
  if (device < 0) return std::string();
  std::string p = "device " + std::to_string(device);
  if (instruction >= 0) p += " instruction " + std::to_string(instruction);
  if (instruction >= 0 && !op.empty()) p += " (" + op + ")";
  return p;
}

Failure failureAt(FailureKind kind, JsClass cls, const Where& where, const std::string& text) {
  Failure f;
  f.kind = kind;
  f.jsClass = cls;
  f.where = where;
  f.text = text;
  const std::string prefix = where.prefix();
  std::string message = text;
  if (!prefix.empty() && text.compare(0, prefix.size(), prefix) == 0) {
    message = text.substr(prefix.size());
    if (message.compare(0, 2, ": ") == 0) message.erase(0, 2);
    else if (message.compare(0, 1, " ") == 0) message.erase(0, 1);
  }
  f.message = message;
  return f;
}

void refuse(JsClass cls, const Where& where, const std::string& text) {
  throw FailureError(failureAt(FailureKind::Description, cls, where, text));
}

std::string busyNote(const std::vector<BusyDevice>& busy) {
  std::ostringstream note;
  note << std::fixed << std::setprecision(1);
  for (size_t k = 0; k < busy.size(); k++) {
    const BusyDevice& b = busy[k];
    Where w;
    w.device = b.device;
    w.instruction = b.instruction;
    w.op = b.op;
    note << (k == 0 ? "; busy computing, not waiting: " : ", ") << w.prefix() << " for " << b.seconds << " s";
  }
  return note.str();
}

}  // namespace fsm
