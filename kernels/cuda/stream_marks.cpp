#include "kernels/cuda/stream_marks.hpp"

#include <vector>

#include "kernels/cuda/cublas_gemm.hpp"

namespace shardft::cuda {

namespace {
struct MarkPool {
  std::vector<cudaEvent_t> events;
  std::size_t used = 0;
};

MarkPool& pool() {
  static MarkPool p;
  return p;
}
}  // namespace

std::size_t record_stream_mark(cudaStream_t stream) {
  MarkPool& p = pool();
  if (p.used == p.events.size()) {
    cudaEvent_t e = nullptr;
    check_cuda(cudaEventCreate(&e), "cudaEventCreate (stream mark)");
    p.events.push_back(e);
  }
  check_cuda(cudaEventRecord(p.events[p.used], stream), "cudaEventRecord (stream mark)");
  return p.used++;
}

float stream_marks_elapsed_ms(std::size_t a, std::size_t b) {
  MarkPool& p = pool();
  check_cuda(cudaEventSynchronize(p.events.at(b)), "cudaEventSynchronize (stream mark)");
  float ms = 0.f;
  check_cuda(cudaEventElapsedTime(&ms, p.events.at(a), p.events.at(b)), "cudaEventElapsedTime (stream marks)");
  return ms;
}

std::size_t stream_marks_recorded() { return pool().used; }

void clear_stream_marks() { pool().used = 0; }

}  // namespace shardft::cuda
