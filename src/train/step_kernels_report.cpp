#include "train/step_kernels_report.hpp"

#include <cstdio>
#include <sstream>

namespace shardft {

namespace {
double per_layer(std::int64_t launches, int layers) {
  return layers > 0 ? static_cast<double>(launches) / layers : static_cast<double>(launches);
}
}  // namespace

nlohmann::json step_kernel_fields(const StepKernels& k, int layers) {
  return {{"gemm_tensor_core_flop_share", k.gemm.tensor_core_share()},
          {"gemm_flops_per_step", k.gemm.total_flops()},
          {"gemm_widened_elements_per_step", k.gemm.widened_elements},
          {"kernel_launches_per_layer", per_layer(k.launches, layers)},
          {"host_syncs_per_step", k.traffic.syncs},
          {"device_allocations_per_step", k.traffic.allocations}};
}

std::string describe_step_kernels(const StepKernels& k, int layers, long step) {
  char share[64], flops[64], launches[64];
  std::snprintf(share, sizeof share, "%.1f%%", 100.0 * k.gemm.tensor_core_share());
  std::snprintf(flops, sizeof flops, "%.3g GFLOP", k.gemm.total_flops() / 1e9);
  std::snprintf(launches, sizeof launches, "%.1f", per_layer(k.launches, layers));
  std::ostringstream s;
  s << "device work of step " << step << ": GEMM FLOPs " << share << " on bf16 tensor cores (" << flops << " in "
    << k.gemm.calls << " GEMMs), " << k.gemm.widened_elements << " bf16 elements widened to fp32, " << launches
    << " kernel launches per layer (" << k.launches << " in all), " << k.traffic.syncs << " host sync"
    << (k.traffic.syncs == 1 ? "" : "s") << ", " << k.traffic.allocations << " device allocation"
    << (k.traffic.allocations == 1 ? "" : "s");
  if (k.traffic.syncs > 1 || k.traffic.allocations > 0) s << " (" << k.traffic.describe(6) << ")";
  return s.str();
}

}  // namespace shardft
