// Generation with a KV cache: the decoder's forward (model/decoder.cpp), run over only the tokens a
// step adds, with attention reading the earlier tokens' keys and values from the cache.
//
// Each layer, for the step's tokens x [N, d] (N = rows x padded prompt length in prefill, one token per
// row in decode):
//   h = RMSNorm(x);  q, k, v = h Wq^T + bq, h Wk^T + bk, h Wv^T + bv;  RoPE(q, k) at each token's position
//   cache[row, pos] = (k, v);  o = attention(q, cache);  x += o Wo^T + bo
//   h = RMSNorm(x);  x += (silu(h Wg^T) * (h Wu^T)) Wd^T
// then logits = RMSNorm(x) W_head^T at the tokens asked for. Every step is the training forward's kernel
// with its bf16 roundings (h, o, the SwiGLU output, the final norm), so only the GEMMs' row counts differ
// from a full forward.
#include "model/decoder_cache.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "kernels/attention.hpp"
#include "kernels/attention_decode.hpp"
#include "kernels/rows.hpp"
#include "kernels/attention_lse.hpp"
#include "kernels/bias.hpp"
#include "kernels/elementwise.hpp"
#include "kernels/embedding.hpp"
#include "kernels/gemm.hpp"
#include "kernels/rmsnorm.hpp"
#include "kernels/rope.hpp"
#include "kernels/swiglu.hpp"
#include "model/decoder.hpp"
#include "model/decoder_parts.hpp"

namespace shardft {

namespace {

using decoder_parts::gate_up_weight;
using decoder_parts::round_if_bf16;
using Buffer = decoder_parts::GrowingBuffer;

template <class T>
Unmanaged1<const T> upload(View1<T>& dev, const std::vector<T>& host, const char* name) {
  const std::int64_t n = static_cast<std::int64_t>(host.size());
  if (static_cast<std::int64_t>(dev.extent(0)) < n) dev = View1<T>(std::string(name), n);
  Kokkos::View<const T*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>> src(host.data(), n);
  Kokkos::deep_copy(Kokkos::subview(dev, std::pair<std::int64_t, std::int64_t>(0, n)), src);
  return Unmanaged1<const T>(dev.data(), n);
}

}  // namespace

struct KvCache::Work {
  Buffer x{"kv_x"}, h{"kv_h"}, rstd{"kv_rstd"}, q{"kv_q"}, k{"kv_k"}, v{"kv_v"}, o{"kv_o"}, gu{"kv_gu"},
      s{"kv_s"}, attn{"kv_attn"}, picked{"kv_picked"}, gate_up_w{"kv_gate_up_w"};
  View1<std::int32_t> ids, pos, seq_ids, slot, len, logit_rows;
  View1<std::int64_t> dest;
  RopeTable rope;
};

KvCache::KvCache(const ModelConfig& cfg, int rows_in, int max_len_in)
    : rows(rows_in),
      max_len(max_len_in),
      k("kv_cache_k", cfg.num_hidden_layers, rows_in, max_len_in,
        static_cast<std::int64_t>(cfg.num_key_value_heads) * cfg.head_dim()),
      v("kv_cache_v", cfg.num_hidden_layers, rows_in, max_len_in,
        static_cast<std::int64_t>(cfg.num_key_value_heads) * cfg.head_dim()),
      length(static_cast<std::size_t>(rows_in), 0),
      work(std::make_unique<Work>()) {
  if (rows_in < 1 || max_len_in < 1) throw std::invalid_argument("KvCache: rows and max_len must be >= 1");
  // The decoder's own table covers max(max_position_embeddings, seq); each angle is computed alone, so
  // a table of another size holds the same values.
  work->rope = make_rope_table(std::max<std::int64_t>(cfg.max_position_embeddings, max_len_in), cfg.head_dim(),
                               cfg.rope_theta);
}

KvCache::~KvCache() = default;

Unmanaged2<float> KvCache::layer_k(int layer) const {
  const std::int64_t n = static_cast<std::int64_t>(rows) * max_len, c = static_cast<std::int64_t>(k.extent(3));
  return Unmanaged2<float>(k.data() + layer * n * c, n, c);
}

Unmanaged2<float> KvCache::layer_v(int layer) const {
  const std::int64_t n = static_cast<std::int64_t>(rows) * max_len, c = static_cast<std::int64_t>(v.extent(3));
  return Unmanaged2<float>(v.data() + layer * n * c, n, c);
}

namespace {

// The step's tokens on the device: ids and positions [N], dest [N] (the token's row in a layer's cache
// matrix, -1 for padding), and the tokens whose logits are wanted (empty: all).
struct StepTokens {
  Unmanaged1<const std::int32_t> ids, pos;
  Unmanaged1<const std::int64_t> dest;
  Unmanaged1<const std::int32_t> logit_rows;
};

// The forward of one step through the cache. attend(l, q, k, v, o) writes the attention output o for
// the step's queries q, with the step's keys and values k, v already in layer l's cache.
template <class Attend>
void cached_forward(const Decoder& model, ParamSource& params, KvCache& cache, const StepTokens& t, Attend attend,
                    View2<float> logits) {
  const ModelConfig& cfg = model.config();
  const ParamLayout& layout = model.layout();
  const ComputeDtype dtype = model.dtype();
  KvCache::Work& w = *cache.work;
  const std::int64_t N = static_cast<std::int64_t>(t.ids.extent(0));
  const std::int64_t d = cfg.hidden_size, hd = cfg.head_dim(), I = cfg.intermediate_size;
  const std::int64_t qd = cfg.num_attention_heads * hd, kvd = cfg.num_key_value_heads * hd;
  const std::int64_t R = t.logit_rows.extent(0) > 0 ? static_cast<std::int64_t>(t.logit_rows.extent(0)) : N;
  const float eps = static_cast<float>(cfg.rms_norm_eps);
  if (static_cast<std::int64_t>(logits.extent(0)) != R || logits.extent(1) != static_cast<std::size_t>(cfg.vocab_size)) {
    throw std::invalid_argument("Decoder: logits must be [" + std::to_string(R) + ", " +
                                std::to_string(cfg.vocab_size) + "]");
  }
  auto W = [&](int p) { return params.weight(p); };
  auto add_bias = [&](int bias, Unmanaged2<float> y) {
    if (bias >= 0) bias_forward(y, W(bias));
  };
  auto x = w.x.mat(N, d), h = w.h.mat(N, d), q = w.q.mat(N, qd), k = w.k.mat(N, kvd), v = w.v.mat(N, kvd),
       o = w.o.mat(N, qd), gu = w.gu.mat(N, 2 * I), s = w.s.mat(N, I);
  auto rstd = w.rstd.vec(N);
  params.acquire(0);
  const auto& embed_shape = layout.params()[layout.embed_tokens()].shape;
  embedding_forward(t.ids, Unmanaged2<const float>(W(layout.embed_tokens()).data(), embed_shape[0], embed_shape[1]), x);
  params.release(0);

  for (int l = 0; l < cfg.num_hidden_layers; ++l) {
    const LayerParams& P = layout.layer(l);
    params.acquire(l + 1);
    rmsnorm_forward(x, W(P.input_layernorm), eps, h, rstd);
    round_if_bf16(dtype, h);
    linear_forward(h, W(P.q_proj), q);
    add_bias(P.q_bias, q);
    linear_forward(h, W(P.k_proj), k);
    add_bias(P.k_bias, k);
    linear_forward(h, W(P.v_proj), v);
    add_bias(P.v_bias, v);
    rope_rotate_qk(q, k, t.pos, w.rope, false);
    scatter_rows(k, t.dest, cache.layer_k(l));
    scatter_rows(v, t.dest, cache.layer_v(l));
    attend(l, Unmanaged2<const float>(q), Unmanaged2<const float>(k), Unmanaged2<const float>(v), o);
    round_if_bf16(dtype, o);
    linear_forward(o, W(P.o_proj), x, 1.f);  // x += attention (the residual)
    add_bias(P.o_bias, x);
    rmsnorm_forward(x, W(P.post_attention_layernorm), eps, h, rstd);
    round_if_bf16(dtype, h);
    gemm(Op::N, Op::T, 1.f, h, gate_up_weight(params, P, I, d, w.gate_up_w), 0.f, gu);
    swiglu_forward_packed(gu, s);
    round_if_bf16(dtype, s);
    linear_forward(s, W(P.down_proj), x, 1.f);  // x += mlp
    params.release(l + 1);
  }

  const int head = layout.head_block();
  params.acquire(head);
  rmsnorm_forward(x, W(layout.final_norm()), eps, h, rstd);
  round_if_bf16(dtype, h);
  Unmanaged2<const float> picked = h;
  if (t.logit_rows.extent(0) > 0) {
    auto rows = w.picked.mat(R, d);
    gather_rows(h, t.logit_rows, rows);
    picked = rows;
  }
  linear_forward(picked, W(layout.lm_head()), logits);
  params.release(head);
}

}  // namespace

void Decoder::prefill(const std::vector<std::vector<std::int32_t>>& prompts, ParamSource& params, KvCache& cache,
                      View2<float> logits) const {
  const int B = static_cast<int>(prompts.size());
  if (B != cache.rows) throw std::invalid_argument("prefill: " + std::to_string(B) + " prompts for a cache of " +
                                                   std::to_string(cache.rows) + " rows");
  int T = 0;
  for (int r = 0; r < B; ++r) {
    const int n = static_cast<int>(prompts[r].size());
    if (n < 1 || n > cache.max_len || cache.length[r] != 0) {
      throw std::invalid_argument("prefill: prompt " + std::to_string(r) + " has " + std::to_string(n) +
                                  " tokens; expected 1 to " + std::to_string(cache.max_len) + " into an empty row");
    }
    T = std::max(T, n);
  }
  // Checked here, on the host, where the batch is built: the forward never copies ids back.
  for (int r = 0; r < B; ++r) {
    try {
      check_token_ids(prompts[r].data(), prompts[r].size(), cfg_.vocab_size);
    } catch (const std::out_of_range& e) {
      throw std::out_of_range("prefill: prompt " + std::to_string(r) + ": " + e.what());
    }
  }
  // The prompts right-padded to [B, T]: causal attention keeps the padding out of every real token, and
  // the padding's keys and values never enter the cache.
  const std::size_t N = static_cast<std::size_t>(B) * T;
  std::vector<std::int32_t> ids(N, 0), pos(N), seq_ids(N, 0), last(static_cast<std::size_t>(B));
  std::vector<std::int64_t> dest(N, -1);
  for (int r = 0; r < B; ++r) {
    const int n = static_cast<int>(prompts[r].size());
    for (int i = 0; i < T; ++i) {
      const std::size_t at = static_cast<std::size_t>(r) * T + i;
      pos[at] = i;
      if (i < n) {
        ids[at] = prompts[r][i];
        dest[at] = static_cast<std::int64_t>(r) * cache.max_len + i;
      }
    }
    last[r] = r * T + n - 1;
  }
  KvCache::Work& w = *cache.work;
  const StepTokens t{upload(w.ids, ids, "kv_ids"), upload(w.pos, pos, "kv_pos"), upload(w.dest, dest, "kv_dest"),
                     upload(w.logit_rows, last, "kv_logit_rows")};
  const Unmanaged1<const std::int32_t> same_sample = upload(w.seq_ids, seq_ids, "kv_seq_ids");
  // The prompts attend among themselves exactly as in the full forward (the same kernel).
  const AttentionShape shape{B, T, cfg_.num_attention_heads, cfg_.num_key_value_heads, cfg_.head_dim()};
  const bool lse = memory_efficient_attention_;
  auto attend = [&](int, Unmanaged2<const float> q, Unmanaged2<const float> k, Unmanaged2<const float> v,
                    Unmanaged2<float> o) {
    if (lse) {
      const std::int64_t rows_bht = static_cast<std::int64_t>(B) * shape.heads * T;
      attention_forward_lse(shape, q, k, v, same_sample, o, w.attn.vec(rows_bht));
    } else {
      attention_forward(shape, q, k, v, same_sample, o, w.attn.vec(shape.probs_size()));
    }
  };
  cached_forward(*this, params, cache, t, attend, logits);
  for (int r = 0; r < B; ++r) cache.length[r] = static_cast<int>(prompts[r].size());
}

void Decoder::decode_step(const std::vector<int>& rows, const std::vector<std::int32_t>& tokens, ParamSource& params,
                          KvCache& cache, View2<float> logits) const {
  const int n = static_cast<int>(rows.size());
  if (tokens.size() != rows.size() || n < 1) {
    throw std::invalid_argument("decode_step: expected one token for each of at least one row");
  }
  try {
    check_token_ids(tokens.data(), tokens.size(), cfg_.vocab_size);
  } catch (const std::out_of_range& e) {
    throw std::out_of_range(std::string("decode_step: ") + e.what());
  }
  std::vector<std::int32_t> pos(rows.size()), slot(rows.size()), len(rows.size());
  std::vector<std::int64_t> dest(rows.size());
  for (int i = 0; i < n; ++i) {
    const int r = rows[i];
    if (r < 0 || r >= cache.rows || cache.length[r] < 1 || cache.length[r] >= cache.max_len ||
        std::count(rows.begin(), rows.end(), r) != 1) {
      throw std::invalid_argument("decode_step: row " + std::to_string(r) +
                                  " is not a prefilled cache row with room for a token (or is named twice)");
    }
    pos[i] = cache.length[r];  // each row keeps its own position counter: no left padding needed
    slot[i] = r;
    len[i] = cache.length[r] + 1;
    dest[i] = static_cast<std::int64_t>(r) * cache.max_len + pos[i];
  }
  KvCache::Work& w = *cache.work;
  const StepTokens t{upload(w.ids, tokens, "kv_ids"), upload(w.pos, pos, "kv_pos"), upload(w.dest, dest, "kv_dest"),
                     Unmanaged1<const std::int32_t>()};
  const Unmanaged1<const std::int32_t> slot_d = upload(w.slot, slot, "kv_slot"), len_d = upload(w.len, len, "kv_len");
  const DecodeAttentionShape shape{n, cfg_.num_attention_heads, cfg_.num_key_value_heads, cfg_.head_dim(),
                                   cache.max_len};
  auto attend = [&](int l, Unmanaged2<const float> q, Unmanaged2<const float>, Unmanaged2<const float>,
                    Unmanaged2<float> o) {
    attention_decode(shape, q, cache.layer_k(l), cache.layer_v(l), slot_d, len_d, o,
                     w.attn.vec(shape.scores_size()));
  };
  cached_forward(*this, params, cache, t, attend, logits);
  for (int r : rows) ++cache.length[r];
}

}  // namespace shardft
