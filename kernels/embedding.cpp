// Token embedding, ids [N], table / dtable [V, d], out / dout [N, d]:
//   forward   out[n, :] = table[ids[n], :]                       a row gather (kernels/rows.hpp)
//   backward  dtable[v, :] += sum over n with ids[n] == v of dout[n, :]
//
// Backward. Tokens share ids, so a scatter over tokens races; float atomics would settle the race
// but let the order of the additions, and so the rounding, change from run to run, and the ZeRO tests
// hold every configuration to the single-rank step bit for bit. Instead:
//   1. sort the token positions by id, ties in token order: a stable LSD radix sort on the device
//      (no host copy of the ids, no synchronisation);
//   2. cut the sorted list into windows of kWindow tokens, one team per window, its threads over the
//      d columns. A run of one id inside a window is added to dtable[v, :] token by token, in token
//      order; a run that crosses a window edge is summed into that window's head (continued from the
//      previous window) or tail (continued into the next) partial row instead;
//   3. one more team per window adds each crossing id's tail and heads, in window order, to its row.
// Every sum has a fixed order whatever the team size or backend, and each team does at most
// kWindow x d additions however often one id repeats (padding, chat-template tokens).
// Precondition: every id in [0, V) (check_token_ids, on the host, where batches are built).
#include "kernels/embedding.hpp"

#include "kernels/device_traffic.hpp"
#include "kernels/kernel_scratch.hpp"

#include <limits>
#include <stdexcept>
#include <string>

#include "kernels/rows.hpp"

namespace shardft {

namespace {

using Team = TeamLaunch;
using Member = Team::member_type;

// Digits of up to 10 bits: one pass for up to 1024 ids, two up to 2^20 (every Llama / Qwen vocabulary).
constexpr int kMaxDigitBits = 10;
// Each token counts the tokens before it in its block that share its digit: O(kSortBlock) per token,
// against (radix x N / kSortBlock) counters to clear and scan per pass.
constexpr std::int64_t kSortBlock = 64;
constexpr std::int64_t kWindow = 32;

// One stable counting-sort pass on the digit (key >> shift) & mask. Token i of block b lands at
//   offset[digit, b] + (tokens before i in block b with the same digit),
// offset being the exclusive scan, digit-major, of the per-(digit, block) counts. The counts are
// integer atomics, whose result does not depend on the order the threads run in.
void radix_pass(Unmanaged1<const std::int32_t> key_in, Unmanaged1<const std::int32_t> pos_in, bool first_pass,
                int shift, int digit_bits, Unmanaged1<std::int32_t> key_out, Unmanaged1<std::int32_t> pos_out,
                Unmanaged1<std::int32_t> rank, Unmanaged1<std::int32_t> counts) {
  const std::int64_t n = static_cast<std::int64_t>(key_in.extent(0));
  const std::int64_t blocks = (n + kSortBlock - 1) / kSortBlock;
  const std::int32_t mask = (std::int32_t{1} << digit_bits) - 1;
  Kokkos::deep_copy(ExecSpace(), counts, 0);
  Kokkos::parallel_for(
      "embedding_sort_rank", Range(0, n), KOKKOS_LAMBDA(const std::int64_t i) {
        const std::int32_t digit = (key_in(i) >> shift) & mask;
        std::int32_t r = 0;
        for (std::int64_t k = i - i % kSortBlock; k < i; ++k) r += ((key_in(k) >> shift) & mask) == digit ? 1 : 0;
        rank(i) = r;
        Kokkos::atomic_increment(&counts(digit * blocks + i / kSortBlock));
      });
  Kokkos::parallel_scan(
      "embedding_sort_offsets", Range(0, static_cast<std::int64_t>(counts.extent(0))),
      KOKKOS_LAMBDA(const std::int64_t j, std::int32_t& offset, const bool final) {
        const std::int32_t c = counts(j);
        if (final) counts(j) = offset;
        offset += c;
      });
  Kokkos::parallel_for(
      "embedding_sort_scatter", Range(0, n), KOKKOS_LAMBDA(const std::int64_t i) {
        const std::int32_t digit = (key_in(i) >> shift) & mask;
        const std::int32_t to = counts(digit * blocks + i / kSortBlock) + rank(i);
        key_out(to) = key_in(i);
        pos_out(to) = first_pass ? static_cast<std::int32_t>(i) : pos_in(i);
      });
}

}  // namespace

void sort_tokens_by_id(Unmanaged1<const std::int32_t> ids, int vocab, Unmanaged1<std::int32_t> sorted_ids,
                       Unmanaged1<std::int32_t> positions) {
  const std::int64_t n = static_cast<std::int64_t>(ids.extent(0));
  if (sorted_ids.extent(0) != ids.extent(0) || positions.extent(0) != ids.extent(0)) {
    throw std::invalid_argument("sort_tokens_by_id: sorted_ids and positions must hold one entry per id");
  }
  if (vocab < 1) throw std::invalid_argument("sort_tokens_by_id: empty vocabulary");
  if (n > std::numeric_limits<std::int32_t>::max()) {
    throw std::invalid_argument("sort_tokens_by_id: more than 2^31 - 1 tokens");
  }
  if (n == 0) return;
  int bits = 1;
  while ((std::int64_t{1} << bits) < vocab) ++bits;
  const int passes = (bits + kMaxDigitBits - 1) / kMaxDigitBits;
  const int digit_bits = (bits + passes - 1) / passes;
  const std::int64_t blocks = (n + kSortBlock - 1) / kSortBlock;
  const auto rank = kernel_scratch<std::int32_t>("embedding_sort_rank", n);
  const auto counts = kernel_scratch<std::int32_t>("embedding_sort_counts", (std::size_t{1} << digit_bits) * blocks);
  // Passes ping-pong between two scratch buffers; the last one writes the outputs.
  static const char* const kKeyNames[2] = {"embedding_sort_ids_0", "embedding_sort_ids_1"};
  static const char* const kPosNames[2] = {"embedding_sort_pos_0", "embedding_sort_pos_1"};
  Unmanaged1<std::int32_t> key_tmp[2], pos_tmp[2];
  for (int p = 0; p + 1 < passes && p < 2; ++p) {
    key_tmp[p] = kernel_scratch<std::int32_t>(kKeyNames[p], n);
    pos_tmp[p] = kernel_scratch<std::int32_t>(kPosNames[p], n);
  }
  Unmanaged1<const std::int32_t> key_in = ids, pos_in;
  for (int p = 0; p < passes; ++p) {
    const bool last = p + 1 == passes;
    Unmanaged1<std::int32_t> key_out = last ? sorted_ids : Unmanaged1<std::int32_t>(key_tmp[p % 2]);
    Unmanaged1<std::int32_t> pos_out = last ? positions : Unmanaged1<std::int32_t>(pos_tmp[p % 2]);
    radix_pass(key_in, pos_in, p == 0, p * digit_bits, digit_bits, key_out, pos_out, rank, counts);
    key_in = key_out;
    pos_in = pos_out;
  }
}

namespace {

// ids / pos: the tokens sorted by id (sort_tokens_by_id).
void add_sorted_rows(View1<std::int32_t> ids, View1<std::int32_t> pos, Unmanaged2<const float> dout,
                     Unmanaged2<float> dtable) {
  const std::int64_t n = static_cast<std::int64_t>(ids.extent(0));
  const int d = static_cast<int>(dtable.extent(1));
  const int windows = static_cast<int>((n + kWindow - 1) / kWindow);
  const auto head = kernel_scratch<float>("embedding_grad_head", windows, d);
  const auto tail = kernel_scratch<float>("embedding_grad_tail", windows, d);
  Kokkos::parallel_for(
      "embedding_backward_windows", Team(windows, Kokkos::AUTO), KOKKOS_LAMBDA(const Member& m) {
        const int w = m.league_rank();
        const std::int64_t k0 = w * kWindow, k1 = k0 + kWindow < n ? k0 + kWindow : n;
        for (std::int64_t r0 = k0; r0 < k1;) {
          const std::int32_t id = ids(r0);
          std::int64_t r1 = r0 + 1;
          while (r1 < k1 && ids(r1) == id) ++r1;
          const bool from_prev = r0 == k0 && k0 > 0 && ids(k0 - 1) == id;
          const bool into_next = r1 == k1 && k1 < n && ids(k1) == id;
          float* row = from_prev ? &head(w, 0) : into_next ? &tail(w, 0) : &dtable(id, 0);
          // Token by token, each thread over the same columns (so no barrier between tokens): the
          // innermost loop runs along a row, which vectorises on the host.
          for (std::int64_t k = r0; k < r1; ++k) {
            const float* src = &dout(pos(k), 0);
            if (k == r0 && (from_prev || into_next)) {
              Kokkos::parallel_for(Kokkos::TeamThreadRange(m, d), [&](const int j) { row[j] = src[j]; });
            } else {
              Kokkos::parallel_for(Kokkos::TeamThreadRange(m, d), [&](const int j) { row[j] += src[j]; });
            }
          }
          r0 = r1;
        }
      });
  // The window where a crossing run starts owns it: its tail, then the heads of the windows the run
  // goes on through, in order.
  Kokkos::parallel_for(
      "embedding_backward_crossing", Team(windows, Kokkos::AUTO), KOKKOS_LAMBDA(const Member& m) {
        const int w = m.league_rank();
        const std::int64_t k1 = (w + 1) * kWindow;
        if (k1 >= n) return;
        const std::int32_t id = ids(k1 - 1);
        if (ids(k1) != id || (w > 0 && ids(w * kWindow - 1) == id)) return;
        Kokkos::parallel_for(Kokkos::TeamThreadRange(m, d), [&](const int j) {
          float acc = tail(w, j);
          for (int v = w + 1;; ++v) {
            acc += head(v, j);
            const std::int64_t end = (v + 1) * kWindow;
            if (end >= n || ids(end) != id) break;
          }
          dtable(id, j) += acc;
        });
      });
}

}  // namespace

void embedding_forward(Unmanaged1<const std::int32_t> ids, Unmanaged2<const float> table, Unmanaged2<float> out) {
  if (out.extent(0) != ids.extent(0) || out.extent(1) != table.extent(1)) {
    throw std::invalid_argument("embedding_forward: out must be [ids, d] with the table's d");
  }
  gather_rows(table, ids, out);
}

void embedding_backward(Unmanaged1<const std::int32_t> ids, Unmanaged2<const float> dout, Unmanaged2<float> dtable) {
  if (dout.extent(0) != ids.extent(0) || dout.extent(1) != dtable.extent(1)) {
    throw std::invalid_argument("embedding_backward: dout must be [ids, d] with dtable's d");
  }
  if (ids.extent(0) == 0 || dtable.extent(1) == 0) return;
  const std::size_t n = ids.extent(0);
  const auto sorted_ids = kernel_scratch<std::int32_t>("embedding_sorted_ids", n);
  const auto positions = kernel_scratch<std::int32_t>("embedding_sorted_pos", n);
  sort_tokens_by_id(ids, static_cast<int>(dtable.extent(0)), sorted_ids, positions);
  add_sorted_rows(sorted_ids, positions, dout, dtable);
}

void check_token_ids(const std::int32_t* ids, std::size_t n, int vocab) {
  for (std::size_t i = 0; i < n; ++i) {
    if (ids[i] < 0 || ids[i] >= vocab) {
      throw std::out_of_range("token id " + std::to_string(ids[i]) + " at position " + std::to_string(i) +
                              " is outside the vocabulary [0, " + std::to_string(vocab) + ")");
    }
  }
}

void check_token_ids(Unmanaged1<const std::int32_t> ids, int vocab) {
  auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), ids);
  count_device_copy("token ids checked on the host", ids.extent(0) * sizeof(std::int32_t));
  count_host_sync("token ids checked on the host");
  check_token_ids(host.data(), host.extent(0), vocab);
}

}  // namespace shardft
