// shardft: one binary, one subcommand per file. main parses the subcommand, starts MPI and Kokkos,
// and turns every error into one clear message and a non-zero exit on every rank.
#include <Kokkos_Core.hpp>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "cli/commands.hpp"
#include "comm/bootstrap.hpp"
#include "config/train_config.hpp"
#include "data/sft_data.hpp"
#include "io/safetensors.hpp"
#include "kernels/device_traffic.hpp"
#include "kernels/gemm.hpp"
#include "kernels/kernel_timer.hpp"
#include "train/stop_signal.hpp"

namespace {

void usage(std::ostream& out) {
  out << "usage: shardft <command> [--config recipe.yaml] [--key=value | --key value ...]\n"
         "commands:\n"
         "  train   fine-tune the model of the recipe on its dataset\n"
         "  eval    held-out loss and greedy exact match of output_dir/model.safetensors\n"
         "  generate [--model DIR] --prompt TEXT | --prompts_file FILE | --interactive [--system TEXT]\n"
         "          [--max_new_tokens N] [--temperature T] [--top_p P] [--top_k K] [--seed S]\n"
         "          talk to a model: output_dir (default), an HF directory or a checkpoint-N\n"
         "  estimate  memory per GPU/CPU for ZeRO stages 1-3 (DeepSpeed's table) and activations\n"
         "  consolidate CHECKPOINT --output DIR [--dtype fp32|bf16|fp16] [--max_shard_size 5GB] [--merge_adapters [--base DIR]]\n"
         "          HF-loadable model.safetensors (+ index past the shard size) and config.json\n"
         "  inspect CHECKPOINT   what a checkpoint holds; verifies every checksum\n"
         "  plot RUN_DIR [--output DIR]  PNG charts of RUN_DIR/metrics.jsonl (default: RUN_DIR/plots)\n"
         "  keys    list every recipe key with its default and meaning\n"
         "run 'shardft keys' for the keys; any key may be given on the command line.\n";
}

}  // namespace

int main(int argc, char** argv) {
  // A file-size limit (ulimit -f, a quota) would otherwise kill the process with SIGXFSZ mid-write,
  // without a word; ignored, the write fails with EFBIG and takes the full-disk path (an error naming
  // the file, exit 2, the .tmp removed).
  std::signal(SIGXFSZ, SIG_IGN);
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    usage(args.empty() ? std::cerr : std::cout);
    return args.empty() ? 2 : 0;
  }
  const std::string command = args[0];
  args.erase(args.begin());
  // A training run stops on SIGTERM / SIGINT / SIGUSR1 after a step, with a checkpoint: the handlers go in
  // first, so that a signal during start-up (MPI and Kokkos take a while) counts the same instead of
  // killing the process (exit 143).
  if (command == "train") shardft::install_stop_signal_handlers();
  if (command == "keys") return shardft::cli::keys(std::cout);
  if (command == "estimate" || command == "consolidate" || command == "inspect" ||
      command == "plot") {  // one process: no MPI, no Kokkos
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

  shardft::MpiSession mpi(&argc, &argv);
  int code = 0;
  try {
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
      usage(std::cerr);
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
