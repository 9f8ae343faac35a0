#include "infer/generate.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <sstream>
#include <stdexcept>

#include "model/decoder_cache.hpp"

namespace shardft {

// ---- the sampler ---------------------------------------------------------------------------------

namespace {
std::string number_text(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}
}  // namespace

void check_sampling_options(const SamplingOptions& opt) {
  if (!std::isfinite(opt.temperature) || opt.temperature < 0) {
    throw std::invalid_argument("temperature: expected a number >= 0 (0: greedy), got " + number_text(opt.temperature));
  }
  if (!(opt.top_p > 0 && opt.top_p <= 1)) {
    throw std::invalid_argument("top_p: expected a number in (0, 1], got " + number_text(opt.top_p));
  }
  if (opt.top_k < 0)
    throw std::invalid_argument("top_k: expected an integer >= 0 (0: no limit), got " + std::to_string(opt.top_k));
}

namespace {
std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
}  // namespace

SamplingRng::SamplingRng(std::uint64_t seed, std::uint64_t stream) {
  // Two rounds of mixing, so that neighbouring (seed, stream) pairs start far apart.
  std::uint64_t s = seed;
  const std::uint64_t a = splitmix64(s);
  s = a ^ (stream * 0xD1B54A32D192ED03ull);
  state_ = splitmix64(s);
}

std::uint64_t SamplingRng::next() { return splitmix64(state_); }

double SamplingRng::uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

namespace {

// The first of equal maxima, as evaluation always picked (NaN never wins).
std::int32_t argmax(const float* logits, int vocab) {
  int best = 0;
  for (int v = 1; v < vocab; ++v) best = logits[v] > logits[best] ? v : best;
  return best;
}

}  // namespace

std::vector<std::pair<std::int32_t, double>> sampling_distribution(const float* logits, int vocab,
                                                                   const SamplingOptions& opt) {
  if (vocab < 1) throw std::invalid_argument("sampling: empty vocabulary");
  check_sampling_options(opt);
  if (opt.greedy()) return {{argmax(logits, vocab), 1.0}};
  // Scaled logits; NaN counts as impossible, and keeps the ordering strict.
  std::vector<double> z(static_cast<std::size_t>(vocab));
  for (int v = 0; v < vocab; ++v) {
    z[v] = std::isnan(logits[v]) ? -std::numeric_limits<double>::infinity() : logits[v] / opt.temperature;
  }
  std::vector<std::int32_t> order(static_cast<std::size_t>(vocab));
  std::iota(order.begin(), order.end(), 0);
  const auto before = [&](std::int32_t a, std::int32_t b) { return z[a] > z[b] || (z[a] == z[b] && a < b); };
  std::size_t keep = order.size();
  if (opt.top_k > 0 && static_cast<std::size_t>(opt.top_k) < order.size()) {
    keep = static_cast<std::size_t>(opt.top_k);
    std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(keep), order.end(), before);
  } else {
    std::sort(order.begin(), order.end(), before);
  }
  const double top = z[order[0]];
  if (!std::isfinite(top)) return {{order[0], 1.0}};  // nothing finite to weigh: the first candidate
  std::vector<double> p(keep);
  double sum = 0;
  for (std::size_t i = 0; i < keep; ++i) sum += p[i] = std::exp(z[order[i]] - top);
  // The nucleus: the fewest most likely tokens whose probability (within the top_k) reaches top_p.
  if (opt.top_p < 1.0) {
    double mass = 0;
    std::size_t n = 0;
    while (n < keep) {
      mass += p[n++] / sum;
      if (mass >= opt.top_p) break;
    }
    keep = n;
  }
  double kept = 0;
  for (std::size_t i = 0; i < keep; ++i) kept += p[i];
  std::vector<std::pair<std::int32_t, double>> dist;
  dist.reserve(keep);
  for (std::size_t i = 0; i < keep; ++i) dist.emplace_back(order[i], p[i] / kept);
  return dist;
}

std::int32_t sample_token(const float* logits, int vocab, const SamplingOptions& opt, SamplingRng& rng) {
  if (opt.greedy()) {
    if (vocab < 1) throw std::invalid_argument("sampling: empty vocabulary");
    return argmax(logits, vocab);
  }
  const auto dist = sampling_distribution(logits, vocab, opt);
  const double u = rng.uniform();
  double acc = 0;
  for (const auto& [token, prob] : dist) {
    acc += prob;
    if (u < acc) return token;
  }
  return dist.back().first;  // rounding left u above the last partial sum
}

// ---- the decoding loop ---------------------------------------------------------------------------

const char* finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::stop:
      return "stop";
    case FinishReason::length:
      return "length";
    case FinishReason::context:
      return "context";
  }
  return "?";
}

namespace {

// The rows being generated: each one's tokens so far, its result and its sampler, and which go on.
struct GenerationRows {
  const SamplingOptions& opt;
  const std::vector<std::int32_t>& stop_ids;
  int vocab = 0, max_new_tokens = 0, max_seq_length = 0;
  std::vector<std::vector<std::int32_t>> seqs;
  std::vector<Generation> out;
  std::vector<SamplingRng> rngs;
  std::vector<int> active;        // the rows still generating, in the order of the logits' rows
  std::vector<float> row_logits;  // one row's logits on the host

  // One step for every active row: its next token from its row of logits ([active rows, vocab], in
  // `active` order), then the stop rules; `active` keeps the rows that go on.
  void advance(const View2<float>& logits) {
    auto logits_h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), logits);
    std::vector<int> still;
    for (std::size_t i = 0; i < active.size(); ++i) {
      const int r = active[i];
      for (int v = 0; v < vocab; ++v) row_logits[v] = logits_h(i, v);
      const std::int32_t token = sample_token(row_logits.data(), vocab, opt, rngs[r]);
      if (std::find(stop_ids.begin(), stop_ids.end(), token) != stop_ids.end()) {
        out[r].finish = FinishReason::stop;
        continue;
      }
      seqs[r].push_back(token);
      out[r].tokens.push_back(token);
      if (static_cast<int>(out[r].tokens.size()) >= max_new_tokens) {
        out[r].finish = FinishReason::length;
      } else if (static_cast<int>(seqs[r].size()) >= max_seq_length) {
        out[r].finish = FinishReason::context;
      } else {
        still.push_back(r);
      }
    }
    active = std::move(still);
  }
};

// Without the KV cache: each new token re-runs the whole sequences; right padding never reaches the last
// real token because attention is causal.
void generate_by_recompute(Decoder& model, ParamSource& params, GenerationRows& g, std::int32_t pad_id) {
  for (int step = 0; step < g.max_new_tokens && !g.active.empty(); ++step) {
    const int n = static_cast<int>(g.active.size());
    int seq = 0;
    for (int r : g.active) seq = std::max<int>(seq, static_cast<int>(g.seqs[r].size()));
    TokenBatch b;
    b.batch = n;
    b.seq = seq;
    b.input_ids.assign(static_cast<std::size_t>(n) * seq, pad_id);
    b.position_ids.resize(b.input_ids.size());
    b.seq_ids.assign(b.input_ids.size(), 0);
    b.targets.assign(b.input_ids.size(), kIgnoreIndex);
    View1<std::int32_t> last("last_rows", n);
    auto last_h = Kokkos::create_mirror_view(last);
    for (int i = 0; i < n; ++i) {
      const auto& s = g.seqs[g.active[i]];
      std::copy(s.begin(), s.end(), b.input_ids.begin() + static_cast<std::ptrdiff_t>(i) * seq);
      for (int t = 0; t < seq; ++t) b.position_ids[static_cast<std::size_t>(i) * seq + t] = t;
      last_h(i) = i * seq + static_cast<int>(s.size()) - 1;
    }
    Kokkos::deep_copy(last, last_h);
    View2<float> logits("gen_logits", n, g.vocab);
    const ModelInputs in = upload_inputs(b.batch, b.seq, b.input_ids, b.position_ids, b.seq_ids, b.targets,
                                         model.config().vocab_size);
    model.forward_logits(in, params, last, logits);
    g.advance(logits);
  }
}

// With the KV cache: the prompts once (prefill), then each step feeds only the rows' newest tokens. A row
// never holds more than min(max_seq_length, prompt + max_new_tokens) tokens.
void generate_with_cache(Decoder& model, ParamSource& params, GenerationRows& g) {
  if (g.active.empty()) return;
  const int n0 = static_cast<int>(g.active.size());
  std::vector<int> slot(g.seqs.size(), -1);  // a prompt's row in the cache
  std::vector<std::vector<std::int32_t>> first;
  std::int64_t max_len = 0;
  for (int i = 0; i < n0; ++i) {
    const int r = g.active[i];
    slot[r] = i;
    first.push_back(g.seqs[r]);
    max_len = std::max(max_len, std::min<std::int64_t>(g.max_seq_length, static_cast<std::int64_t>(g.seqs[r].size()) +
                                                                            g.max_new_tokens));
  }
  KvCache cache(model.config(), n0, static_cast<int>(max_len));
  View2<float> logits_all("gen_logits", n0, g.vocab);
  model.prefill(first, params, cache, logits_all);
  g.advance(logits_all);
  while (!g.active.empty()) {
    const int n = static_cast<int>(g.active.size());
    std::vector<int> cache_rows;
    std::vector<std::int32_t> tokens;
    for (int r : g.active) {
      cache_rows.push_back(slot[r]);
      tokens.push_back(g.seqs[r].back());
    }
    View2<float> logits(logits_all.data(), n, g.vocab);  // the first n rows of the prefill's buffer
    model.decode_step(cache_rows, tokens, params, cache, logits);
    g.advance(logits);
  }
}

}  // namespace

std::vector<Generation> generate(Decoder& model, ParamSource& params,
                                 const std::vector<std::vector<std::int32_t>>& prompts, int max_new_tokens,
                                 int max_seq_length, const std::vector<std::int32_t>& stop_ids, std::int32_t pad_id,
                                 const SamplingOptions& opt, std::uint64_t first_stream, bool use_cache) {
  check_sampling_options(opt);
  GenerationRows g{opt, stop_ids, model.config().vocab_size, max_new_tokens, max_seq_length, prompts, {}, {}, {}, {}};
  const int rows = static_cast<int>(prompts.size());
  g.out.resize(static_cast<std::size_t>(rows));
  g.row_logits.resize(static_cast<std::size_t>(g.vocab));
  for (int r = 0; r < rows; ++r) {
    g.rngs.emplace_back(opt.seed, first_stream + static_cast<std::uint64_t>(r));
    if (g.seqs[r].empty()) throw std::invalid_argument("generate: prompt " + std::to_string(r) + " is empty");
    if (static_cast<int>(g.seqs[r].size()) >= max_seq_length) {
      g.out[r].finish = FinishReason::context;
    } else if (max_new_tokens > 0) {
      g.active.push_back(r);
    }
  }
  if (use_cache) {
    generate_with_cache(model, params, g);
  } else {
    generate_by_recompute(model, params, g, pad_id);
  }
  return std::move(g.out);
}

}  // namespace shardft
