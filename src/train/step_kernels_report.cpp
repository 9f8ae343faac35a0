#include "train/step_kernels_report.hpp"

#include <algorithm>
#include <cstdio>
#include <sstream>

namespace shardft {

nlohmann::json step_kernel_fields(const StepKernels& k, int layers) {
  return {{"gemm_tensor_core_flop_share", k.gemm.tensor_core_share()},
          {"gemm_flops_per_step", k.gemm.total_flops()},
          {"gemm_widened_elements_per_step", k.gemm.widened_elements},
          {"kernel_launches_per_layer", launches_per_layer(k, layers)},
          {"kernel_launches_outside_layers_per_step", k.launches - k.layer_launches},
          {"host_syncs_per_step", k.traffic.syncs},
          {"device_allocations_per_step", k.traffic.allocations}};
}

double launches_per_layer(const StepKernels& k, int layers) {
  return static_cast<double>(k.layer_launches) / std::max(1, layers) / std::max(1, k.micro_batches);
}

std::string describe_step_kernels(const StepKernels& k, int layers, long step) {
  char share[64], flops[64], launches[64];
  std::snprintf(share, sizeof share, "%.1f%%", 100.0 * k.gemm.tensor_core_share());
  std::snprintf(flops, sizeof flops, "%.3g GFLOP", k.gemm.total_flops() / 1e9);
  std::snprintf(launches, sizeof launches, "%.1f", launches_per_layer(k, layers));
  std::ostringstream s;
  s << "device work of step " << step << ": GEMM FLOPs " << share << " on bf16 tensor cores (" << flops << " in "
    << k.gemm.calls << " GEMMs), " << k.gemm.widened_elements << " bf16 elements widened to fp32, " << launches
    << " kernel launches per decoder layer (" << k.launches << " in all, " << k.launches - k.layer_launches
    << " outside the layers: embedding, LM head, optimizer), " << k.traffic.syncs << " host sync"
    << (k.traffic.syncs == 1 ? "" : "s") << ", " << k.traffic.allocations << " device allocation"
    << (k.traffic.allocations == 1 ? "" : "s");
  if (k.traffic.syncs > 1 || k.traffic.allocations > 0) s << " (" << k.traffic.describe(6) << ")";
  return s.str();
}

}  // namespace shardft
