// commRun (comm_binding.h): parses a per-rank script of communicator operations on the main thread (copying
// every input, so JS may reuse its arrays), runs it with one std::thread per rank inside an AsyncWorker, and
// turns the outputs into Float32Arrays when it is done.
#include "comm_binding.h"

#include <chrono>
#include <cmath>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "communicator.h"

namespace fsm {
namespace {

enum class OpKind { AllReduce, ReduceScatter, AllGather, Broadcast, Reduce, Send, Recv, Abort, Sleep };

struct ScriptOp {
  OpKind kind = OpKind::Sleep;
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
    s.kind = op == "allReduce"       ? OpKind::AllReduce
             : op == "reduceScatter" ? OpKind::ReduceScatter
             : op == "allGather"     ? OpKind::AllGather
             : op == "broadcast"     ? OpKind::Broadcast
                                     : OpKind::Reduce;
    s.group = groupField(env, o, where);
    s.data = floatsField(env, o, where);
    s.avg = o.Get("avg").ToBoolean().Value();
    if (s.kind == OpKind::Broadcast || s.kind == OpKind::Reduce) s.root = intField(env, o, "root", where);
    if (s.kind == OpKind::ReduceScatter && (s.group.empty() || s.data.size() % s.group.size() != 0)) {
      throw Napi::RangeError::New(env, where + ": reduceScatter's data length must be a multiple of the group size");
    }
  } else if (op == "send" || op == "recv") {
    s.kind = op == "send" ? OpKind::Send : OpKind::Recv;
    s.peer = intField(env, o, "peer", where);
    s.tag = intField(env, o, "tag", where);
    if (s.kind == OpKind::Send) {
      s.data = floatsField(env, o, where);
    } else {
      const int count = intField(env, o, "count", where);
      if (count < 0) throw Napi::RangeError::New(env, where + ".count must not be negative");
      s.count = static_cast<size_t>(count);
    }
  } else if (op == "abort") {
    s.kind = OpKind::Abort;
    s.message = o.Get("message").ToString().Utf8Value();
  } else if (op == "sleep") {
    s.kind = OpKind::Sleep;
    s.micros = o.Get("micros").ToNumber().DoubleValue();
  } else {
    throw Napi::TypeError::New(env, where + ".op: unknown operation '" + op + "'");
  }
  return s;
}

// Runs one rank's script. Outputs land in `out`; a failure aborts the communicator so the other ranks stop.
void runRank(Communicator& comm, int rank, std::vector<ScriptOp>& ops, RankResult& out, double jitterMicros,
             uint32_t seed) {
  std::mt19937 gen(seed * 7919u + static_cast<uint32_t>(rank));
  std::uniform_real_distribution<double> jitter(0.0, jitterMicros);
  out.outputs.resize(ops.size());
  out.hasOutput.assign(ops.size(), false);
  try {
    for (size_t i = 0; i < ops.size(); i++) {
      ScriptOp& s = ops[i];
      // Random sleeps reorder the ranks' arrivals: results must not depend on them.
      if (jitterMicros > 0) std::this_thread::sleep_for(std::chrono::duration<double, std::micro>(jitter(gen)));
      const ReduceOp rop = s.avg ? ReduceOp::Avg : ReduceOp::Sum;
      std::vector<float>& o = out.outputs[i];
      switch (s.kind) {
        case OpKind::AllReduce:
          comm.allReduce(rank, s.group, s.data.data(), s.data.size(), rop);
          o = std::move(s.data);
          break;
        case OpKind::ReduceScatter: {
          const size_t per = s.data.size() / s.group.size();
          o.resize(per);
          comm.reduceScatter(rank, s.group, s.data.data(), o.data(), per, rop);
          break;
        }
        case OpKind::AllGather:
          o.resize(s.data.size() * s.group.size());
          comm.allGather(rank, s.group, s.data.data(), o.data(), s.data.size());
          break;
        case OpKind::Broadcast:
          comm.broadcast(rank, s.group, s.root, s.data.data(), s.data.size());
          o = std::move(s.data);
          break;
        case OpKind::Reduce:
          comm.reduce(rank, s.group, s.root, s.data.data(), s.data.size());
          o = std::move(s.data);
          break;
        case OpKind::Send:
          comm.send(rank, s.peer, s.tag, s.data.data(), s.data.size());
          break;
        case OpKind::Recv:
          o.resize(s.count);
          comm.recv(rank, s.peer, s.tag, o.data(), s.count);
          break;
        case OpKind::Abort:
          comm.abort(s.message);
          return;
        case OpKind::Sleep:
          std::this_thread::sleep_for(std::chrono::duration<double, std::micro>(s.micros));
          break;
      }
      out.hasOutput[i] = s.kind != OpKind::Send && s.kind != OpKind::Sleep;
    }
  } catch (const CommAborted&) {
    // the communicator holds the message; the worker reports it
  } catch (const std::exception& e) {
    comm.abort("rank " + std::to_string(rank) + ": " + e.what());
  }
}

class CommWorker : public Napi::AsyncWorker {
 public:
  CommWorker(Napi::Env env, int worldSize, std::vector<std::vector<ScriptOp>> script, double timeoutSeconds,
             double jitterMicros, uint32_t seed)
      : Napi::AsyncWorker(env, "fsm:commRun"),
        deferred_(Napi::Promise::Deferred::New(env)),
        worldSize_(worldSize),
        script_(std::move(script)),
        timeoutSeconds_(timeoutSeconds),
        jitterMicros_(jitterMicros),
        seed_(seed),
        results_(static_cast<size_t>(worldSize)) {}

  Napi::Promise promise() const { return deferred_.Promise(); }

 protected:
  void Execute() override {
    Communicator comm(worldSize_, std::chrono::duration<double>(timeoutSeconds_));
    std::vector<std::thread> threads;
    try {
      for (int r = 0; r < worldSize_; r++) {
        threads.emplace_back(runRank, std::ref(comm), r, std::ref(script_[r]), std::ref(results_[r]), jitterMicros_,
                             seed_);
      }
    } catch (const std::exception& e) {
      comm.abort(std::string("commRun: could not start a rank thread: ") + e.what());  // the started ones stop
    }
    for (std::thread& t : threads) t.join();
    if (comm.aborted()) SetError(comm.abortMessage());
  }

  void OnOK() override {
    Napi::Env env = Env();
    Napi::Array ranks = Napi::Array::New(env, results_.size());
    for (size_t r = 0; r < results_.size(); r++) {
      const RankResult& res = results_[r];
      Napi::Array ops = Napi::Array::New(env, res.outputs.size());
      for (size_t i = 0; i < res.outputs.size(); i++) {
        if (!res.hasOutput[i]) {
          ops.Set(static_cast<uint32_t>(i), env.Null());
          continue;
        }
        Napi::Float32Array a = Napi::Float32Array::New(env, res.outputs[i].size());
        std::copy(res.outputs[i].begin(), res.outputs[i].end(), a.Data());
        ops.Set(static_cast<uint32_t>(i), a);
      }
      ranks.Set(static_cast<uint32_t>(r), ops);
    }
    deferred_.Resolve(ranks);
  }

  void OnError(const Napi::Error& e) override { deferred_.Reject(e.Value()); }

 private:
  Napi::Promise::Deferred deferred_;
  const int worldSize_;
  std::vector<std::vector<ScriptOp>> script_;
  const double timeoutSeconds_;
  const double jitterMicros_;
  const uint32_t seed_;
  std::vector<RankResult> results_;
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
  auto* worker = new CommWorker(env, worldSize, std::move(ops), timeoutMs / 1000.0, std::max(0.0, jitterMicros),
                                static_cast<uint32_t>(seed));  // deletes itself after OnOK/OnError
  const Napi::Promise promise = worker->promise();
  worker->Queue();
  return promise;
}

}  // namespace fsm
