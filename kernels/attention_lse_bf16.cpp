// The memory-efficient attention of kernels/attention_lse.hpp on bf16 q, k, v and o (a bf16 step's kept
// activations, the fused kernels' operands), for the builds without the fused kernels: every value is
// what widening the bf16 inputs, running the fp32 kernel and rounding each output once gives; on a CPU
// with AMX tiles, up to the order of the fp32 sums in the two score products (below).
//
// On the host, one (sequence, query head) at a time: its q and its kv head's k and v ([T, hd] blocks, the
// head's columns) are widened into fp32 scratch and the tiled kernel runs on them as an attention of one
// sequence and one head (the same tile products in the same order as on the whole batch, where each
// (sequence, head) is independent too), its outputs rounded into the head's columns. The score products
// K Q^T and V dO^T read the bf16 values themselves (AttentionBf16Operands), on AMX tiles where the CPU
// has them: the same exact products, summed in fp32 in another order; with AMX every other product reads
// them too (P and dS rounded), so there nothing is widened. Where the head dimension is a multiple of 32,
// a CPU with AMX runs the fused kernels of kernels/amx_attention_bf16.hpp instead, one (sequence, kv
// head) group at a time: the same rounding points, the softmax and the sums in their own order. Backward adds each
// query head's share into its kv head's fp32 dk and dv in the order the whole group's call adds them.
// Scratch: seven [T, hd] blocks instead of fp32 copies of q, k, v, o and their gradients. Elsewhere (a GPU
// build without cuDNN) whole widened copies around the fp32 kernels.
#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <stdexcept>
#include <string>

#include "kernels/amx_attention_bf16.hpp"
#include "kernels/attention_lse_groups.hpp"
#include "kernels/amx_gemm_bf16.hpp"
#include "kernels/attention_lse.hpp"
#include "kernels/elementwise.hpp"
#include "kernels/kernel_scratch.hpp"
#include "kernels/striped_dot.hpp"

namespace shardft {

namespace {

constexpr bool kHostAttention = Kokkos::SpaceAccessibility<Kokkos::HostSpace, MemSpace>::accessible;

// dst [rows, cols] (row-major, contiguous) = src[r0 .., c0 ..] widened; src has row stride ld.
void widen_rows(const bf16* src, std::int64_t ld, std::int64_t r0, std::int64_t c0, std::int64_t rows,
                std::int64_t cols, float* dst) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const bf16* in = src + (r0 + r) * ld + c0;
    float* out = dst + r * cols;
    for (std::int64_t c = 0; c < cols; ++c) out[c] = bf16::to_float(in[c].bits);
  }
}

// dst[r0 .., c0 ..] = src [rows, cols] rounded to bf16.
void round_rows(const float* src, std::int64_t rows, std::int64_t cols, bf16* dst, std::int64_t ld, std::int64_t r0,
                std::int64_t c0) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* in = src + r * cols;
    bf16* out = dst + (r0 + r) * ld + c0;
    for (std::int64_t c = 0; c < cols; ++c) out[c].bits = bf16::round_bits(in[c]);
  }
}

Unmanaged2<const float> block(const float* p, std::int64_t rows, std::int64_t cols) {
  return Unmanaged2<const float>(p, rows, cols);
}

void check_bf16_shapes(const AttentionShape& s, std::size_t q_cols, std::size_t k_cols, const char* what) {
  if (s.kv_heads <= 0 || s.heads % s.kv_heads != 0 ||
      q_cols != static_cast<std::size_t>(s.heads) * static_cast<std::size_t>(s.head_dim) ||
      k_cols != static_cast<std::size_t>(s.kv_heads) * static_cast<std::size_t>(s.head_dim)) {
    throw std::invalid_argument(std::string(what) + ": q or k columns do not match the attention shape");
  }
}

// Whether the tiled kernel reads the fp32 blocks: not where every tile product runs on AMX from the bf16
// values (AttentionBf16Operands holds all of them), so there q, k, v and dO are never widened.
bool widen_blocks() { return !amx::available(); }

// f(row0, sid, g) for every sequence (its first row, its seq ids) and kv head g, with that kv head's k and
// v of the sequence widened into kb and vb ([T, hd] each) where the tiled kernel reads them.
template <class F>
void for_each_kv_head(const AttentionShape& s, Strided2<const bf16> k, Strided2<const bf16> v,
                      Unmanaged1<const std::int32_t> seq_ids, float* kb, float* vb, F&& f) {
  const std::int64_t T = s.seq, hd = s.head_dim;
  const bool widen = widen_blocks();
  for (int b = 0; b < s.batch; ++b) {
    const std::int64_t row0 = static_cast<std::int64_t>(b) * T;
    const Unmanaged1<const std::int32_t> sid(seq_ids.data() + row0, T);
    for (int g = 0; g < s.kv_heads; ++g) {
      if (widen) {
        widen_rows(k.data(), k.stride_0(), row0, g * hd, T, hd, kb);
        widen_rows(v.data(), v.stride_0(), row0, g * hd, T, hd, vb);
      }
      f(row0, sid, g);
    }
  }
}

Unmanaged2<float> widened_copy(Strided2<const bf16> x, const char* name) {
  const auto out = kernel_scratch<float>(name, x.extent(0), x.extent(1));
  to_f32(x, out);
  return out;
}

void check_rows_contiguous(std::initializer_list<std::size_t> element_strides, const char* what) {
  for (std::size_t s : element_strides) {
    if (s != 1) throw std::invalid_argument(std::string(what) + ": each row of q, k, v and their gradients must be contiguous");
  }
}

// The (sequence, kv head) groups on the fused AMX kernels (kernels/amx_attention_bf16.hpp).
void fused_forward(const AttentionShape& s, Strided2<const bf16> q, Strided2<const bf16> k, Strided2<const bf16> v,
                   Unmanaged1<const std::int32_t> seq_ids, Unmanaged2<bf16> o, Unmanaged1<float> lse) {
  attention_groups::forward_each_group<std::uint16_t>(s, q, k, v, seq_ids.data(), o, lse.data(),
                                                      &amx::attention_forward);
}

void fused_backward(const AttentionShape& s, Strided2<const bf16> q, Strided2<const bf16> k, Strided2<const bf16> v,
                    Unmanaged1<const std::int32_t> seq_ids, Unmanaged1<const float> lse, Unmanaged2<const bf16> dout,
                    Strided2<bf16> dq, Strided2<bf16> dk, Strided2<bf16> dv, Unmanaged1<const float> delta) {
  attention_groups::backward_each_group<std::uint16_t>(s, q, k, v, seq_ids.data(), dout, lse.data(), delta.data(), dq,
                                                       dk, dv, &amx::attention_backward);
}

}  // namespace

void attention_forward_lse_bf16(const AttentionShape& s, Strided2<const bf16> q, Strided2<const bf16> k,
                                Strided2<const bf16> v, Unmanaged1<const std::int32_t> seq_ids, Unmanaged2<bf16> o,
                                Unmanaged1<float> lse) {
  check_bf16_shapes(s, q.extent(1), k.extent(1), "attention_forward_lse_bf16");
  check_rows_contiguous({q.stride_1(), k.stride_1(), v.stride_1()}, "attention_forward_lse_bf16");
  if constexpr (!kHostAttention) {
    const auto o32 = kernel_scratch<float>("attention_bf16_o", o.extent(0), o.extent(1));
    attention_forward_lse(s, widened_copy(q, "attention_bf16_q"), widened_copy(k, "attention_bf16_k"),
                          widened_copy(v, "attention_bf16_v"), seq_ids, o32, lse);
    to_bf16(flat(Unmanaged2<const float>(o32)), flat(o));
    return;
  }
  if (amx::attention_fits(s.head_dim)) return fused_forward(s, q, k, v, seq_ids, o, lse);
  const std::int64_t T = s.seq, H = s.heads, hd = s.head_dim, group = s.heads / s.kv_heads;
  float* qb = kernel_scratch<float, HostSpace>("attention_bf16_blocks", static_cast<std::size_t>(4 * T * hd)).data();
  float *ob = qb + T * hd, *kb = ob + T * hd, *vb = kb + T * hd;
  const AttentionShape one_head{1, s.seq, 1, 1, s.head_dim};
  for_each_kv_head(s, k, v, seq_ids, kb, vb, [&](std::int64_t row0, Unmanaged1<const std::int32_t> sid, int g) {
    for (std::int64_t h = g * group; h < (g + 1) * group; ++h) {
      if (widen_blocks()) widen_rows(q.data(), q.stride_0(), row0, h * hd, T, hd, qb);
      const Unmanaged1<float> lse_h(lse.data() + (row0 * H + h * T), T);  // lse [(b * H + h) * T + i]
      const AttentionBf16Operands held{q.data() + row0 * q.stride_0() + h * hd,
                                       k.data() + row0 * k.stride_0() + g * hd,
                                       v.data() + row0 * v.stride_0() + g * hd,
                                       nullptr,
                                       static_cast<std::int64_t>(q.stride_0()),
                                       static_cast<std::int64_t>(k.stride_0()),
                                       static_cast<std::int64_t>(v.stride_0())};
      attention_forward_lse_tiled(one_head, block(qb, T, hd), block(kb, T, hd), block(vb, T, hd), sid,
                                  Unmanaged2<float>(ob, T, hd), lse_h, {}, held);
      round_rows(ob, T, hd, o.data(), o.stride_0(), row0, h * hd);
    }
  });
}

void attention_backward_lse_bf16(const AttentionShape& s, Strided2<const bf16> q, Strided2<const bf16> k,
                                 Strided2<const bf16> v, Unmanaged1<const std::int32_t> seq_ids,
                                 Unmanaged2<const bf16> o, Unmanaged1<const float> lse, Unmanaged2<const bf16> dout,
                                 Strided2<bf16> dq, Strided2<bf16> dk, Strided2<bf16> dv,
                                 Unmanaged1<float> delta) {
  check_bf16_shapes(s, q.extent(1), k.extent(1), "attention_backward_lse_bf16");
  check_rows_contiguous({q.stride_1(), k.stride_1(), v.stride_1(), dq.stride_1(), dk.stride_1(), dv.stride_1()},
                        "attention_backward_lse_bf16");
  if constexpr (!kHostAttention) {
    const auto dq32 = kernel_scratch<float>("attention_bf16_dq", dq.extent(0), dq.extent(1));
    const auto dk32 = kernel_scratch<float>("attention_bf16_dk", dk.extent(0), dk.extent(1));
    const auto dv32 = kernel_scratch<float>("attention_bf16_dv", dv.extent(0), dv.extent(1));
    attention_backward_lse(s, widened_copy(q, "attention_bf16_q"), widened_copy(k, "attention_bf16_k"),
                           widened_copy(v, "attention_bf16_v"), seq_ids, widened_copy(o, "attention_bf16_o"), lse,
                           widened_copy(dout, "attention_bf16_dout"), dq32, dk32, dv32, delta);
    to_bf16(Unmanaged2<const float>(dq32), dq);
    to_bf16(Unmanaged2<const float>(dk32), dk);
    to_bf16(Unmanaged2<const float>(dv32), dv);
    return;
  }
  const std::int64_t T = s.seq, H = s.heads, hd = s.head_dim, group = s.heads / s.kv_heads;
  // D_i = dO_i . O_i from the widened values, summed in the order the fp32 kernel sums them; the tiled
  // kernel then reads it instead of O (an empty o), so O is never widened.
  for (std::int64_t row = 0; row < static_cast<std::int64_t>(s.batch) * T; ++row) {
    const std::int64_t b = row / T, i = row - b * T;
    for (std::int64_t h = 0; h < H; ++h) {
      const bf16* doi = dout.data() + row * dout.stride_0() + h * hd;
      const bf16* oi = o.data() + row * o.stride_0() + h * hd;
      delta((b * H + h) * T + i) = striped_dot(doi, oi, hd);
    }
  }
  if (amx::attention_fits(s.head_dim)) return fused_backward(s, q, k, v, seq_ids, lse, dout, dq, dk, dv, delta);
  float* qb = kernel_scratch<float, HostSpace>("attention_bf16_blocks", static_cast<std::size_t>(7 * T * hd)).data();
  float *dob = qb + T * hd, *dqb = dob + T * hd, *kb = dqb + T * hd, *vb = kb + T * hd, *dkb = vb + T * hd,
        *dvb = dkb + T * hd;
  // One query head at a time, adding into its kv head's dk and dv: the additions the whole group's call
  // makes, in the same order (kernels/attention_lse.hpp add_into_dkv).
  const AttentionShape one_head{1, s.seq, 1, 1, s.head_dim};
  for_each_kv_head(s, k, v, seq_ids, kb, vb, [&](std::int64_t row0, Unmanaged1<const std::int32_t> sid, int g) {
    std::fill_n(dkb, 2 * T * hd, 0.f);  // dk, dv
    for (std::int64_t h = g * group; h < (g + 1) * group; ++h) {
      if (widen_blocks()) {
        widen_rows(q.data(), q.stride_0(), row0, h * hd, T, hd, qb);
        widen_rows(dout.data(), dout.stride_0(), row0, h * hd, T, hd, dob);
      }
      const std::int64_t first = (row0 * H + h * T);  // the head's run of lse and D entries
      const AttentionBf16Operands held{q.data() + row0 * q.stride_0() + h * hd,
                                       k.data() + row0 * k.stride_0() + g * hd,
                                       v.data() + row0 * v.stride_0() + g * hd,
                                       dout.data() + row0 * dout.stride_0() + h * hd,
                                       static_cast<std::int64_t>(q.stride_0()),
                                       static_cast<std::int64_t>(k.stride_0()),
                                       static_cast<std::int64_t>(v.stride_0()),
                                       static_cast<std::int64_t>(dout.stride_0())};
      attention_backward_lse_tiled(one_head, block(qb, T, hd), block(kb, T, hd), block(vb, T, hd), sid,
                                   Unmanaged2<const float>(), Unmanaged1<const float>(lse.data() + first, T),
                                   block(dob, T, hd), Unmanaged2<float>(dqb, T, hd), Unmanaged2<float>(dkb, T, hd),
                                   Unmanaged2<float>(dvb, T, hd), Unmanaged1<float>(delta.data() + first, T), {},
                                   /*add_into_dkv=*/true, held);
      round_rows(dqb, T, hd, dq.data(), dq.stride_0(), row0, h * hd);
    }
    round_rows(dkb, T, hd, dk.data(), dk.stride_0(), row0, g * hd);
    round_rows(dvb, T, hd, dv.data(), dv.stride_0(), row0, g * hd);
  });
}

}  // namespace shardft
