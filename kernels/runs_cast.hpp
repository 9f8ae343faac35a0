#pragma once
// The compute-weight refresh of a whole shard in one launch: for every run of `runs` (kernels/flat_runs.hpp;
// its value the offset from src to dst) and every i in it, dst[i + value] = the compute-dtype value of
// src[i]. The ZeRO engine's master shard maps onto its compute weights this way: unit by unit, at an offset
// that is 0 where the two share a layout (stage 0's whole buffer, stage 3's shard) and differs per unit at
// stages 1-2 (the rank's shard of each unit inside the full buffer). Same element conversion as to_bf16 /
// round_to_bf16 / round_to_fp16 / a copy, so the same values.
#include "kernels/bf16.hpp"
#include "kernels/flat_runs.hpp"
#include "kernels/types.hpp"

namespace shardft {

enum class RunCast { copy, round_bf16, round_fp16 };  // fp32 storage: as is, rounded to bf16 / to fp16

void cast_runs(Unmanaged1<const float> src, const FlatRuns& runs, RunCast cast, Unmanaged1<float> dst);
void cast_runs(Unmanaged1<const float> src, const FlatRuns& runs, Unmanaged1<bf16> dst);  // bf16 storage

}  // namespace shardft
