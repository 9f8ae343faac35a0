#include "comm/bootstrap.hpp"

#include <mpi.h>

#include <cstdio>
#include <cstdlib>

namespace shardft {

MpiSession::MpiSession(int* argc, char*** argv) {
  int provided = 0;
  MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
}

MpiSession::~MpiSession() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

void MpiSession::abort_job(int exit_code, const std::string& message) const {
  std::fprintf(stderr, "shardft: rank %d: %s\n", rank_, message.c_str());
  std::fflush(stderr);
  if (size_ > 1) MPI_Abort(MPI_COMM_WORLD, exit_code);
  MPI_Finalize();
  std::exit(exit_code);
}

}  // namespace shardft
