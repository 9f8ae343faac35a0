#include "comm/communicator_factory.hpp"

#include <stdexcept>

#include "kernels/types.hpp"
#if defined(SHARDFT_HAVE_NCCL)
#include "comm/nccl/nccl_communicator.hpp"
#endif

namespace shardft {

const char* backend_name(CollectivesBackend b) { return b == CollectivesBackend::nccl ? "nccl" : "mpi"; }

CommBuild this_build() {
  CommBuild b;
  b.compute_memory_on_host = Kokkos::SpaceAccessibility<Kokkos::HostSpace, MemSpace>::accessible;
#if defined(SHARDFT_HAVE_NCCL)
  b.nccl_compiled = true;
#endif
  b.memory_space = MemSpace::name();
  return b;
}

CollectivesBackend choose_collectives(const std::string& requested, const CommBuild& build) {
  const std::string where = "the compute memory space (Kokkos " + build.memory_space + ")";
  if (requested == "mpi") {
    if (!build.compute_memory_on_host) {
      throw std::invalid_argument("collectives: mpi needs host-accessible compute memory, but " + where +
                                  " is device memory and MPI here is not CUDA-aware; use nccl or auto");
    }
    return CollectivesBackend::mpi;
  }
  if (requested == "nccl") {
    if (!build.nccl_compiled) {
      throw std::invalid_argument(
          "collectives: nccl, but this build has no NCCL backend (configure with the CUDA toolkit and NCCL, "
          "-DSHARDFT_WITH_CUDA=ON); use mpi or auto");
    }
    if (build.compute_memory_on_host) {
      throw std::invalid_argument("collectives: nccl needs device compute memory, but " + where +
                                  " is host memory (a Kokkos without CUDA); use mpi or auto");
    }
    return CollectivesBackend::nccl;
  }
  if (requested == "auto") {
    if (build.compute_memory_on_host) return CollectivesBackend::mpi;
    if (!build.nccl_compiled) {
      throw std::invalid_argument("collectives: auto found " + where +
                                  " to be device memory, which only NCCL can reduce, but this build has no NCCL "
                                  "backend (NCCL was not found when configuring)");
    }
    return CollectivesBackend::nccl;
  }
  throw std::invalid_argument("collectives: '" + requested + "' is not one of auto, mpi, nccl");
}

std::shared_ptr<Communicator> make_communicator(const std::shared_ptr<MpiCommunicator>& group,
                                                CollectivesBackend backend) {
  if (backend == CollectivesBackend::mpi) return group;
#if defined(SHARDFT_HAVE_NCCL)
  return std::make_shared<NcclCommunicator>(*group, group->name());
#else
  throw std::invalid_argument("collectives: nccl, but this build has no NCCL backend");
#endif
}

}  // namespace shardft
