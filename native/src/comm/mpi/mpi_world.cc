// The MPI process world (mpi_world.h): start-up (symbols made global, MPI_Init_thread), the duplicated
// communicators, polling waits and the host exchanges.
#include "comm/mpi/mpi_world.h"

#include <dlfcn.h>

#include <algorithm>
#include <climits>
#include <map>
#include <mutex>
#include <stdexcept>
#include <thread>

namespace fsm::mpi {
namespace {

std::once_flag started;
bool ready = false;
bool finalized = false;
WorldInfo info;
MPI_Comm host = MPI_COMM_NULL;
std::mutex hooksMutex;
std::map<const void*, std::function<void()>> hooks;

// Node loads an addon with RTLD_LOCAL, so libmpi's symbols are not visible to the plug-ins Open MPI dlopens
// during MPI_Init (they fail with "undefined symbol: ompi_..."). Reopening the library that defines MPI_Init
// with RTLD_GLOBAL (it is loaded already: RTLD_NOLOAD) makes them visible.
void makeSymbolsGlobal() {
  Dl_info where{};
  if (dladdr(reinterpret_cast<void*>(&MPI_Init_thread), &where) != 0 && where.dli_fname != nullptr) {
    dlopen(where.dli_fname, RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD);
  }
}

void check(int code, const char* what) {
  if (code != MPI_SUCCESS) throw std::runtime_error(std::string(what) + ": " + errorText(code));
}

void start() {
  makeSymbolsGlobal();
  int flag = 0;
  MPI_Initialized(&flag);
  if (!flag) {
    int provided = MPI_THREAD_SINGLE;
    check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided), "MPI_Init_thread");
    if (provided < MPI_THREAD_MULTIPLE) {
      throw std::runtime_error("this MPI library does not provide MPI_THREAD_MULTIPLE (each device's communication thread calls MPI): use Open MPI 4 or later");
    }
  }
  // Errors come back as codes (turned into clear failures), instead of MPI aborting the whole job.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_size(MPI_COMM_WORLD, &info.size);
  MPI_Comm_rank(MPI_COMM_WORLD, &info.rank);
  info.library = libraryVersion();
  void* ub = nullptr;
  int found = 0;
  MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &found);
  if (found && ub != nullptr) info.tagUpperBound = *static_cast<int*>(ub);
  check(MPI_Comm_dup(MPI_COMM_WORLD, &host), "MPI_Comm_dup");
  MPI_Comm_set_errhandler(host, MPI_ERRORS_RETURN);
  ready = true;
}

std::chrono::steady_clock::time_point deadlineAfter(double seconds) {
  return std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(seconds));
}

// Waits for one host exchange's requests, or throws naming the exchange.
void finish(std::vector<MPI_Request>& requests, double timeoutSeconds, const char* what) {
  if (!waitAll(requests, deadlineAfter(timeoutSeconds)).empty()) {
    throw std::runtime_error(std::string(what) + " between the " + std::to_string(info.size) + " processes timed out after " +
                             std::to_string(timeoutSeconds) + " s at process " + std::to_string(info.rank) +
                             " (another process failed, was killed or is stuck)");
  }
}

}  // namespace

std::string errorText(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  return std::string(text, static_cast<size_t>(length));
}

const WorldInfo& world() {
  std::call_once(started, start);  // an exception leaves it uncalled: the next call tries again
  return info;
}

std::string libraryVersion() {
  char version[MPI_MAX_LIBRARY_VERSION_STRING];
  int length = 0;
  if (MPI_Get_library_version(version, &length) != MPI_SUCCESS) return "MPI";
  const std::string text(version, static_cast<size_t>(length));
  return text.substr(0, text.find_first_of("\r\n,"));
}

void finalize() {
  if (!ready || finalized) return;
  std::map<const void*, std::function<void()>> stops;
  {
    std::lock_guard<std::mutex> lk(hooksMutex);
    stops.swap(hooks);
  }
  for (auto& [key, stop] : stops) stop();
  finalized = true;
  MPI_Comm_free(&host);
  MPI_Finalize();
}

bool finalizedAlready() { return finalized; }

void atFinalize(const void* key, std::function<void()> stop) {
  std::lock_guard<std::mutex> lk(hooksMutex);
  hooks[key] = std::move(stop);
}

void removeAtFinalize(const void* key) {
  std::lock_guard<std::mutex> lk(hooksMutex);
  hooks.erase(key);
}

MPI_Comm hostComm() { return world(), host; }

MPI_Comm duplicateWorld() {
  world();
  MPI_Comm c = MPI_COMM_NULL;
  check(MPI_Comm_dup(MPI_COMM_WORLD, &c), "MPI_Comm_dup");
  MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
  return c;
}

void Backoff::pause() {
  if (spins_ < 64) {
    spins_++;
    std::this_thread::yield();
    return;
  }
  const int micros = std::min(200, 5 << std::min(spins_++ - 64, 5));
  std::this_thread::sleep_for(std::chrono::microseconds(micros));
}

std::vector<size_t> waitAll(std::vector<MPI_Request>& requests, std::chrono::steady_clock::time_point deadline, const std::function<bool()>& stop) {
  std::vector<int> done(requests.size());
  Backoff backoff;
  for (;;) {
    size_t pending = 0;
    bool progressed = false;
    for (size_t i = 0; i < requests.size(); i++) {
      if (requests[i] == MPI_REQUEST_NULL) continue;
      int flag = 0;
      MPI_Test(&requests[i], &flag, MPI_STATUS_IGNORE);
      if (flag) progressed = true;
      else pending++;
    }
    if (pending == 0) return {};
    if ((stop && stop()) || std::chrono::steady_clock::now() >= deadline) {
      std::vector<size_t> left;
      for (size_t i = 0; i < requests.size(); i++) {
        if (requests[i] != MPI_REQUEST_NULL) left.push_back(i);
      }
      return left;
    }
    if (progressed) backoff.reset();
    backoff.pause();
  }
}

std::vector<std::vector<uint8_t>> allGather(const std::vector<uint8_t>& values, double timeoutSeconds) {
  const MPI_Comm comm = hostComm();
  if (values.size() > static_cast<size_t>(INT_MAX) / static_cast<size_t>(info.size)) throw std::runtime_error("a host all-gather of more than 2 GiB");
  int mine = static_cast<int>(values.size());
  std::vector<int> counts(static_cast<size_t>(info.size));
  std::vector<MPI_Request> r(1, MPI_REQUEST_NULL);
  check(MPI_Iallgather(&mine, 1, MPI_INT, counts.data(), 1, MPI_INT, comm, &r[0]), "MPI_Iallgather");
  finish(r, timeoutSeconds, "a host all-gather");
  std::vector<int> offsets(counts.size());
  int total = 0;
  for (size_t p = 0; p < counts.size(); p++) {
    offsets[p] = total;
    total += counts[p];
  }
  std::vector<uint8_t> all(static_cast<size_t>(total));
  check(MPI_Iallgatherv(values.data(), mine, MPI_BYTE, all.data(), counts.data(), offsets.data(), MPI_BYTE, comm, &r[0]), "MPI_Iallgatherv");
  finish(r, timeoutSeconds, "a host all-gather");
  std::vector<std::vector<uint8_t>> out;
  for (size_t p = 0; p < counts.size(); p++) out.emplace_back(all.begin() + offsets[p], all.begin() + offsets[p] + counts[p]);
  return out;
}

void barrier(double timeoutSeconds) {
  std::vector<MPI_Request> r(1, MPI_REQUEST_NULL);
  check(MPI_Ibarrier(hostComm(), &r[0]), "MPI_Ibarrier");
  finish(r, timeoutSeconds, "a barrier");
}

}  // namespace fsm::mpi
