// createCommunicator (create.h): "inprocess", "delay" (comm/testing: the in-process communicator behind
// seeded random sleeps), "mpi" (comm/mpi: between processes; only when built with MPI) and "nccl"
// (comm/nccl: between GPUs; only in the GPU build).
#include "comm/create.h"

#include <chrono>
#include <cmath>
#include <sstream>

#include "comm/inprocess.h"
#include "comm/testing/delay.h"
#include "core/failure.h"
#ifdef FSM_HAVE_MPI
#include "comm/mpi/mpi_communicator.h"
#endif
#ifdef FSM_HAVE_CUDA
#include "comm/nccl/make.h"
#endif

namespace fsm {
namespace {

double numberOption(const Plugin& p, const char* name, double lo, double hi) {
  auto it = p.options.numbers.find(name);
  if (it == p.options.numbers.end() || !std::isfinite(it->second) || std::floor(it->second) != it->second || it->second < lo || it->second > hi) {
    std::ostringstream range;
    range << "[" << lo << ", " << hi << "]";
    refuse(JsClass::TypeError, {}, p.field + "." + name + " must be an integer in " + range.str());
  }
  return it->second;
}

std::unique_ptr<Communicator> inProcess(int worldSize, const std::vector<int>& localRanks, double timeoutSeconds) {
  if (localRanks.size() != static_cast<size_t>(worldSize)) {
    refuse(JsClass::RangeError, {}, "worldSize " + std::to_string(worldSize) + " but this process runs " + std::to_string(localRanks.size()) +
                                        " device(s): ranks outside this process need a communicator between processes (MPI), which is not built yet");
  }
  return std::make_unique<InProcessCommunicator>(worldSize, std::chrono::duration<double>(timeoutSeconds));
}

}  // namespace

std::unique_ptr<Communicator> createCommunicator(const Plugin& p, int worldSize, const std::vector<int>& localRanks, double timeoutSeconds,
                                                 const std::map<int, Device*>& devices) {
  if (p.kind == "inprocess") {
    p.allowOnly({});
    return inProcess(worldSize, localRanks, timeoutSeconds);
  }
  if (p.kind == "delay") {
    p.allowOnly({"seed", "maxMicros"});
    const double seed = numberOption(p, "seed", 0, 9007199254740991.0);
    const double maxMicros = numberOption(p, "maxMicros", 0, 1e6);
    return std::make_unique<DelayCommunicator>(inProcess(worldSize, localRanks, timeoutSeconds), static_cast<uint64_t>(seed), maxMicros);
  }
  if (p.kind == "mpi") {
    p.allowOnly({});
#ifdef FSM_HAVE_MPI
    try {
      return std::make_unique<MpiCommunicator>(worldSize, localRanks, std::chrono::duration<double>(timeoutSeconds));
    } catch (const CommError& e) {
      refuse(JsClass::RangeError, {}, p.field + ": " + e.what());
    } catch (const std::runtime_error& e) {
      refuse(JsClass::Error, {}, p.field + ": MPI could not start: " + e.what());
    }
#else
    refuse(JsClass::Error, {}, p.field + ".kind \"mpi\": this fsm was built without MPI (apt-get install -y libopenmpi-dev openmpi-bin, then npm run build:native)");
#endif
  }
  if (p.kind == "nccl") {
    p.allowOnly({});
#ifdef FSM_HAVE_CUDA
    try {
      return nccl::makeNcclCommunicator(worldSize, localRanks, timeoutSeconds, devices);
    } catch (const CommError& e) {
      refuse(JsClass::Error, {}, p.field + ": " + e.what());
    }
#else
    (void)devices;
    refuse(JsClass::Error, {}, p.field + ".kind \"nccl\": this fsm was built without CUDA (install the CUDA toolkit, then npm run build:native)");
#endif
  }
  refuse(JsClass::TypeError, {}, p.field + ".kind must be \"inprocess\", \"delay\", \"mpi\" or \"nccl\", got \"" + p.kind + "\"");
}

}  // namespace fsm
