// kernels/device_backend.hpp where Kokkos computes on the host: no device.
#include "kernels/device_backend.hpp"

#include <stdexcept>

namespace shardft::device_backend {

namespace {
[[noreturn]] void no_device(const char* call) {
  throw std::logic_error(std::string(call) + ": this build computes on the host (no device backend)");
}
}  // namespace

ComputeGpu compute_gpu() { return {}; }

bool device_memory(double&, double&) { return false; }

double measure_gemm_flops(bool) { return 0; }

void sgemm(bool, bool, int, int, int, float, const float*, int, const float*, int, float, float*, int) {
  no_device("device_backend::sgemm");
}
void gemm_bf16_f32(bool, bool, int, int, int, float, const std::uint16_t*, int, const std::uint16_t*, int, float,
                   float*, int) {
  no_device("device_backend::gemm_bf16_f32");
}
void gemm_bf16_bf16(bool, bool, int, int, int, float, const std::uint16_t*, int, const std::uint16_t*, int, float,
                    std::uint16_t*, int) {
  no_device("device_backend::gemm_bf16_bf16");
}
std::string gemm_library() { return ""; }

bool has_queue_marks() { return false; }
std::size_t record_queue_mark() { return 0; }
double queue_marks_elapsed_ms(std::size_t, std::size_t) { return 0; }
void clear_queue_marks() {}

}  // namespace shardft::device_backend
