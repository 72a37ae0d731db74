// toJsError: a Failure as the JS Error it crosses the boundary as (class by jsClass, message = its text, and a
// `failure` property with the fields: src/native/binding.ts, NativeFailure); atBoundary wraps JS entry points.
#pragma once
#include <napi.h>

#include "core/failure.h"

namespace fsm {

Napi::Error toJsError(Napi::Env env, const Failure& failure);

/** Runs `body` and turns a FailureError escaping it into the JS error (JS entry points wrap their bodies in it). */
template <typename Body>
auto atBoundary(Napi::Env env, Body&& body) -> decltype(body()) {
  try {
    return body();
  } catch (const FailureError& e) {
    throw toJsError(env, e.failure());
  }
}

}  // namespace fsm
