// CudaDevice (cuda_device.h): the arena and reservations, streams and events, launches with their context,
// and the errors a GPU reports late (a kernel's index check, an asynchronous fault) turned into the run's
// DeviceFault.
#include "device/cuda/cuda_device.h"

#include <algorithm>
#include <chrono>
#include <sstream>
#include <string>
#include <thread>

#include "core/failure.h"
#include "core/program.h"

namespace fsm {
namespace FSM_CUDA_NS {
namespace {

/** cuBLAS's workspace on the compute stream (NVIDIA's advice for Hopper: 32 MiB); the communication stream's
 *  handle gets none (cuBLAS then uses none). */
constexpr size_t kBlasWorkspaceBytes = size_t{32} << 20;
constexpr size_t kAlign = 256;

size_t aligned(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

[[noreturn]] void cudaFailure(cudaError_t e, const std::string& what) {
  throw std::runtime_error("CUDA " + what + ": " + cudaGetErrorString(e));
}

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) cudaFailure(e, what);
}

std::string gib(size_t bytes) {
  std::ostringstream s;
  s.precision(3);
  s << static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0) << " GiB";
  return s.str();
}

// The messages the CPU kernels throw for the same mistakes (device/cpu/kernels/embedding.cc, loss.cc).
std::string describe(const DeviceError& e) {
  const std::string range = " is out of range [0, " + std::to_string(e.limit) + ")";
  switch (e.code) {
    case kErrorEmbeddingIndex: return "embedding index " + std::to_string(e.value) + range;
    case kErrorTargetIndex: return "cross_entropy target " + std::to_string(e.value) + range;
  }
  return "device-side error " + std::to_string(e.code);
}

}  // namespace

CudaPresence cudaPresence() {
  CudaPresence p;
  cudaDriverGetVersion(&p.driverVersion);
  cudaRuntimeGetVersion(&p.runtimeVersion);
  const cudaError_t e = cudaGetDeviceCount(&p.count);
  if (e != cudaSuccess || p.count == 0) {
    p.count = 0;
    p.why = std::string("no CUDA device (") + (p.driverVersion == 0 ? "driver: not loaded" : cudaGetErrorString(e)) + ")";
    cudaGetLastError();  // clear the sticky-free error so later calls start clean
  }
  return p;
}

GpuKindInfo::Gpu deviceDescription(int ordinal) {
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, ordinal), "device properties");
  return {prop.name, prop.totalGlobalMem, prop.multiProcessorCount, prop.major, prop.minor};
}

CudaDevice::CudaDevice(CudaOptions options, std::optional<size_t> limitBytes) : options_(options), limitBytes_(limitBytes) {
  const CudaPresence p = cudaPresence();
  if (p.count == 0) refuse(JsClass::Error, {}, p.why);
  if (options_.ordinal < 0 || options_.ordinal >= p.count) {
    refuse(JsClass::RangeError, {}, "CUDA device " + std::to_string(options_.ordinal) + " does not exist (this machine has " + std::to_string(p.count) + ")");
  }
  try {
    use();
    check(cudaDeviceGetAttribute(&multiprocessors_, cudaDevAttrMultiProcessorCount, options_.ordinal), "device attributes");
    for (cudaStream_t& s : streams_) check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "stream creation");
  } catch (const std::runtime_error& e) {
    for (cudaStream_t s : streams_) {
      if (s) cudaStreamDestroy(s);
    }
    refuse(JsClass::Error, {}, e.what());
  }
}

CudaDevice::~CudaDevice() {
  use();
  for (cudaStream_t s : streams_) cudaStreamSynchronize(s);
  for (auto& b : blas_) b.reset();
  for (auto& list : events_)
    for (cudaEvent_t e : list)
      if (e) cudaEventDestroy(e);
  for (cudaEvent_t e : traceEvents_)
    if (e) cudaEventDestroy(e);
  if (traceOrigin_) cudaEventDestroy(traceOrigin_);
  for (void* p : reservations_) cudaFree(p);
  for (cudaStream_t s : streams_) cudaStreamDestroy(s);
}

void CudaDevice::use() const { cudaSetDevice(options_.ordinal); }

Arena CudaDevice::allocate(size_t bytes) {
  refuseOverLimit(bytes, limitBytes_);
  use();
  Arena arena;
  arena.bytes = bytes;
  void* p = nullptr;
  if (cudaMalloc(&p, std::max<size_t>(bytes, kAlign)) != cudaSuccess) {
    cudaGetLastError();
    size_t free = 0, total = 0;
    cudaMemGetInfo(&free, &total);
    Failure f = failureAt(FailureKind::Oom, JsClass::Error, {},
                          "cannot allocate its arena of " + std::to_string(bytes) + " bytes on CUDA device " + std::to_string(options_.ordinal) +
                              ": out of memory (" + gib(free) + " free of " + gib(total) + ")");
    f.arenaBytes = bytes;
    throw FailureError(f);
  }
  // Zero-filled, as every arena is, before any stream touches it.
  if (cudaMemset(p, 0, bytes) != cudaSuccess || cudaDeviceSynchronize() != cudaSuccess) {
    cudaFree(p);
    refuse(JsClass::Error, {}, "CUDA: cannot clear a new arena");
  }
  arena.base = static_cast<uint8_t*>(p);
  return arena;
}

void CudaDevice::release(Arena& arena) {
  if (arena.base == nullptr) return;
  use();
  for (cudaStream_t s : streams_) cudaStreamSynchronize(s);
  cudaFree(arena.base);
  arena = Arena();
}

void* CudaDevice::reserve(size_t bytes, const char* what) {
  void* p = nullptr;
  if (cudaMalloc(&p, aligned(std::max<size_t>(bytes, 1))) != cudaSuccess) {
    cudaGetLastError();
    Failure f = failureAt(FailureKind::Oom, JsClass::Error, {}, std::string("cannot reserve its ") + what + " of " + std::to_string(bytes) + " bytes: out of memory");
    f.arenaBytes = bytes;
    throw FailureError(f);
  }
  reservations_.push_back(p);
  reservedBytes_ += aligned(std::max<size_t>(bytes, 1));
  return p;
}

Reservations reservationsFor(const std::vector<const KernelCall*>& calls) {
  Reservations r;
  for (const KernelCall* c : calls) {
    const KernelEntry& k = kernelEntry(c->kernel);
    size_t& ws = r.workspaceBytes[c->stream == kCommStream ? 1 : 0];
    if (k.workspace) ws = std::max(ws, aligned(k.workspace(c->inputs, c->outputs, c->attrs)));
    r.blas = r.blas || k.blas == UsesBlas::Yes;
  }
  return r;
}

size_t Reservations::total() const {
  return workspaceBytes[0] + workspaceBytes[1] + aligned(sizeof(DeviceError)) + (blas ? kBlasWorkspaceBytes : 0);
}

void CudaDevice::prepare(const Preparation& p) {
  use();
  timeoutSeconds_ = p.timeoutSeconds;
  for (int s = 0; s < kStreams; s++) {
    const std::vector<size_t>& counts = p.waitedFor[s];
    waitedOn_[s].assign(counts.empty() ? 1 : counts.back() + 1, 0);
    for (size_t c : counts) waitedOn_[s][c] = 1;
  }
  const Reservations r = reservationsFor(p.calls);
  const bool blas = r.blas;
  for (int s = 0; s < kStreams; s++) {
    workspaceBytes_[s] = r.workspaceBytes[s];
    if (workspaceBytes_[s] > 0) workspace_[s] = reserve(workspaceBytes_[s], "kernel scratch");
  }
  error_ = static_cast<DeviceError*>(reserve(sizeof(DeviceError), "error record"));
  check(cudaMemset(error_, 0, sizeof(DeviceError)), "clearing the error record");
  if (blas) {
    try {
      void* ws = reserve(kBlasWorkspaceBytes, "cuBLAS workspace");
      blas_[0] = std::make_unique<Blas>(streams_[0], ws, kBlasWorkspaceBytes, options_.allowTf32);
      blas_[1] = std::make_unique<Blas>(streams_[1], nullptr, 0, options_.allowTf32);
    } catch (const std::runtime_error& e) {
      refuse(JsClass::Error, {}, e.what());
    }
  }
}

KernelId CudaDevice::resolve(const std::string& op) const {
  const KernelId id = findKernel(op);
  if (id < 0) refuse(JsClass::Error, {}, "not implemented: native kernel for op '" + op + "' on device kind " FSM_CUDA_KIND);
  return id;
}

void CudaDevice::launch(int stream, KernelCall& call) {
  use();
  const KernelEntry& k = kernelEntry(call.kernel);
  KernelContext ctx;
  ctx.stream = streams_[stream];
  ctx.multiprocessors = multiprocessors_;
  ctx.workspace = workspace_[stream];
  ctx.workspaceBytes = workspaceBytes_[stream];
  ctx.blas = blas_[stream].get();
  ctx.error = error_;
  ctx.instruction = static_cast<int>(call.instruction);  // -1 for runKernel's calls
  if (k.blas == UsesBlas::Yes && !ctx.blas) throw std::logic_error("internal: a cuBLAS kernel launched before prepare()");
#ifdef FSM_SIMT
  // A kernel that says it fills its outputs gets them full of NaN bits (-1 for integers) here, not zeros or
  // stale bytes, so an element it leaves unwritten shows in every comparison. Outputs sharing bytes with an
  // input are left alone (in place).
  if (k.fills == FillsOutputs::Yes) {
    for (const Tensor& o : call.outputs) {
      bool shared = false;
      for (const Tensor& i : call.inputs) shared = shared || overlaps(o.data, o.bytes(), i.data, i.bytes());
      if (!shared) check(cudaMemsetAsync(o.data, 0xff, o.bytes(), streams_[stream]), "memset");
    }
  }
#endif
  k.launch(ctx, call.inputs, call.outputs, call.attrs);
}

void CudaDevice::zero(int stream, void* data, size_t bytes) {
  use();
  check(cudaMemsetAsync(data, 0, bytes, streams_[stream]), "memset");
}

void CudaDevice::copyIn(int stream, void* device, const void* host, size_t bytes) {
  use();
  check(cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, streams_[stream]), "copy to the device");
  check(cudaStreamSynchronize(streams_[stream]), "copy to the device");  // the host buffer may go once we return
}

void CudaDevice::copyOut(int stream, void* host, const void* device, size_t bytes) {
  use();
  check(cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost, streams_[stream]), "copy from the device");
  check(cudaStreamSynchronize(streams_[stream]), "copy from the device");
}

void CudaDevice::beginRun(bool traced) {
  tracing_ = traced;
  {
    std::lock_guard<std::mutex> lk(mutex_);
    recorded_[0] = recorded_[1] = 0;
    aborted_ = false;
  }
  fault_.reset();
  if (tracing_) {
    use();
    if (!traceOrigin_) check(cudaEventCreateWithFlags(&traceOrigin_, cudaEventDefault), "event creation");
    // Both streams start after the origin (the communication stream waits on it), so every time is after it.
    check(cudaEventRecord(traceOrigin_, streams_[0]), "event record");
    check(cudaStreamWaitEvent(streams_[1], traceOrigin_, 0), "stream wait");
    std::fill(traceMarked_.begin(), traceMarked_.end(), 0);
  }
}

void CudaDevice::traceMark(int stream, size_t instruction, bool begin) {
  use();
  const size_t k = 2 * instruction + (begin ? 0 : 1);
  cudaEvent_t e;
  {
    // The two streams mark different instructions, but may grow the lists at once.
    std::lock_guard<std::mutex> lk(mutex_);
    if (traceEvents_.size() <= k) {
      traceEvents_.resize(2 * (instruction + 1), nullptr);
      traceMarked_.resize(traceEvents_.size(), 0);
    }
    if (!traceEvents_[k]) check(cudaEventCreateWithFlags(&traceEvents_[k], cudaEventDefault), "event creation");
    e = traceEvents_[k];
    traceMarked_[k] = 1;
  }
  check(cudaEventRecord(e, streams_[stream]), "event record");
}

void CudaDevice::traceTimings(std::vector<double>& timings) {
  use();
  for (size_t k = 0; k < timings.size() && k < traceEvents_.size(); k++) {
    float ms = 0;
    if (traceMarked_[k] && cudaEventElapsedTime(&ms, traceOrigin_, traceEvents_[k]) == cudaSuccess) timings[k] = ms / 1e3;
  }
}

void CudaDevice::drain(int s) {
  size_t done = 0;       // completions looked at (those without an event pass)
  size_t confirmed = 0;  // completions known done: up to the last event found complete
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(timeoutSeconds_));
  for (;;) {
    const cudaError_t e = cudaStreamQuery(streams_[s]);
    if (e == cudaSuccess) return;
    if (e != cudaErrorNotReady) {
      if (!fault_) fault_ = DeviceFault{-1, std::string("CUDA error while the step ran: ") + cudaGetErrorString(e)};
      return;
    }
    // Progress (another of the stream's events completed) restarts the clock: only a stall times out.
    size_t recorded;
    {
      std::lock_guard<std::mutex> lk(mutex_);
      recorded = std::min(recorded_[s], events_[s].size());
    }
    while (done < recorded && (events_[s][done] == nullptr || cudaEventQuery(events_[s][done]) == cudaSuccess)) {
      if (events_[s][done] != nullptr) {
        confirmed = done + 1;
        deadline = std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(timeoutSeconds_));
      }
      done++;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      if (!fault_) {
        std::ostringstream m;
        m << "the GPU made no progress on its " << (s == kComputeStream ? "compute" : "communication") << " stream for " << timeoutSeconds_
          << " s (at least " << confirmed << " of its " << recorded << " instructions done): a collective whose peers never came?";
        fault_ = DeviceFault{static_cast<int64_t>(-1), m.str()};
      }
      return;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

void CudaDevice::endRun() {
  use();
  // Everything enqueued must finish before the step counts as done (and before its arena is read).
  for (int s = 0; s < kStreams; s++) drain(s);
  if (error_ == nullptr || fault_) return;
  DeviceError e{};
  if (cudaMemcpy(&e, error_, sizeof e, cudaMemcpyDeviceToHost) != cudaSuccess) {
    fault_ = DeviceFault{-1, "CUDA error reading the kernels' error record"};
    return;
  }
  if (e.code != kErrorNone) {
    fault_ = DeviceFault{e.instruction, describe(e)};
    const DeviceError clear{};
    cudaMemcpy(error_, &clear, sizeof clear, cudaMemcpyHostToDevice);
  }
}

std::optional<DeviceFault> CudaDevice::takeFault() {
  std::optional<DeviceFault> f = std::move(fault_);
  fault_.reset();
  return f;
}

void CudaDevice::record(int stream) {
  use();
  // Only this stream's thread adds to its list, but the other stream's reads it (wait), so both under mutex_;
  // events are made during the first run and reused after.
  const size_t i = recorded_[stream];  // only this stream's thread changes it
  const std::vector<uint8_t>& w = waitedOn_[stream];
  // Every 64th completion gets one too, so the end of a run can tell a slow stream from a stalled one (drain).
  const bool waited = w.empty() || (i + 1 < w.size() && w[i + 1]) || (i + 1) % 64 == 0;
  if (waited) {
    cudaEvent_t event = nullptr;
    {
      std::lock_guard<std::mutex> lk(mutex_);
      if (events_[stream].size() <= i) events_[stream].resize(i + 1, nullptr);
      event = events_[stream][i];
    }
    if (event == nullptr) {
      check(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "event creation");
      std::lock_guard<std::mutex> lk(mutex_);
      events_[stream][i] = event;
    }
    check(cudaEventRecord(event, streams_[stream]), "event record");
  }
  {
    std::lock_guard<std::mutex> lk(mutex_);
    recorded_[stream]++;
  }
  cv_.notify_all();
}

bool CudaDevice::wait(int stream, int other, size_t count) {
  cudaEvent_t event;
  {
    std::unique_lock<std::mutex> lk(mutex_);
    cv_.wait(lk, [&] { return aborted_ || recorded_[other] >= count; });
    if (recorded_[other] < count) return false;
    event = count - 1 < events_[other].size() ? events_[other][count - 1] : nullptr;
  }
  if (event == nullptr) throw std::logic_error("internal: a wait for a completion nobody said would be waited for");
  use();
  check(cudaStreamWaitEvent(streams_[stream], event, 0), "stream wait");
  return true;
}

void CudaDevice::abortWaits() {
  {
    std::lock_guard<std::mutex> lk(mutex_);
    aborted_ = true;
  }
  cv_.notify_all();
}

}  // namespace FSM_CUDA_NS
}  // namespace fsm
