// Shared libraries the GPU build loads at run time instead of linking (cuBLAS, NCCL): found by an environment
// variable naming the file, else by the loader's search under each known soname; a library that is missing or
// lacks a symbol is an error that says which, and how to get it.
#pragma once

#include <string>
#include <vector>

namespace fsm {
namespace cuda {

class Library {
 public:
  /** Opens `envPath`'s file when that variable is set, else the first of `sonames` the loader finds. `what`
   *  names it in errors ("cuBLAS"), `hint` says how to get it. Throws std::runtime_error. */
  Library(const char* what, const char* envPath, const std::vector<std::string>& sonames, const std::string& hint);
  /** The symbol's address; throws when the library lacks it. */
  void* symbol(const char* name) const;
  /** fn = the symbol `name`, as fn's function type. */
  template <typename F>
  void bind(F& fn, const char* name) const {
    fn = reinterpret_cast<F>(symbol(name));
  }
  const std::string& name() const { return name_; }

 private:
  void* handle_ = nullptr;
  std::string what_;
  std::string name_;
};

}  // namespace cuda
}  // namespace fsm
