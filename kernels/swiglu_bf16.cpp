#include "kernels/swiglu_bf16.hpp"

#include <stdexcept>

#include "kernels/bf16_pack.hpp"
#include "kernels/gate_exp.hpp"
#include "kernels/swiglu_host_rows.hpp"

namespace shardft {

namespace {
void check(std::size_t gu_rows, std::size_t gu_cols, std::size_t rows, std::size_t cols, const char* what) {
  if (gu_rows != rows || gu_cols != 2 * cols) {
    throw std::invalid_argument(std::string(what) + ": gu must be [N, 2I] for an [N, I] half");
  }
}

// silu(g) * u in fp32 from the bf16 inputs, before its rounding: forward's s, and backward's recompute of it.
// (kmath's fast forms: host_exp and a division on the host, the hardware approximations on a GPU.)
KOKKOS_INLINE_FUNCTION float swiglu_of(float g, float u) { return kmath::fast_divide(g, 1.f + kmath::fast_gate_exp(-g)) * u; }

// The row of a flat pack index: a 32-bit division where every index fits (a GPU's 64-bit division is
// a long emulated sequence, and these kernels run one per 16-byte pack).
template <bool Narrow>
KOKKOS_INLINE_FUNCTION std::int64_t row_of(std::int64_t idx, std::int64_t packs) {
  if constexpr (Narrow) {
    return static_cast<std::int64_t>(static_cast<std::uint32_t>(idx) / static_cast<std::uint32_t>(packs));
  } else {
    return idx / packs;
  }
}

bool narrow_indices(std::int64_t rows, std::int64_t cols) { return rows * cols <= 0xffffffffLL; }

// Over the elements of s in packs of W along each row: one thread per pack, neighbouring threads on
// neighbouring packs of each half (coalesced), one index division per pack.
template <int W, bool Narrow>
void forward_packs(Unmanaged2<const bf16> gu, Unmanaged2<bf16> s) {
  const std::int64_t cols = static_cast<std::int64_t>(s.extent(1)), packs = cols / W;
  const bf16* in = gu.data();
  bf16* out = s.data();
  Kokkos::parallel_for(
      "swiglu_forward_packed_bf16", Range(0, static_cast<std::int64_t>(s.extent(0)) * packs),
      KOKKOS_LAMBDA(const std::int64_t idx) {
        const std::int64_t n = row_of<Narrow>(idx, packs), j = (idx - n * packs) * W;
        const Bf16Pack<W> g = load_pack<W>(in + n * 2 * cols + j), u = load_pack<W>(in + n * 2 * cols + cols + j);
        Bf16Pack<W> y;
        for (int e = 0; e < W; ++e) y.set(e, swiglu_of(g.get(e), u.get(e)));
        store_pack<W>(out + n * cols + j, y);
      });
}

template <int W, bool Narrow>
void backward_packs(Unmanaged2<bf16> gu, Unmanaged2<const bf16> ds, Unmanaged2<bf16> s) {
  const std::int64_t cols = static_cast<std::int64_t>(ds.extent(1)), packs = cols / W;
  bf16* gu_p = gu.data();
  const bf16* ds_p = ds.data();
  bf16* s_p = s.data();
  Kokkos::parallel_for(
      "swiglu_backward_packed_bf16", Range(0, static_cast<std::int64_t>(ds.extent(0)) * packs),
      KOKKOS_LAMBDA(const std::int64_t idx) {
        const std::int64_t n = row_of<Narrow>(idx, packs), j = (idx - n * packs) * W;
        bf16* g_at = gu_p + n * 2 * cols + j;
        const Bf16Pack<W> g = load_pack<W>(g_at), u = load_pack<W>(g_at + cols), d = load_pack<W>(ds_p + n * cols + j);
        Bf16Pack<W> dg, du, y;
        for (int e = 0; e < W; ++e) {
          const float x = g.get(e), up = u.get(e), de = d.get(e);
          const float sig = kmath::fast_divide(1.f, 1.f + kmath::fast_gate_exp(-x));
          y.set(e, swiglu_of(x, up));
          du.set(e, de * x * sig);
          dg.set(e, de * up * sig * (1.f + x * (1.f - sig)));
        }
        store_pack<W>(s_p + n * cols + j, y);
        store_pack<W>(g_at + cols, du);
        store_pack<W>(g_at, dg);
      });
}
// On the host: one row per iteration and a plain loop along it, which the compiler vectorises (the
// packs' fixed-width loops above, one index division and eight roundings each, stay scalar there).
void forward_rows(Unmanaged2<const bf16> gu, Unmanaged2<bf16> s) {
  const std::int64_t cols = static_cast<std::int64_t>(s.extent(1));
  const bf16* in = gu.data();
  bf16* out = s.data();
  Kokkos::parallel_for(
      "swiglu_forward_packed_bf16", Range(0, static_cast<std::int64_t>(s.extent(0))), KOKKOS_LAMBDA(const std::int64_t n) {
        const bf16* g = in + n * 2 * cols;
        const bf16* u = g + cols;
        bf16* y = out + n * cols;
        for (std::int64_t j = 0; j < cols; ++j) y[j] = bf16(swiglu_of(static_cast<float>(g[j]), static_cast<float>(u[j])));
      });
}

void backward_rows(Unmanaged2<bf16> gu, Unmanaged2<const bf16> ds, Unmanaged2<bf16> s) {
  const std::int64_t cols = static_cast<std::int64_t>(ds.extent(1));
  bf16* gu_p = gu.data();
  const bf16* ds_p = ds.data();
  bf16* s_p = s.data();
  Kokkos::parallel_for(
      "swiglu_backward_packed_bf16", Range(0, static_cast<std::int64_t>(ds.extent(0))), KOKKOS_LAMBDA(const std::int64_t n) {
        bf16* g = gu_p + n * 2 * cols;
        bf16* u = g + cols;
        const bf16* d = ds_p + n * cols;
        bf16* y = s_p + n * cols;
        for (std::int64_t j = 0; j < cols; ++j) {
          const float x = static_cast<float>(g[j]), up = static_cast<float>(u[j]), de = static_cast<float>(d[j]);
          const float sig = kmath::fast_divide(1.f, 1.f + kmath::fast_gate_exp(-x));
          y[j] = bf16(swiglu_of(x, up));
          u[j] = bf16(de * x * sig);
          g[j] = bf16(de * up * sig * (1.f + x * (1.f - sig)));
        }
      });
}
}  // namespace

void swiglu_forward_packed_bf16(Unmanaged2<const bf16> gu, Unmanaged2<bf16> s) {
  check(gu.extent(0), gu.extent(1), s.extent(0), s.extent(1), "swiglu_forward_packed_bf16");
  const std::int64_t width = static_cast<std::int64_t>(s.extent(1));
  if (swiglu_detail::on_avx512_rows("swiglu_forward_packed_bf16", s.extent(0), [=](std::int64_t n) {
        const std::uint16_t* g = &(gu.data() + n * gu.stride_0())->bits;
        avx512::swiglu_forward_row_bf16(g, g + width, &(s.data() + n * s.stride_0())->bits, width);
      })) {
    return;
  }
  if constexpr (!kComputeOnDevice) {
    forward_rows(gu, s);
    return;
  }
  const std::int64_t rows = static_cast<std::int64_t>(s.extent(0)), cols = static_cast<std::int64_t>(s.extent(1));
  const bool narrow = narrow_indices(rows, cols);
  if (bf16_pack_fits(cols, {gu.data(), s.data()})) {
    narrow ? forward_packs<kBf16PackWidth, true>(gu, s) : forward_packs<kBf16PackWidth, false>(gu, s);
  } else {
    narrow ? forward_packs<1, true>(gu, s) : forward_packs<1, false>(gu, s);
  }
}

void swiglu_backward_packed_bf16(Unmanaged2<bf16> gu, Unmanaged2<const bf16> ds, Unmanaged2<bf16> s) {
  check(gu.extent(0), gu.extent(1), ds.extent(0), ds.extent(1), "swiglu_backward_packed_bf16");
  check(gu.extent(0), gu.extent(1), s.extent(0), s.extent(1), "swiglu_backward_packed_bf16");
  const std::int64_t width = static_cast<std::int64_t>(ds.extent(1));
  if (swiglu_detail::on_avx512_rows("swiglu_backward_packed_bf16", ds.extent(0), [=](std::int64_t n) {
        std::uint16_t* g = &(gu.data() + n * gu.stride_0())->bits;
        avx512::swiglu_backward_row_bf16(g, g + width, &(ds.data() + n * ds.stride_0())->bits, g, g + width,
                                         &(s.data() + n * s.stride_0())->bits, width);
      })) {
    return;
  }
  if constexpr (!kComputeOnDevice) {
    backward_rows(gu, ds, s);
    return;
  }
  const std::int64_t rows = static_cast<std::int64_t>(ds.extent(0)), cols = static_cast<std::int64_t>(ds.extent(1));
  const bool narrow = narrow_indices(rows, cols);
  if (bf16_pack_fits(cols, {gu.data(), ds.data(), s.data()})) {
    narrow ? backward_packs<kBf16PackWidth, true>(gu, ds, s) : backward_packs<kBf16PackWidth, false>(gu, ds, s);
  } else {
    narrow ? backward_packs<1, true>(gu, ds, s) : backward_packs<1, false>(gu, ds, s);
  }
}

}  // namespace shardft
