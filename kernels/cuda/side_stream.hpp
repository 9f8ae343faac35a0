#pragma once
// A CUDA stream of its own beside the compute stream, and events that order work between two streams
// without the host waiting (kernels/side_queue's GPU form). Compiled with the CUDA toolkit.
#include <cuda_runtime.h>

namespace shardft::cuda {

// A non-blocking stream (no implicit order with the legacy default stream) at the device's least
// priority.
cudaStream_t create_side_stream();
// Raises `stream` to the device's greatest priority. The block scheduler then hands free SMs to its
// waiting blocks before a lower-priority stream's: at equal priority the blocks of the kernel launched
// first go first, so an update launched just before a GEMM would run ahead of it instead of beside it.
// Returns the stream's priority as read back afterwards.
int raise_stream_priority(cudaStream_t stream);
// The priority a stream runs at.
int stream_priority(cudaStream_t stream);
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
