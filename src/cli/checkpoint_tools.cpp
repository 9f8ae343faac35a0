// `shardft consolidate` and `shardft inspect`: single-process tools over a sharded checkpoint.
#include <iostream>

#include "cli/commands.hpp"
#include "config/train_config.hpp"
#include "parallel/estimate/memory_estimate.hpp"
#include "tools/consolidate.hpp"
#include "tools/merge_adapters.hpp"

namespace shardft::cli {

int consolidate(const std::vector<std::string>& args, std::ostream& out) {
  std::string checkpoint, base;
  bool merge_adapters = false;
  ConsolidateOptions opt;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= args.size()) throw ConfigError(a + ": expected a value after it");
      return args[++i];
    };
    if (a == "--output") {
      opt.output_dir = value();
    } else if (a == "--dtype") {
      const std::string d = value();
      if (d == "fp32" || d == "float32") opt.dtype = TensorDtype::F32;
      else if (d == "bf16" || d == "bfloat16") opt.dtype = TensorDtype::BF16;
      else if (d == "fp16" || d == "float16") opt.dtype = TensorDtype::F16;
      else throw ConfigError("--dtype: expected fp32, bf16 or fp16, got '" + d + "'");
    } else if (a == "--merge_adapters") {
      merge_adapters = true;
    } else if (a == "--base") {
      base = value();
    } else if (a == "--max_shard_size") {
      opt.max_shard_bytes = static_cast<std::uint64_t>(parse_count(value(), "--max_shard_size"));
    } else if (a.rfind("--", 0) == 0) {
      throw ConfigError("consolidate: unknown option '" + a + "'");
    } else if (checkpoint.empty()) {
      checkpoint = a;
    } else {
      throw ConfigError("consolidate: one checkpoint directory, got '" + checkpoint + "' and '" + a + "'");
    }
  }
  if (checkpoint.empty() || opt.output_dir.empty()) {
    throw ConfigError("usage: shardft consolidate CHECKPOINT --output DIR [--merge_adapters [--base DIR]]");
  }
  if (!base.empty() && !merge_adapters) throw ConfigError("consolidate: --base goes with --merge_adapters");
  const ConsolidateReport r = merge_adapters ? merge_adapters_into_base(checkpoint, base, opt, std::cerr)
                                             : consolidate_checkpoint(checkpoint, opt, std::cerr);
  for (const std::string& f : r.removed) out << "removed " << f << " (left by an earlier export)\n";
  out << "consolidated " << r.tensors << " tensors into " << r.files << " safetensors file" << (r.files > 1 ? "s" : "")
      << " (" << r.bytes << " bytes, " << dtype_tag(opt.dtype) << ") and config.json in " << opt.output_dir
      << "; largest tensor " << r.largest_tensor << " elements\n";
  return 0;
}

int inspect(const std::vector<std::string>& args, std::ostream& out) {
  if (args.size() != 1) throw ConfigError("usage: shardft inspect CHECKPOINT");
  out << inspect_checkpoint(args[0]);
  return 0;
}

}  // namespace shardft::cli
