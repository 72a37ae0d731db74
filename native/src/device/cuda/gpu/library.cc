// Library (library.h): dlopen with the search order and errors the GPU build's run-time libraries share.
#include "device/cuda/gpu/library.h"

#include <dlfcn.h>

#include <cstdlib>
#include <stdexcept>

namespace fsm {
namespace cuda {

Library::Library(const char* what, const char* envPath, const std::vector<std::string>& sonames, const std::string& hint) : what_(what) {
  const char* path = std::getenv(envPath);
  std::string tried;
  if (path != nullptr && *path != '\0') {
    handle_ = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!handle_) throw std::runtime_error(std::string(what) + " not loaded from " + envPath + "=" + path + ": " + dlerror());
    name_ = path;
    return;
  }
  for (const std::string& s : sonames) {
    handle_ = dlopen(s.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle_) {
      name_ = s;
      return;
    }
    tried += (tried.empty() ? "" : ", ") + s;
  }
  throw std::runtime_error(std::string(what) + " not found (tried " + tried + "): " + hint + "; or set " + envPath + " to the library's path");
}

void* Library::symbol(const char* name) const {
  void* p = dlsym(handle_, name);
  if (!p) throw std::runtime_error(what_ + " (" + name_ + ") lacks " + name + ": a newer version is needed");
  return p;
}

}  // namespace cuda
}  // namespace fsm
