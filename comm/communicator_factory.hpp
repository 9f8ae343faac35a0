#pragma once
// Which backend carries a group's collectives, and the one place communicators are made.
//
// `collectives` (a recipe key): auto | mpi | nccl.
//   auto  NCCL where the compute memory space is not host-accessible (a CUDA build: the engine's
//         buffers are device memory), MPI otherwise.
//   mpi   needs host-accessible compute memory: Debian's Open MPI is not CUDA-aware, and the MPI
//         backend folds reductions on the host.
//   nccl  needs a build with the NCCL backend and device compute memory.
// MPI always keeps bootstrap, topology discovery and host-side control: an NCCL communicator is made
// over an MPI group (its unique id is broadcast there).
#include <memory>
#include <string>

#include "comm/mpi_communicator.hpp"

namespace shardft {

enum class CollectivesBackend { mpi, nccl };
const char* backend_name(CollectivesBackend b);

// The facts of this build the choice depends on.
struct CommBuild {
  bool compute_memory_on_host = true;  // Kokkos' default memory space is host-accessible
  bool nccl_compiled = false;          // the NCCL backend is part of this build
  std::string memory_space;            // its name, for messages ("HostSpace", "Cuda")
};
CommBuild this_build();

// The backend `requested` resolves to on `build`; throws std::invalid_argument saying why it cannot
// be had and what to ask for instead.
CollectivesBackend choose_collectives(const std::string& requested, const CommBuild& build);

// A communicator over `group`'s ranks on `backend`, with group's name and collective timeout: for MPI,
// `group` itself; for NCCL a new NCCL communicator (collective over the group: every rank calls it).
std::shared_ptr<Communicator> make_communicator(const std::shared_ptr<MpiCommunicator>& group,
                                                CollectivesBackend backend);

}  // namespace shardft
