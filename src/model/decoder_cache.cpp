// Generation with a KV cache: the decoder's forward (model/decoder_layer.hpp, model/lm_head.hpp) run
// over only the tokens a step adds, each layer given its cache: the step's keys and values (after RoPE)
// go into it, and a decode step's queries attend over it. Prefill runs the prompts through the training
// forward's own attention kernel; only the GEMMs' row counts differ from a full forward.
#include "model/decoder_cache.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "kernels/embedding.hpp"
#include "model/decoder.hpp"
#include "model/decoder_layer.hpp"
#include "model/lm_head.hpp"
#include "model/rope_frequencies.hpp"

namespace shardft {

namespace {

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
  GrowingBuffer x{"kv_x"};
  GateUpCopy gate_up_copy;
  LayerActivations layer;
  LayerStaging staging;
  HeadBuffers head;
  View1<std::int32_t> ids, pos, seq_ids, slot, len, logit_rows;
  View1<std::int64_t> dest;
  RopeTable rope;
  std::int64_t rope_length = 0;  // the rope_frequency_length the table was made for
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
  work->rope = make_model_rope_table(cfg, std::max<std::int64_t>(cfg.max_position_embeddings, max_len_in), 0);
  work->rope_length = rope_frequency_length(cfg, 0);
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
// The table for a call whose largest position is position_limit - 1. Dynamic NTK's frequencies follow
// the call's length, as in transformers' generate: keys already cached keep the rotation they were
// stored with; a table for a length beyond max_position_embeddings covers just that length.
const RopeTable* rope_for_call(const ModelConfig& cfg, KvCache& cache, std::int64_t position_limit) {
  KvCache::Work& w = *cache.work;
  const std::int64_t length = rope_frequency_length(cfg, position_limit);
  if (length != w.rope_length) {
    const std::int64_t rows = length > cfg.max_position_embeddings
                                  ? length
                                  : std::max<std::int64_t>(cfg.max_position_embeddings, cache.max_len);
    w.rope = make_model_rope_table(cfg, rows, length);
    w.rope_length = length;
  }
  return &w.rope;
}


// A step's tokens on the device: ids [N]; dest [N], each token's row in a layer's cache matrix (-1:
// padding); the tokens whose logits are wanted (empty: all); and, decoding, what each query reads.
struct StepTokens {
  Unmanaged1<const std::int32_t> ids;
  AttentionTokens attention;
  Unmanaged1<const std::int64_t> dest;
  Unmanaged1<const std::int32_t> logit_rows;
  const KvCacheReads* reads = nullptr;
};

void cached_forward(const Decoder& model, ParamSource& params, KvCache& cache, const StepTokens& t,
                    View2<float> logits) {
  const ModelConfig& cfg = model.config();
  const ParamLayout& layout = model.layout();
  KvCache::Work& w = *cache.work;
  const std::int64_t N = static_cast<std::int64_t>(t.ids.extent(0));
  const std::int64_t R = t.logit_rows.extent(0) > 0 ? static_cast<std::int64_t>(t.logit_rows.extent(0)) : N;
  if (static_cast<std::int64_t>(logits.extent(0)) != R ||
      logits.extent(1) != static_cast<std::size_t>(cfg.vocab_size)) {
    throw std::invalid_argument("Decoder: logits must be [" + std::to_string(R) + ", " +
                                std::to_string(cfg.vocab_size) + "]");
  }
  const auto x = w.x.mat(N, cfg.hidden_size);
  params.acquire(0, Pass::forward);
  embed_tokens(params, layout, t.ids, x);
  params.release(0, Pass::forward);
  for (int l = 0; l < cfg.num_hidden_layers; ++l) {
    params.acquire(l + 1, Pass::forward);
    const LayerKvCache layer_cache{cache.layer_k(l), cache.layer_v(l), t.dest, t.reads};
    decoder_layer_forward(layer_weights_of(params, layout, cfg, l, model.dtype(), w.gate_up_copy), t.attention, x,
                          w.layer, x, w.staging, &layer_cache);
    params.release(l + 1, Pass::forward);
  }
  params.acquire(layout.head_block(), Pass::forward);
  head_logits(head_weights_of(params, layout, cfg, model.dtype()), x, t.logit_rows, w.head, logits);
  params.release(layout.head_block(), Pass::forward);
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
  // The prompts attend among themselves exactly as in the full forward (the same kernel).
  KvCache::Work& w = *cache.work;
  const AttentionShape shape{B, T, cfg_.num_attention_heads, cfg_.num_key_value_heads, cfg_.head_dim()};
  const AttentionTokens attention{shape, upload(w.pos, pos, "kv_pos"), upload(w.seq_ids, seq_ids, "kv_seq_ids"),
                                  rope_for_call(cfg_, cache, T), memory_efficient_attention_, false, {}};
  cached_forward(*this, params, cache,
                 {upload(w.ids, ids, "kv_ids"), attention, upload(w.dest, dest, "kv_dest"),
                  upload(w.logit_rows, last, "kv_logit_rows")},
                 logits);
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
  const AttentionShape shape{n, 1, cfg_.num_attention_heads, cfg_.num_key_value_heads, cfg_.head_dim()};
  const std::int64_t limit = *std::max_element(pos.begin(), pos.end()) + 1;
  const AttentionTokens attention{shape, upload(w.pos, pos, "kv_pos"), {}, rope_for_call(cfg_, cache, limit), false,
                                  false, {}};
  const KvCacheReads reads{{n, cfg_.num_attention_heads, cfg_.num_key_value_heads, cfg_.head_dim(), cache.max_len},
                           upload(w.slot, slot, "kv_slot"), upload(w.len, len, "kv_len")};
  cached_forward(*this, params, cache,
                 {upload(w.ids, tokens, "kv_ids"), attention, upload(w.dest, dest, "kv_dest"), {}, &reads}, logits);
  for (int r : rows) ++cache.length[r];
}

}  // namespace shardft
