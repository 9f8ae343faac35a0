#pragma once
// A CUDA stream of its own beside the compute stream, and events that order work between two streams
// without the host waiting (kernels/side_queue's GPU form). Compiled with the CUDA toolkit.
#include <cuda_runtime.h>

namespace shardft::cuda {

// A non-blocking stream (no implicit order with the legacy default stream) at the compute stream's
// priority.
cudaStream_t create_side_stream();
void destroy_stream(cudaStream_t stream);
// An event without timing: it only orders work.
cudaEvent_t create_order_event();
void destroy_event(cudaEvent_t event);
// `event` completes when the work issued to `stream` so far has.
void record_event(cudaEvent_t event, cudaStream_t stream);
// Work issued to `stream` from now on starts after `event` completes.
void stream_wait_event(cudaStream_t stream, cudaEvent_t event);
// The host waits for the work issued to `stream` so far.
void synchronize_stream(cudaStream_t stream);

}  // namespace shardft::cuda
