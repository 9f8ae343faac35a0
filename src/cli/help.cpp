#include "cli/help.hpp"

#include <sys/ioctl.h>
#include <unistd.h>

#include <Kokkos_Core.hpp>
#include <algorithm>
#include <sstream>

#include "config/recipe_schema.hpp"
#include "config/train_config.hpp"
#include "kernels/blas_core.hpp"
#include "shardft_version.hpp"
#include "train/startup_report.hpp"

namespace shardft::cli {

namespace {

struct Command {
  const char* name;
  const char* synopsis;  // after "shardft <name> "
  const char* summary;   // one line, for `shardft --help`
  const char* details;   // what it does and its own options, for `shardft <name> --help`
  bool reads_recipe;     // takes --config / --deepspeed / --KEY VALUE: its help lists the recipe keys
};

const std::vector<Command>& commands() {
  static const std::vector<Command> table = {
      {"train", "[--config RECIPE.yaml] [--deepspeed ds_config.json] [--KEY VALUE | --KEY=VALUE ...]",
       "fine-tune the recipe's model on its dataset",
       "Trains on dataset_path with the recipe's keys (a YAML recipe, then a DeepSpeed config, then the command "
       "line; the last wins), writing checkpoints, metrics.jsonl and model.safetensors into output_dir. Several "
       "ranks: jobs/mpirun.sh -np N shardft train ..., or srun under SLURM (jobs/train.sbatch).",
       true},
      {"eval", "[--config RECIPE.yaml] [--KEY VALUE ...]",
       "held-out loss and greedy exact match of output_dir/model.safetensors",
       "Evaluates output_dir/model.safetensors (or output_dir itself when it is a checkpoint-N) on "
       "eval_dataset_path: loss and greedy-generation exact match.",
       true},
      {"generate",
       "[--model DIR] --prompt TEXT | --prompts_file FILE | --interactive [--system TEXT] [--max_new_tokens N] "
       "[--temperature T] [--top_p P] [--top_k K] [--seed S] [--use_cache true|false] [--config RECIPE.yaml]",
       "talk to a model: output_dir, an HF directory or a checkpoint-N",
       "Generates with the recipe's chat template from --model (default: the recipe's output_dir), an HF "
       "directory or a checkpoint-N. --prompt: one turn; --prompts_file: one prompt per line; --interactive: a "
       "conversation on the terminal. --temperature 0 (the default) is greedy; --top_p, --top_k sample.",
       true},
      {"estimate",
       "[--config RECIPE.yaml] [--total_params N --largest_layer_params N] [--gpus_per_node N] [--nodes N] "
       "[--micro_batch B --seq_len T] [--KEY VALUE ...]",
       "memory per GPU/CPU for ZeRO stages 1-3 (DeepSpeed's table) and activations",
       "Prints DeepSpeed's model-state memory table for the recipe's model, or for --total_params and "
       "--largest_layer_params (counts take K/M/B suffixes), and the activation memory of --micro_batch x "
       "--seq_len. With LoRA on (use_peft) it adds PEFT's trainable-parameter line and the per-stage states.",
       true},
      {"consolidate",
       "CHECKPOINT --output DIR [--dtype fp32|bf16|fp16] [--max_shard_size 5GB] [--merge_adapters [--base DIR]]",
       "HF-loadable model.safetensors (+ index past the shard size) and config.json",
       "Writes a checkpoint's weights as HF safetensors, one tensor at a time. A LoRA checkpoint holds the adapter: "
       "--merge_adapters writes its base (adapter_config.json's base_model_name_or_path, or --base) with the "
       "adapter merged.",
       false},
      {"inspect", "CHECKPOINT", "what a checkpoint holds; verifies every checksum",
       "Prints a checkpoint's metadata, datasets and rank files, and verifies every checksum as a reader does.", false},
      {"plot", "RUN_DIR [--output DIR]", "PNG charts of RUN_DIR/metrics.jsonl (default: RUN_DIR/plots)",
       "Draws loss (with eval_loss), learning_rate, grad_norm, step time and tokens/s of a run's metrics.jsonl.",
       false},
      {"keys", "", "list every recipe key by group with its default and meaning",
       "Every recipe key, by group, with its default and meaning. Any key may be given on the command line as "
       "--KEY VALUE or --KEY=VALUE.",
       false},
  };
  return table;
}

// text wrapped to `width` columns, every line but the first indented by `indent` spaces; the first
// continues a line already `first_column` wide (by default `indent`).
std::string wrapped(const std::string& text, int indent, int width, int first_column = -1) {
  std::istringstream words(text);
  std::string out, word;
  int column = first_column >= 0 ? first_column : indent;
  bool first = true;
  while (words >> word) {
    const int len = static_cast<int>(word.size());
    if (!first && column + 1 + len > width) {
      out += "\n" + std::string(static_cast<std::size_t>(indent), ' ');
      column = indent;
      first = true;
    }
    if (!first) {
      out += ' ';
      ++column;
    }
    out += word;
    column += len;
    first = false;
  }
  return out;
}

std::string padded(const std::string& s, std::size_t to) { return s.size() >= to ? s + " " : s + std::string(to - s.size(), ' '); }

}  // namespace

int output_width() {
  winsize ws{};
  if (isatty(STDOUT_FILENO) && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) {
    return std::clamp(static_cast<int>(ws.ws_col), 60, 200);
  }
  return 100;
}

void print_usage(std::ostream& out) {
  out << "usage: shardft <command> [options]    (shardft <command> --help for one command)\n"
         "commands:\n";
  for (const Command& c : commands()) out << "  " << padded(c.name, 12) << c.summary << "\n";
  out << "  " << padded("--version", 12) << "version, commit and what this build runs on\n"
      << "run 'shardft keys' for the recipe keys; any key may be given on the command line.\n";
}

bool asks_for_help(const std::vector<std::string>& args) {
  return std::any_of(args.begin(), args.end(), [](const std::string& a) { return a == "--help" || a == "-h"; });
}

bool print_command_help(const std::string& command, std::ostream& out, int width) {
  const auto it = std::find_if(commands().begin(), commands().end(), [&](const Command& c) { return command == c.name; });
  if (it == commands().end()) return false;
  const std::string prefix = std::string("usage: shardft ") + it->name + " ";
  out << prefix << wrapped(it->synopsis, 4, width, static_cast<int>(prefix.size())) << "\n\n"
      << wrapped(it->details, 0, width) << "\n";
  if (it->reads_recipe) {
    out << "\nrecipe keys (" << recipe_keys().size() << "; defaults and meanings: shardft keys):\n";
    for (const std::string& group : recipe_key_groups()) {
      std::string names;
      for (const RecipeKey& k : recipe_keys()) {
        if (k.group == group) names += (names.empty() ? "" : " ") + k.name;
      }
      out << "  " << padded(group + ":", 14) << wrapped(names, 16, width) << "\n";
    }
  }
  return true;
}

void print_version(std::ostream& out) {
  out << "shardft " << SHARDFT_VERSION << " (commit " << SHARDFT_GIT_COMMIT << ")\n"
      << "build: " << build_description() << "\n"
      << "blas: " << describe_blas_core() << "\n";
}

void print_keys(std::ostream& out, int width) {
  const TrainConfig defaults;
  constexpr int kName = 30, kDefault = 22;
  for (const std::string& group : recipe_key_groups()) {
    out << group << ":\n";
    for (const RecipeKey& k : recipe_keys()) {
      if (k.group != group) continue;
      TrainConfig copy = defaults;
      std::string value = value_text(copy, k);
      if (value.empty()) value = "(empty)";
      std::string line = "  " + padded(k.name, kName) + padded(value, kDefault);
      if (static_cast<int>(line.size()) > 2 + kName + kDefault) {  // a long default gets a line of its own
        out << line << "\n";
        line = std::string(2 + kName + kDefault, ' ');
      }
      out << line << wrapped(k.doc, 2 + kName + kDefault, width) << "\n";
    }
  }
}

}  // namespace shardft::cli
