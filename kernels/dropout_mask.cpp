#include "kernels/dropout_mask.hpp"

#include <stdexcept>

#include "kernels/math.hpp"

namespace shardft {

namespace {

using Team = TeamLaunch;
using Member = Team::member_type;

KOKKOS_INLINE_FUNCTION std::uint64_t mix(std::uint64_t z) { return kmath::splitmix64(z); }

KOKKOS_INLINE_FUNCTION bool kept(std::uint64_t row_hash, std::uint64_t col, std::uint32_t threshold) {
  return static_cast<std::uint32_t>(mix(row_hash ^ col) >> 40) >= threshold;
}

std::uint32_t drop_threshold(float p) { return static_cast<std::uint32_t>(static_cast<double>(p) * 16777216.0 + 0.5); }

// fp32 or bf16 elements as fp32 (widening is exact), and back (rounded once to nearest even)
KOKKOS_INLINE_FUNCTION float value_of(float v) { return v; }
KOKKOS_INLINE_FUNCTION float value_of(bf16 v) { return static_cast<float>(v); }
KOKKOS_INLINE_FUNCTION void store(float& out, float v) { out = v; }
KOKKOS_INLINE_FUNCTION void store(bf16& out, float v) { out = bf16(v); }

// out = beta * out + mask(x), each element in fp32, stored in out's type.
template <class In, class Out>
void apply_mask(const char* name, const DropoutMask& m, Unmanaged2<const In> x, Unmanaged2<Out> out, float beta) {
  if (x.extent(0) != out.extent(0) || x.extent(1) != out.extent(1) || m.row_key.extent(0) < x.extent(0)) {
    throw std::invalid_argument("dropout_apply: x and out must have one shape and a row key per row");
  }
  const int cols = static_cast<int>(x.extent(1));
  const std::uint32_t threshold = drop_threshold(m.p);
  const float scale = 1.f / (1.f - m.p);
  const std::uint64_t stream = m.stream;
  const Unmanaged1<const std::uint64_t> key = m.row_key;
  // A team per row, its threads over the columns (coalesced on the GPU). Each thread hashes the row once
  // and each element once: one splitmix64 per element, not three, and no 64-bit division to find the
  // row (integer multiplies, not memory, bound this kernel on a GPU).
  Kokkos::parallel_for(
      name, Team(static_cast<int>(x.extent(0)), Kokkos::AUTO), KOKKOS_LAMBDA(const Member& t) {
        const int n = t.league_rank();
        const std::uint64_t row_hash = mix(stream ^ mix(key(n)));
        Kokkos::parallel_for(Kokkos::TeamThreadRange(t, cols), [&](const int c) {
          const bool keep = kept(row_hash, static_cast<std::uint64_t>(c), threshold);
          const float v = keep ? value_of(x(n, c)) * scale : 0.f;
          store(out(n, c), beta == 0.f ? v : beta * value_of(out(n, c)) + v);
        });
      });
}

}  // namespace

std::uint64_t dropout_stream(std::uint64_t seed, std::int64_t step, int layer, int module) {
  return mix(mix(mix(seed) ^ static_cast<std::uint64_t>(step)) ^
             (static_cast<std::uint64_t>(layer) << 8 | static_cast<std::uint64_t>(module)));
}

void dropout_row_keys(Unmanaged1<const std::int32_t> sample_ids, Unmanaged1<const std::int32_t> position_ids,
                      Unmanaged1<std::uint64_t> row_key) {
  Kokkos::parallel_for(
      "dropout_row_keys", Range(0, row_key.extent(0)), KOKKOS_LAMBDA(const std::int64_t i) {
        row_key(i) = static_cast<std::uint64_t>(static_cast<std::uint32_t>(sample_ids(i))) << 32 |
                     static_cast<std::uint32_t>(position_ids(i));
      });
}

void dropout_row_keys_flat(std::int64_t call, Unmanaged1<std::uint64_t> row_key) {
  const std::uint64_t high = 1ull << 63 | (static_cast<std::uint64_t>(call) & 0x7fffffffull) << 32;
  Kokkos::parallel_for(
      "dropout_row_keys_flat", Range(0, row_key.extent(0)),
      KOKKOS_LAMBDA(const std::int64_t i) { row_key(i) = high | static_cast<std::uint64_t>(i); });
}

void dropout_apply(const DropoutMask& m, Unmanaged2<const float> x, Unmanaged2<float> out, float beta) {
  apply_mask("dropout_apply", m, x, out, beta);
}

void dropout_apply(const DropoutMask& m, Unmanaged2<const bf16> x, Unmanaged2<bf16> out, float beta) {
  apply_mask("dropout_apply_bf16", m, x, out, beta);
}

void dropout_apply(const DropoutMask& m, Unmanaged2<const float> x, Unmanaged2<bf16> out, float beta) {
  apply_mask("dropout_apply_to_bf16", m, x, out, beta);
}

void dropout_keep(const DropoutMask& m, Unmanaged2<float> keep) {
  const std::int64_t cols = static_cast<std::int64_t>(keep.extent(1));
  const std::uint32_t threshold = drop_threshold(m.p);
  const std::uint64_t stream = m.stream;
  const Unmanaged1<const std::uint64_t> key = m.row_key;
  Kokkos::parallel_for(
      "dropout_keep", Range(0, static_cast<std::int64_t>(keep.extent(0)) * cols), KOKKOS_LAMBDA(const std::int64_t i) {
        const std::int64_t n = i / cols, c = i % cols;
        keep(n, c) = kept(mix(stream ^ mix(key(n))), static_cast<std::uint64_t>(c), threshold) ? 1.f : 0.f;
      });
}

}  // namespace shardft
