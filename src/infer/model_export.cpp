#include "infer/model_export.hpp"

#include <exception>
#include <optional>
#include <vector>

#include "io/peft_adapter.hpp"
#include "model/layout_window.hpp"
#include "infer/adapter_export.hpp"

namespace shardft {

TensorDtype resolve_export_dtype(const std::string& export_dtype, const nlohmann::json& source_config) {
  if (export_dtype == "fp32") return TensorDtype::F32;
  if (export_dtype == "bf16") return TensorDtype::BF16;
  if (export_dtype == "fp16") return TensorDtype::F16;
  if (!source_config.is_object()) return TensorDtype::F32;
  for (const char* key : {"torch_dtype", "dtype"}) {
    const auto it = source_config.find(key);
    if (it == source_config.end() || it->is_null()) continue;
    const std::string name = it->is_string() ? it->get<std::string>() : it->dump();
    if (name == "float32") return TensorDtype::F32;
    if (name == "bfloat16") return TensorDtype::BF16;
    if (name == "float16") return TensorDtype::F16;
    throw FormatError(std::string("model_name_or_path's config.json: ") + key + " '" + name +
                      "' is none of float32, bfloat16, float16; set export_dtype to fp32, bf16 or fp16");
  }
  return TensorDtype::F32;
}

const char* export_dtype_name(TensorDtype dtype) {
  return dtype == TensorDtype::BF16 ? "bf16" : dtype == TensorDtype::F16 ? "fp16" : "fp32";
}

namespace {
// The exported tensors: every parameter but LoRA's factors, block by block in layout order (the order
// the engine's blocks arrive in).
std::vector<TensorEntry> exported_tensors(const ParamLayout& layout) {
  std::vector<TensorEntry> out;
  for (int b = 0; b < static_cast<int>(layout.blocks().size()); ++b) {
    for (int p : block_own_params(layout, b)) {
      if (!layout.params()[p].is_lora()) out.push_back({layout.params()[p].name, layout.params()[p].shape});
    }
  }
  return out;
}
}  // namespace

SafetensorsShardsReport save_model(ZeroEngine& engine, const ParamLayout& layout, const ModelExportConfig& cfg,
                                   TensorDtype dtype, bool writer) {
  std::optional<SafetensorsShardsWriter> out;
  if (writer) out.emplace(cfg.output_dir, exported_tensors(layout), dtype, cfg.max_shard_bytes);
  LoraTensors adapter;
  std::exception_ptr failed;
  engine.for_each_master_block(writer, [&](int block, LayoutWindow& values) {
    if (failed) return;  // keep taking part in the gathers; the error is reported after them
    try {
      if (layout.has_frozen()) {
        add_lora_tensors(layout, values, adapter);
        merge_lora_terms(layout, values);
      }
      for (int p : block_own_params(layout, block)) {
        if (!layout.params()[p].is_lora()) out->write_next(values.at(layout, p));
      }
    } catch (...) {
      failed = std::current_exception();
    }
  });
  if (!writer) return {};
  if (failed) std::rethrow_exception(failed);
  const SafetensorsShardsReport rep = out->finish();
  if (layout.has_frozen()) {
    write_peft_adapter(cfg.output_dir, adapter_config_of(layout.lora(), cfg.model_name_or_path), adapter);
  }
  return rep;
}

}  // namespace shardft
