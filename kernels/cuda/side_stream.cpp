#include "kernels/cuda/side_stream.hpp"

#include "kernels/cuda/cublas_gemm.hpp"

namespace shardft::cuda {

cudaStream_t create_side_stream() {
  cudaStream_t s = nullptr;
  check_cuda(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags (side stream)");
  return s;
}

void destroy_stream(cudaStream_t stream) {
  if (stream) cudaStreamDestroy(stream);  // at teardown: an error here has nothing left to stop
}

cudaEvent_t create_order_event() {
  cudaEvent_t e = nullptr;
  check_cuda(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreateWithFlags (order event)");
  return e;
}

void destroy_event(cudaEvent_t event) {
  if (event) cudaEventDestroy(event);
}

void record_event(cudaEvent_t event, cudaStream_t stream) {
  check_cuda(cudaEventRecord(event, stream), "cudaEventRecord (order event)");
}

void stream_wait_event(cudaStream_t stream, cudaEvent_t event) {
  check_cuda(cudaStreamWaitEvent(stream, event, 0), "cudaStreamWaitEvent");
}

void synchronize_stream(cudaStream_t stream) { check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize (side stream)"); }

}  // namespace shardft::cuda
