// makeNcclCommunicator (make.h): the host communicator for point-to-point and the MPI world's place.
#include "comm/nccl/make.h"

#include <chrono>
#include <stdexcept>

#include "comm/inprocess.h"
#include "comm/nccl/nccl_communicator.h"
#include "comm/staged.h"
#ifdef FSM_HAVE_MPI
#include "comm/mpi/mpi_communicator.h"
#include "comm/mpi/mpi_world.h"
#endif

namespace fsm {
namespace nccl {

std::unique_ptr<Communicator> makeNcclCommunicator(int worldSize, const std::vector<int>& localRanks, double timeoutSeconds, const std::map<int, Device*>& devices) {
  const auto timeout = std::chrono::duration<double>(timeoutSeconds);
  std::unique_ptr<Communicator> host;
  int processes = 1, process = 0;
  if (localRanks.size() == static_cast<size_t>(worldSize)) {
    host = std::make_unique<InProcessCommunicator>(worldSize, timeout);
  } else {
#ifdef FSM_HAVE_MPI
    host = std::make_unique<MpiCommunicator>(worldSize, localRanks, timeout);
    processes = mpi::world().size;
    process = mpi::world().rank;
#else
    throw CommError(CommError::Kind::Invalid, "ranks in other processes need MPI, and this fsm was built without it");
#endif
  }
  try {
    ncclApi();
  } catch (const std::runtime_error& e) {
    throw CommError(CommError::Kind::Invalid, e.what());
  }
  return std::make_unique<NcclCommunicator>(worldSize, devices, std::make_unique<StagedCommunicator>(std::move(host), devices), processes, process, timeoutSeconds);
}

}  // namespace nccl
}  // namespace fsm
