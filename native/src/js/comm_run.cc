// commRun (comm_run.h): parses a per-rank script of communicator operations on the main thread (copying every
// input, so JS may reuse its arrays), registers its groups and runs it with one std::thread per rank inside a
// PromiseWorker, and turns the outputs into Float32Arrays when it is done.
#include "js/comm_run.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "comm/inprocess.h"
#include "comm/testing/delay.h"
#include "core/async.h"
#include "core/failure.h"

namespace fsm {
namespace {

enum class ScriptKind { AllReduce, ReduceScatter, AllGather, Broadcast, Reduce, Send, Recv, Abort, Sleep };

struct ScriptOp {
  ScriptKind kind = ScriptKind::Sleep;
  std::vector<int> group;
  int root = -1;
  int peer = -1;
  int tag = 0;
  bool avg = false;
  std::vector<float> data;  // the input (and, for in-place ops, where the output is written)
  size_t count = 0;         // recv: elements expected
  std::string message;      // abort
  double micros = 0;        // sleep
};

struct RankResult {
  std::vector<std::vector<float>> outputs;  // per op
  std::vector<bool> hasOutput;
};

int intField(const Napi::Env& env, const Napi::Object& o, const char* key, const std::string& where) {
  const Napi::Value v = o.Get(key);
  if (!v.IsNumber() || std::floor(v.As<Napi::Number>().DoubleValue()) != v.As<Napi::Number>().DoubleValue()) {
    throw Napi::TypeError::New(env, where + "." + key + " must be an integer");
  }
  return v.As<Napi::Number>().Int32Value();
}

std::vector<float> floatsField(const Napi::Env& env, const Napi::Object& o, const std::string& where) {
  const Napi::Value v = o.Get("data");
  if (!v.IsTypedArray() || v.As<Napi::TypedArray>().TypedArrayType() != napi_float32_array) {
    throw Napi::TypeError::New(env, where + ".data must be a Float32Array");
  }
  Napi::Float32Array a = v.As<Napi::Float32Array>();
  return std::vector<float>(a.Data(), a.Data() + a.ElementLength());
}

std::vector<int> groupField(const Napi::Env& env, const Napi::Object& o, const std::string& where) {
  const Napi::Value v = o.Get("group");
  if (!v.IsArray()) throw Napi::TypeError::New(env, where + ".group must be an array of ranks");
  Napi::Array a = v.As<Napi::Array>();
  std::vector<int> group;
  for (uint32_t i = 0; i < a.Length(); i++) {
    const Napi::Value x = a.Get(i);
    if (!x.IsNumber()) throw Napi::TypeError::New(env, where + ".group must be an array of ranks");
    group.push_back(x.As<Napi::Number>().Int32Value());
  }
  return group;
}

ScriptOp parseOp(const Napi::Env& env, const Napi::Value& v, const std::string& where) {
  if (!v.IsObject()) throw Napi::TypeError::New(env, where + " must be an object");
  const Napi::Object o = v.As<Napi::Object>();
  const Napi::Value name = o.Get("op");
  if (!name.IsString()) throw Napi::TypeError::New(env, where + ".op must be a string");
  const std::string op = name.As<Napi::String>().Utf8Value();
  ScriptOp s;
  if (op == "allReduce" || op == "reduceScatter" || op == "allGather" || op == "broadcast" || op == "reduce") {
    s.kind = op == "allReduce"       ? ScriptKind::AllReduce
             : op == "reduceScatter" ? ScriptKind::ReduceScatter
             : op == "allGather"     ? ScriptKind::AllGather
             : op == "broadcast"     ? ScriptKind::Broadcast
                                     : ScriptKind::Reduce;
    s.group = groupField(env, o, where);
    s.data = floatsField(env, o, where);
    s.avg = o.Get("avg").ToBoolean().Value();
    if (s.kind == ScriptKind::Broadcast || s.kind == ScriptKind::Reduce) s.root = intField(env, o, "root", where);
    if (s.kind == ScriptKind::ReduceScatter && (s.group.empty() || s.data.size() % s.group.size() != 0)) {
      throw Napi::RangeError::New(env, where + ": reduceScatter's data length must be a multiple of the group size");
    }
  } else if (op == "send" || op == "recv") {
    s.kind = op == "send" ? ScriptKind::Send : ScriptKind::Recv;
    s.peer = intField(env, o, "peer", where);
    s.tag = intField(env, o, "tag", where);
    if (s.kind == ScriptKind::Send) {
      s.data = floatsField(env, o, where);
    } else {
      const int count = intField(env, o, "count", where);
      if (count < 0) throw Napi::RangeError::New(env, where + ".count must not be negative");
      s.count = static_cast<size_t>(count);
    }
  } else if (op == "abort") {
    s.kind = ScriptKind::Abort;
    s.message = o.Get("message").ToString().Utf8Value();
  } else if (op == "sleep") {
    s.kind = ScriptKind::Sleep;
    s.micros = o.Get("micros").ToNumber().DoubleValue();
  } else {
    throw Napi::TypeError::New(env, where + ".op: unknown operation '" + op + "'");
  }
  return s;
}

// What the ranks of one run share: the communicator, each op's group handle, and the root cause of a failure.
struct Run {
  Communicator* comm = nullptr;
  std::vector<std::vector<GroupHandle>> handles;  // per rank, per op
  std::mutex mutex;
  std::optional<Failure> root;
};

// Runs one rank's script. Outputs land in `out`; a failure aborts the communicator so the other ranks stop.
void runRank(Run& run, int rank, std::vector<ScriptOp>& ops, RankResult& out) {
  Communicator& comm = *run.comm;
  out.outputs.resize(ops.size());
  out.hasOutput.assign(ops.size(), false);
  auto keep = [&](FailureKind kind, const std::string& message, std::vector<int> peers) {
    std::lock_guard<std::mutex> lk(run.mutex);
    if (run.root) return;
    Failure f = failureAt(kind, JsClass::Error, {}, message);
    f.where.device = rank;
    f.peers = std::move(peers);
    run.root = f;
  };
  try {
    for (size_t i = 0; i < ops.size(); i++) {
      ScriptOp& s = ops[i];
      const GroupHandle g = run.handles[static_cast<size_t>(rank)][i];
      const ReduceOp rop = s.avg ? ReduceOp::Avg : ReduceOp::Sum;
      std::vector<float>& o = out.outputs[i];
      switch (s.kind) {
        case ScriptKind::AllReduce:
          comm.allReduce(rank, g, s.data.data(), s.data.size(), rop);
          o = std::move(s.data);
          break;
        case ScriptKind::ReduceScatter: {
          const size_t per = s.data.size() / s.group.size();
          o.resize(per);
          comm.reduceScatter(rank, g, s.data.data(), o.data(), per, rop);
          break;
        }
        case ScriptKind::AllGather:
          o.resize(s.data.size() * s.group.size());
          comm.allGather(rank, g, s.data.data(), o.data(), s.data.size());
          break;
        case ScriptKind::Broadcast:
          comm.broadcast(rank, g, s.root, s.data.data(), s.data.size());
          o = std::move(s.data);
          break;
        case ScriptKind::Reduce:
          comm.reduce(rank, g, s.root, s.data.data(), s.data.size());
          o = std::move(s.data);
          break;
        case ScriptKind::Send:
          comm.send(rank, s.peer, s.tag, s.data.data(), s.data.size());
          break;
        case ScriptKind::Recv:
          o.resize(s.count);
          comm.recv(rank, s.peer, s.tag, o.data(), s.count);
          break;
        case ScriptKind::Abort:
          keep(FailureKind::Aborted, s.message, {});
          comm.abort(s.message);
          return;
        case ScriptKind::Sleep:
          std::this_thread::sleep_for(std::chrono::duration<double, std::micro>(s.micros));
          break;
      }
      out.hasOutput[i] = s.kind != ScriptKind::Send && s.kind != ScriptKind::Sleep;
    }
  } catch (const CommError& e) {
    // An Aborted echo names another rank's root cause, which that rank keeps.
    if (e.kind() != CommError::Kind::Aborted) keep(e.kind() == CommError::Kind::Timeout ? FailureKind::Timeout : FailureKind::Comm, e.what(), e.peers());
  } catch (const std::exception& e) {
    const std::string message = "rank " + std::to_string(rank) + ": " + e.what();
    keep(FailureKind::Comm, message, {});
    comm.abort(message);
  }
}

struct Outputs {
  std::vector<RankResult> ranks;
};

}  // namespace

Napi::Value commRun(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!info[0].IsNumber()) throw Napi::TypeError::New(env, "commRun: worldSize must be a number");
  const int worldSize = info[0].As<Napi::Number>().Int32Value();
  if (worldSize < 1 || worldSize > 1024) throw Napi::RangeError::New(env, "commRun: worldSize must be in [1, 1024]");
  if (!info[1].IsArray() || info[1].As<Napi::Array>().Length() != static_cast<uint32_t>(worldSize)) {
    throw Napi::TypeError::New(env, "commRun: script must be an array with one list of operations per rank");
  }
  Napi::Array script = info[1].As<Napi::Array>();
  std::vector<std::vector<ScriptOp>> ops(static_cast<size_t>(worldSize));
  for (int r = 0; r < worldSize; r++) {
    const Napi::Value list = script.Get(static_cast<uint32_t>(r));
    const std::string where = "commRun: script[" + std::to_string(r) + "]";
    if (!list.IsArray()) throw Napi::TypeError::New(env, where + " must be an array of operations");
    Napi::Array a = list.As<Napi::Array>();
    for (uint32_t i = 0; i < a.Length(); i++) ops[r].push_back(parseOp(env, a.Get(i), where + "[" + std::to_string(i) + "]"));
  }
  double timeoutMs = 60000, jitterMicros = 0, seed = 0;
  if (info.Length() > 2 && info[2].IsObject()) {
    const Napi::Object o = info[2].As<Napi::Object>();
    if (o.Get("timeoutMs").IsNumber()) timeoutMs = o.Get("timeoutMs").As<Napi::Number>().DoubleValue();
    if (o.Get("jitterMicros").IsNumber()) jitterMicros = o.Get("jitterMicros").As<Napi::Number>().DoubleValue();
    if (o.Get("seed").IsNumber()) seed = o.Get("seed").As<Napi::Number>().DoubleValue();
  }
  if (!(timeoutMs > 0)) throw Napi::RangeError::New(env, "commRun: timeoutMs must be positive");
  const int world = worldSize;
  const double timeoutSeconds = timeoutMs / 1000.0;
  const uint32_t seedValue = static_cast<uint32_t>(seed);
  jitterMicros = std::max(0.0, jitterMicros);
  auto scripts = std::make_shared<std::vector<std::vector<ScriptOp>>>(std::move(ops));
  return PromiseWorker<Outputs>::queue(
      env, "fsm:commRun",
      [=]() {
        std::unique_ptr<Communicator> comm = std::make_unique<InProcessCommunicator>(world, std::chrono::duration<double>(timeoutSeconds));
        // Jitter: random sleeps around every call reorder the ranks' arrivals; results must not depend on them.
        if (jitterMicros > 0) comm = std::make_unique<DelayCommunicator>(std::move(comm), seedValue, jitterMicros);
        Run run;
        run.comm = comm.get();
        std::vector<std::vector<ScriptOp>>& perRank = *scripts;
        try {
          for (const std::vector<ScriptOp>& rankOps : perRank) {
            std::vector<GroupHandle> handles;
            for (const ScriptOp& op : rankOps) handles.push_back(op.group.empty() ? -1 : comm->registerGroup(op.group));
            run.handles.push_back(std::move(handles));
          }
        } catch (const CommError& e) {
          throw FailureError(failureAt(FailureKind::Comm, JsClass::Error, {}, e.what()));
        }
        Outputs out;
        out.ranks.resize(static_cast<size_t>(world));
        std::vector<std::thread> threads;
        try {
          for (int r = 0; r < world; r++) threads.emplace_back(runRank, std::ref(run), r, std::ref(perRank[r]), std::ref(out.ranks[r]));
        } catch (const std::exception& e) {
          comm->abort(std::string("commRun: could not start a rank thread: ") + e.what());  // the started ones stop
        }
        for (std::thread& t : threads) t.join();
        if (comm->aborted()) {
          // The root cause's kind and peers, with the communicator's first abort message as the text.
          Failure f = run.root ? *run.root : failureAt(FailureKind::Aborted, JsClass::Error, {}, comm->abortMessage());
          f.text = f.message = comm->abortMessage();
          throw FailureError(f);
        }
        return out;
      },
      [](Napi::Env env, Outputs& out) -> Napi::Value {
        Napi::Array ranks = Napi::Array::New(env, out.ranks.size());
        for (size_t r = 0; r < out.ranks.size(); r++) {
          const RankResult& res = out.ranks[r];
          Napi::Array list = Napi::Array::New(env, res.outputs.size());
          for (size_t i = 0; i < res.outputs.size(); i++) {
            if (!res.hasOutput[i]) {
              list.Set(static_cast<uint32_t>(i), env.Null());
              continue;
            }
            Napi::Float32Array a = Napi::Float32Array::New(env, res.outputs[i].size());
            std::copy(res.outputs[i].begin(), res.outputs[i].end(), a.Data());
            list.Set(static_cast<uint32_t>(i), a);
          }
          ranks.Set(static_cast<uint32_t>(r), list);
        }
        return ranks;
      });
}

}  // namespace fsm
