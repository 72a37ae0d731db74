// The MPI process world: this process's place among the processes `mpirun` started, MPI initialized once on
// first use (MPI_THREAD_MULTIPLE: every local device's communication thread calls MPI itself) and finalized at
// exit, and the small host exchanges the TypeScript side needs between processes (losses, plan fingerprints,
// figures, barriers), each with a deadline so a dead or stuck process is an error, never a hang.
// Built only with FSM_HAVE_MPI (CMake finds MPI's C library).
#pragma once

#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace fsm::mpi {

struct WorldInfo {
  int size = 1;
  int rank = 0;
  std::string library;  // MPI_Get_library_version's first line
  int tagUpperBound = 32767;
};

/** Initializes MPI on first call (it makes the MPI library's symbols global first, so Open MPI's plug-ins
 *  loaded by MPI_Init resolve them), then returns this process's place. Throws std::runtime_error when MPI
 *  cannot start or lacks MPI_THREAD_MULTIPLE. */
const WorldInfo& world();
/** MPI_Get_library_version's first line (callable before MPI starts). */
std::string libraryVersion();
/** MPI_Finalize, once, when initialized and not already finalized; a no-op otherwise. */
void finalize();

/** The host exchanges' own duplicate of MPI_COMM_WORLD, so their traffic never matches a communicator's. */
MPI_Comm hostComm();
/** A fresh duplicate of MPI_COMM_WORLD (collective over every process, with errors returned as codes): each
 *  MpiCommunicator takes its own, so two clusters' messages never mix. */
MPI_Comm duplicateWorld();

/** `stop` runs before MPI_Finalize (a communicator's listener thread must stop calling MPI first); `key`
 *  removes it again. */
void atFinalize(const void* key, std::function<void()> stop);
void removeAtFinalize(const void* key);
bool finalizedAlready();

/** Waits until every request completes, polling (MPI_Testsome) with a short backoff. Returns the indices of
 *  requests still pending when `stop()` turned true or the deadline passed (empty: all completed). */
std::vector<size_t> waitAll(std::vector<MPI_Request>& requests, std::chrono::steady_clock::time_point deadline,
                            const std::function<bool()>& stop = nullptr);

/** Sleeps a little longer each call of one wait loop: spinning costs the cores the devices compute on, sleeping
 *  long costs latency; starts at a yield and backs off to 200 µs. */
class Backoff {
 public:
  void pause();
  void reset() { spins_ = 0; }

 private:
  int spins_ = 0;
};

/** Every process's bytes, in process order (an error after `timeoutSeconds` when some process never comes). */
std::vector<std::vector<uint8_t>> allGather(const std::vector<uint8_t>& bytes, double timeoutSeconds);
void barrier(double timeoutSeconds);

/** An MPI error code as text. */
std::string errorText(int code);

}  // namespace fsm::mpi
