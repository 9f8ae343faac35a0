#pragma once
// What shardft says about itself: `shardft --help` (the commands), `shardft <command> --help` (its
// synopsis, what it does, its options, and for the commands that read a recipe every recipe key by
// group), `shardft --version` (version, commit, what the build has) and `shardft keys` (every recipe
// key by group with its default and meaning, wrapped to the terminal).
#include <ostream>
#include <string>
#include <vector>

namespace shardft::cli {

// Columns of the terminal stdout is, else 100 (a pipe or a file); never below 60.
int output_width();

void print_usage(std::ostream& out);
// True where some argument asks for help (--help, -h).
bool asks_for_help(const std::vector<std::string>& args);
// `command`'s help; false when there is no such command.
bool print_command_help(const std::string& command, std::ostream& out, int width);
void print_version(std::ostream& out);
void print_keys(std::ostream& out, int width);

}  // namespace shardft::cli
