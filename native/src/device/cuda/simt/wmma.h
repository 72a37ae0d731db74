// The subset of CUDA's nvcuda::wmma (warp matrix multiply-accumulate on tensor cores) that device/cuda/kernels/
// use, for the SIMT emulator; included at the end of simt.h, reached through device/cuda/tensor_cores.h. Shape
// m16n16k16 only: matrix_a / matrix_b fragments of bf16 or f16 (row- or column-major) and f32 accumulators;
// fill_fragment, load_matrix_sync, store_matrix_sync (mem_row_major / mem_col_major), mma_sync, and x[i] /
// num_elements. A GPU's fragment layout is opaque, so here every lane holds the whole 16x16 tile (element
// (r, c) at x[16·r + c], 256 of them): kernels may touch x[i] only in ways that do not depend on where element
// i sits (every element alike, or elementwise between fragments of one type, which share a layout on a GPU too).
// Loads, stores and products are warp-collective: each starts with a full-warp __syncwarp, so a lane that skips
// one (a divergent call) is reported as any barrier some lanes never reach. A store writes, per lane, only the
// elements i ≡ lane (mod 32), so a lane that reads the stored tile without a __syncwarp first sees stale values,
// as it could on a GPU. Pointers must be 256-bit aligned and ldm a multiple of 16 bytes, as on a GPU (checked).
// mma_sync accumulates in f32 in a dot product's order (c, then k ascending; the products are exact); a
// GPU's tensor cores add in another order, so tests compare with tolerances.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>

#include "core/half.h"
#include "device/cuda/simt/fiber.h"
#include "device/cuda/simt/simt.h"

namespace fsm {
namespace simt {

/** CUDA's 16-bit float types as the emulator stores them: the bits (core/half.h converts). */
struct __nv_bfloat16 {
  uint16_t bits;
};
struct __half {
  uint16_t bits;
};

namespace wmma {

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

namespace detail {

inline float widen(float v) { return v; }
inline float widen(__nv_bfloat16 v) { return fromBf16(v.bits); }
inline float widen(__half v) { return fromF16(v.bits); }

/** What a GPU requires of a fragment's memory: a 256-bit aligned pointer, rows (or columns) 16 bytes apart at least. */
template <typename T>
void checkMemory(const T* p, unsigned ldm, const char* op) {
  if (reinterpret_cast<uintptr_t>(p) % 32 != 0) throw SimtError(std::string("simt: wmma::") + op + " of a pointer that is not 256-bit aligned");
  if (ldm < 16 || ldm * sizeof(T) % 16 != 0) {
    throw SimtError(std::string("simt: wmma::") + op + " with ldm " + std::to_string(ldm) + " (at least 16 elements, a multiple of 16 bytes)");
  }
}

template <typename Use, typename T, typename Layout>
constexpr bool valid() {
  return std::is_same<Use, accumulator>::value
             ? std::is_same<T, float>::value && std::is_void<Layout>::value
             : (std::is_same<Use, matrix_a>::value || std::is_same<Use, matrix_b>::value) &&
                   (std::is_same<T, __nv_bfloat16>::value || std::is_same<T, __half>::value) &&
                   (std::is_same<Layout, row_major>::value || std::is_same<Layout, col_major>::value);
}

}  // namespace detail

template <typename Use, int M, int N, int K, typename T, typename Layout = void>
class fragment {
  static_assert(M == 16 && N == 16 && K == 16, "simt: wmma emulates the m16n16k16 shape only");
  static_assert(detail::valid<Use, T, Layout>(),
                "simt: wmma emulates bf16/f16 matrix_a and matrix_b fragments (row_major or col_major) and f32 accumulators");

 public:
  using element_type = T;
  enum { num_elements = 256 };
  T x[num_elements];  // element (r, c) of the tile at x[16·r + c], in every lane
};

template <typename Use, int M, int N, int K, typename T, typename Layout>
void fill_fragment(fragment<Use, M, N, K, T, Layout>& f, const T& v) {
  for (int i = 0; i < f.num_elements; i++) f.x[i] = v;
}

/** A matrix_a (16×16, m × k) or matrix_b (k × n) tile from row-major or column-major memory, ldm elements apart. */
template <typename Use, typename T, typename Layout>
void load_matrix_sync(fragment<Use, 16, 16, 16, T, Layout>& f, const T* p, unsigned ldm) {
  static_assert(!std::is_same<Use, accumulator>::value, "an accumulator's load names its memory layout");
  __syncwarp();
  detail::checkMemory(p, ldm, "load_matrix_sync");
  constexpr bool columns = std::is_same<Layout, col_major>::value;
  for (unsigned r = 0; r < 16; r++)
    for (unsigned c = 0; c < 16; c++) f.x[16 * r + c] = columns ? p[c * ldm + r] : p[r * ldm + c];
}

inline void load_matrix_sync(fragment<accumulator, 16, 16, 16, float>& f, const float* p, unsigned ldm, layout_t layout) {
  __syncwarp();
  detail::checkMemory(p, ldm, "load_matrix_sync");
  for (unsigned r = 0; r < 16; r++)
    for (unsigned c = 0; c < 16; c++) f.x[16 * r + c] = layout == mem_col_major ? p[c * ldm + r] : p[r * ldm + c];
}

/** Each lane writes its share, the elements i ≡ lane (mod 32): the tile is whole once every lane has stored. */
inline void store_matrix_sync(float* p, const fragment<accumulator, 16, 16, 16, float>& f, unsigned ldm, layout_t layout) {
  __syncwarp();
  detail::checkMemory(p, ldm, "store_matrix_sync");
  for (unsigned i = laneId(); i < 256; i += warpSize) {
    const unsigned r = i / 16, c = i % 16;
    p[layout == mem_col_major ? c * ldm + r : r * ldm + c] = f.x[i];
  }
}

/** d = a·b + c, d[r][n] = c[r][n] + Σ_k a[r][k]·b[k][n] summed in f32 with k ascending (d may be c). */
template <typename T, typename LayoutA, typename LayoutB>
void mma_sync(fragment<accumulator, 16, 16, 16, float>& d, const fragment<matrix_a, 16, 16, 16, T, LayoutA>& a,
              const fragment<matrix_b, 16, 16, 16, T, LayoutB>& b, const fragment<accumulator, 16, 16, 16, float>& c) {
  __syncwarp();
  float a32[256], b32[256], out[256];
  for (int i = 0; i < 256; i++) {
    a32[i] = detail::widen(a.x[i]);
    b32[i] = detail::widen(b.x[i]);
  }
  for (int r = 0; r < 16; r++) {
    for (int n = 0; n < 16; n++) {
      float s = c.x[16 * r + n];
      for (int k = 0; k < 16; k++) s += a32[16 * r + k] * b32[16 * k + n];
      out[16 * r + n] = s;
    }
  }
  for (int i = 0; i < 256; i++) d.x[i] = out[i];
}

}  // namespace wmma
}  // namespace simt
}  // namespace fsm
