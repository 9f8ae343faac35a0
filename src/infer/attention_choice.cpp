#include "infer/attention_choice.hpp"

#include "kernels/attention_fused.hpp"
#include "kernels/attention_lse.hpp"

namespace shardft {

namespace {
// "" when the fused kernels passed their self-test in this process, else why not (run once).
const std::string& fused_self_test_failure() {
  static const std::string failure = fused_attention_self_test();
  return failure;
}
const std::string& column_blocks_self_test_failure() {
  static const std::string failure = fused_attention_column_blocks_self_test();
  return failure;
}
const std::string& atomic_backward_self_test_failure() {
  static const std::string failure = fused_attention_self_test(false);
  return failure;
}

// The fused kernels' backward: the deterministic one unless the atomic one is asked for and passes.
void choose_backward(AttentionChoice& c, bool deterministic) {
  if (deterministic) {
    c.description += "; deterministic backward";
    return;
  }
  c.deterministic_backward = !atomic_backward_self_test_failure().empty();
  c.description += c.deterministic_backward
                       ? "; deterministic backward: the atomic one (deterministic_attention: false) failed its "
                         "self-test: " + atomic_backward_self_test_failure()
                       : "; the atomic backward (deterministic_attention: false: dq added with fp32 atomics, not "
                         "reproducible bit for bit)";
}
}  // namespace

AttentionChoice choose_attention(const std::string& impl, ComputeDtype dtype, bool deterministic, int head_dim) {
  AttentionChoice c;
  if (impl == "eager") {
    c.description = "eager (reference kernel, [seq, seq] probabilities kept for backward)";
    return c;
  }
  c.memory_efficient = true;
  const std::string fallback =
      "memory_efficient (log-sum-exp kernels: " +
      (head_dim > 0 ? attention_lse_kernel_name(dtype == ComputeDtype::bf16, head_dim)
                    : std::string("host tiles, or the Kokkos flash kernel on a GPU")) +
      ")";
  if (impl == "memory_efficient") {
    c.description = fallback;
    return c;
  }
  if (!fused_attention_built()) {
    c.description = fallback + "; fused kernels: " + fused_attention_backend();
    return c;
  }
  if (dtype != ComputeDtype::bf16) {
    c.description = fallback + "; the fused kernels (" + fused_attention_backend() + ") need bf16 compute";
    return c;
  }
  if (!fused_self_test_failure().empty()) {
    c.description = fallback + "; the fused kernels (" + fused_attention_backend() +
                    ") failed their self-test: " + fused_self_test_failure();
    return c;
  }
  c.fused = true;
  c.description = "fused bf16 kernels: " + fused_attention_backend() +
                  " (self-test passed; the log-sum-exp kernels where a batch's segments are not known)";
  c.fused_column_blocks = column_blocks_self_test_failure().empty();
  c.description += c.fused_column_blocks ? "; q, k, v read as column blocks of the stacked projection's output"
                                         : "; q, k, v copied dense: the column-block layout failed its self-test: " +
                                               column_blocks_self_test_failure();
  choose_backward(c, deterministic);
  return c;
}

AttentionChoice configure_attention(Decoder& model, const std::string& attn_implementation, bool deterministic) {
  const AttentionChoice c =
      choose_attention(attn_implementation, model.dtype(), deterministic, model.config().head_dim());
  model.set_memory_efficient_attention(c.memory_efficient);
  model.set_fused_attention(c.fused, c.fused_column_blocks, c.deterministic_backward);
  return c;
}

}  // namespace shardft
