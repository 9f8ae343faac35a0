#pragma once
// Marks on a CUDA stream (pooled cudaEvents) read back later: the device time between two points of a
// stream's work without stopping the host (kernels/kernel_timer's unfenced timing in a GPU build).
// Compiled with the CUDA toolkit; not thread-safe (the kernel timer's callbacks run on one thread).
#include <cuda_runtime.h>

#include <cstddef>

namespace shardft::cuda {

// Records a mark on `stream` now (in issue order: it completes when the work before it has) and
// returns its index. Events are created as needed and reused after clear_stream_marks().
std::size_t record_stream_mark(cudaStream_t stream);
// Milliseconds of device time between marks a and b (b after a on the same stream); waits for b.
float stream_marks_elapsed_ms(std::size_t a, std::size_t b);
// Marks recorded since the last clear.
std::size_t stream_marks_recorded();
// Forgets the marks (their events are kept for reuse).
void clear_stream_marks();

}  // namespace shardft::cuda
