// shardft: one binary, one subcommand per file. main parses the subcommand, starts MPI and Kokkos,
// and turns every error into one clear message and a non-zero exit on every rank.
#include <Kokkos_Core.hpp>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "cli/commands.hpp"
#include "cli/help.hpp"
#include "comm/bootstrap.hpp"
#include "config/train_config.hpp"
#include "data/sft_data.hpp"
#include "io/safetensors.hpp"
#include "kernels/blas_core.hpp"
#include "kernels/device_traffic.hpp"
#include "kernels/gemm.hpp"
#include "kernels/kernel_timer.hpp"
#include "train/stop_signal.hpp"


namespace {

bool is_single_process(const std::string& command) {  // one process: no MPI, no Kokkos
  return command == "estimate" || command == "consolidate" || command == "inspect" || command == "plot";
}

int run_single_process(const std::string& command, const std::vector<std::string>& args) {
  try {
    if (command == "estimate") return shardft::cli::estimate(args, std::cout);
    if (command == "consolidate") {
      // --merge_adapters over a bitsandbytes 4-bit base dequantizes it with the NF4 kernels.
      Kokkos::ScopeGuard kokkos;
      return shardft::cli::consolidate(args, std::cout);
    }
    if (command == "plot") return shardft::cli::plot(args, std::cout);
    return shardft::cli::inspect(args, std::cout);
  } catch (const std::exception& e) {
    std::cerr << "shardft: error: " << e.what() << "\n";
    return 2;
  }
}

// The BLAS reads its core choice only when it loads: a better one takes a new process image, made
// before MPI starts (the same pid, so mpirun and srun still see their rank).
void restart_for_blas_core(char** argv, bool stop_handlers_installed) {
  const std::string core = shardft::blas_core_to_force();
  if (core.empty()) return;
  shardft::note_blas_core_forced(core);
  if (stop_handlers_installed) shardft::hold_stop_signals_for_exec();
  execv("/proc/self/exe", argv);  // returns only where it failed: go on with the library's choice
  const int err = errno;
  if (stop_handlers_installed) shardft::install_stop_signal_handlers();  // unblocks them again
  unsetenv("OPENBLAS_CORETYPE");
  unsetenv("SHARDFT_BLAS_CORE_FROM");
  std::cerr << "shardft: warning: could not restart with OPENBLAS_CORETYPE=" << core << " (" << std::strerror(err)
            << "); the BLAS keeps " << shardft::blas_core_name() << "\n";
}

// train, eval and generate, under MPI and Kokkos. Every error ends the job on every rank: exit 2 for
// what the user can fix (a recipe, data, a file), 1 for the rest.
int run_on_mpi(const std::string& command, const std::vector<std::string>& args, shardft::MpiSession& mpi) {
  int code = 0;
  try {
    shardft::declare_unfenced_kernel_callbacks();  // before Kokkos starts (kernels/kernel_timer.hpp)
    Kokkos::ScopeGuard kokkos;
    shardft::install_device_traffic_hooks();  // the step's host<->device traffic in the log
    const char* kernel_times = std::getenv("SHARDFT_KERNEL_TIMES");
    if (kernel_times && std::string(kernel_times) != "0") shardft::install_kernel_timer();
    shardft::gemm_set_num_threads(1);  // one rank per core
    const shardft::cli::Invocation inv = shardft::cli::parse_invocation(args);
    if (command == "train") {
      code = shardft::cli::train(inv, mpi);
    } else if (command == "eval") {
      code = shardft::cli::eval(inv, mpi);
    } else if (command == "generate") {
      code = shardft::cli::generate(args, mpi);
    } else {
      std::cerr << "shardft: unknown command '" << command << "'\n";
      shardft::cli::print_usage(std::cerr);
      code = 2;
    }
    if (shardft::kernel_timer_installed()) std::cerr << "rank " << mpi.rank() << ": " << shardft::kernel_timer_report();
  } catch (const shardft::ConfigError& e) {
    mpi.abort_job(2, std::string("error: ") + e.what());
  } catch (const shardft::DataError& e) {
    mpi.abort_job(2, std::string("error: ") + e.what());
  } catch (const shardft::FormatError& e) {
    mpi.abort_job(2, std::string("error: ") + e.what());
  } catch (const std::filesystem::filesystem_error& e) {
    // A path the user gave (or one under it) that cannot be read or written: theirs to fix, like a bad key.
    // Paths named by a key are checked where they are made (train/output_path.hpp); this is the rest.
    mpi.abort_job(2, std::string("error: ") + e.what());
  } catch (const std::exception& e) {
    mpi.abort_job(1, std::string("error: ") + e.what());
  }
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  // A file-size limit (ulimit -f, a quota) would otherwise kill the process with SIGXFSZ mid-write,
  // without a word; ignored, the write fails with EFBIG and takes the full-disk path (an error naming
  // the file, exit 2, the .tmp removed).
  std::signal(SIGXFSZ, SIG_IGN);
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    shardft::cli::print_usage(args.empty() ? std::cerr : std::cout);
    return args.empty() ? 2 : 0;
  }
  if (args[0] == "--version" || args[0] == "version") {
    shardft::cli::print_version(std::cout);
    return 0;
  }
  const std::string command = args[0];
  args.erase(args.begin());
  if (shardft::cli::asks_for_help(args)) {  // before MPI and Kokkos: help needs neither
    if (shardft::cli::print_command_help(command, std::cout, shardft::cli::output_width())) return 0;
    std::cerr << "shardft: unknown command '" << command << "'\n";
    shardft::cli::print_usage(std::cerr);
    return 2;
  }
  // A training run stops on SIGTERM / SIGINT / SIGUSR1 after a step, with a checkpoint: the handlers go in
  // first, so that a signal during start-up (MPI and Kokkos take a while) counts the same instead of
  // killing the process (exit 143).
  if (command == "train") shardft::install_stop_signal_handlers();
  if (command == "keys") {
    shardft::cli::print_keys(std::cout, shardft::cli::output_width());
    return 0;
  }
  if (is_single_process(command)) return run_single_process(command, args);
  restart_for_blas_core(argv, command == "train");
  shardft::MpiSession mpi(&argc, &argv);
  return run_on_mpi(command, args, mpi);
}
