#include "kernels/cuda/side_stream.hpp"

#include "kernels/cuda/cublas_gemm.hpp"

namespace shardft::cuda {

namespace {
struct PriorityRange {
  int least = 0, greatest = 0;
};
PriorityRange priority_range() {
  PriorityRange r;
  check_cuda(cudaDeviceGetStreamPriorityRange(&r.least, &r.greatest), "cudaDeviceGetStreamPriorityRange");
  return r;
}
}  // namespace

cudaStream_t create_side_stream() {
  cudaStream_t s = nullptr;
  check_cuda(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, priority_range().least),
             "cudaStreamCreateWithPriority (side stream)");
  return s;
}

int raise_stream_priority(cudaStream_t stream) {
  cudaStreamAttrValue value{};
  value.priority = priority_range().greatest;
  check_cuda(cudaStreamSetAttribute(stream, cudaStreamAttributePriority, &value),
             "cudaStreamSetAttribute (compute stream priority)");
  return stream_priority(stream);
}

int stream_priority(cudaStream_t stream) {
  int priority = 0;
  check_cuda(cudaStreamGetPriority(stream, &priority), "cudaStreamGetPriority");
  return priority;
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
