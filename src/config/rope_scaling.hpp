#pragma once
// config.json's rope_scaling block: how the RoPE frequencies differ from plain theta^(-2i/hd), under the
// names and defaults transformers uses. The frequencies themselves are computed in model/rope_frequencies.
#include <string>
#include <string_view>

namespace shardft {

struct RopeScaling {
  // "default" (plain RoPE, also rope_scaling: null), "linear", "dynamic", "yarn" or "llama3".
  std::string_view type = "default";  // one of the literals above, never a parsed string
  double factor = 1.0;  // linear, dynamic, yarn, llama3
  // llama3: frequencies with a wavelength above original / low_freq_factor are divided by factor, those
  // below original / high_freq_factor kept, those between blended.
  double low_freq_factor = 0.0, high_freq_factor = 0.0;
  // llama3 (required); yarn (optional: the context the correction range is computed for, default
  // max_position_embeddings); dynamic accepts it and ignores it, as transformers does. 0: absent.
  int original_max_position_embeddings = 0;
  // yarn. attention_factor 0: derived from factor (and mscale / mscale_all_dim when both are set).
  double beta_fast = 32.0, beta_slow = 1.0;
  double attention_factor = 0.0;
  double mscale = 0.0, mscale_all_dim = 0.0;
  bool truncate = true;  // yarn: the correction range rounded outwards to whole dimensions
  // The key the block named its type with ("rope_type" or the older "type"), for writing it back alike.
  // (Literals, not std::strings: GCC 12 -O3 warns falsely about string members of this nested struct.)
  const char* type_key = "rope_type";

  bool plain() const { return type == "default"; }
};

}  // namespace shardft
