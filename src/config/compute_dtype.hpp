#pragma once
// The dtype a run computes in, as the recipe's bf16 / fp16 switches choose it: fp32, or bf16 / fp16
// (fp32 master weights, rounded compute weights). model/compute_dtype.hpp rounds weights to it.
namespace shardft {

enum class ComputeDtype { fp32, bf16, fp16 };

inline const char* compute_dtype_name(ComputeDtype d) {  // "fp32", "bf16", "fp16"
  return d == ComputeDtype::bf16 ? "bf16" : d == ComputeDtype::fp16 ? "fp16" : "fp32";
}

// What a recipe's bf16 / fp16 switches ask for (validation makes them exclusive).
inline ComputeDtype compute_dtype_of(bool bf16, bool fp16) {
  return bf16 ? ComputeDtype::bf16 : fp16 ? ComputeDtype::fp16 : ComputeDtype::fp32;
}

}  // namespace shardft
