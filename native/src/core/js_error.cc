// toJsError (js_error.h): the fields set only when known, peers and busy for a timeout.
#include "core/js_error.h"

namespace fsm {

Napi::Error toJsError(Napi::Env env, const Failure& f) {
  Napi::Error error = f.jsClass == JsClass::TypeError    ? Napi::TypeError::New(env, f.text)
                      : f.jsClass == JsClass::RangeError ? Napi::RangeError::New(env, f.text)
                                                         : Napi::Error::New(env, f.text);
  Napi::Object fields = Napi::Object::New(env);
  fields.Set("kind", failureKindName(f.kind));
  fields.Set("message", f.message);
  if (f.where.device >= 0) fields.Set("device", f.where.device);
  if (f.where.localDevice >= 0) fields.Set("localDevice", f.where.localDevice);
  if (f.where.instruction >= 0) fields.Set("instruction", static_cast<double>(f.where.instruction));
  if (!f.where.op.empty()) fields.Set("op", f.where.op);
  if (f.kind == FailureKind::Timeout) {
    Napi::Array peers = Napi::Array::New(env, f.peers.size());
    for (size_t k = 0; k < f.peers.size(); k++) peers.Set(static_cast<uint32_t>(k), f.peers[k]);
    fields.Set("peers", peers);
    Napi::Array busy = Napi::Array::New(env, f.busy.size());
    for (size_t k = 0; k < f.busy.size(); k++) {
      Napi::Object b = Napi::Object::New(env);
      b.Set("device", f.busy[k].device);
      b.Set("instruction", static_cast<double>(f.busy[k].instruction));
      b.Set("op", f.busy[k].op);
      b.Set("seconds", f.busy[k].seconds);
      busy.Set(static_cast<uint32_t>(k), b);
    }
    fields.Set("busy", busy);
  }
  if (f.arenaBytes) fields.Set("arenaBytes", static_cast<double>(*f.arenaBytes));
  if (f.limitBytes) fields.Set("limitBytes", static_cast<double>(*f.limitBytes));
  error.Value().Set("failure", fields);
  return error;
}

}  // namespace fsm
