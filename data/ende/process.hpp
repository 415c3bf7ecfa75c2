// Running the Debian tools the EN-DE corpus builder needs (apt-get, dpkg-deb, tar) without a
// shell: the arguments go to the program as they are, so a package or file name is never parsed
// as shell syntax.
#pragma once
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace ctgrad::data::ende {

struct Ran {
  int status = 0;      // the exit code (128 + the signal when killed)
  std::string output;  // standard output and error, together
};

// What stops the children: `stop` is asked every 200 ms while a program runs (the command sets
// training::interrupted); when it says yes the programs get SIGTERM (SIGKILL a second later), are
// waited for, and the call throws data_error("interrupted"). A Ctrl-C at a terminal reaches the
// children too; one sent to ctgrad alone (kill -INT) stops them here.
void set_stop_check(bool (*stop)());
// Throws data_error("interrupted") when the stop check says so (between steps of the work).
void throw_if_stopped();

// argv[0] is looked up on PATH; `cwd` (empty: this one) is the child's working folder. Throws
// data_error when the program cannot be started; its exit status is the caller's to judge.
// With a `sink`, standard output goes to it as it comes (Ran::output keeps only its last 4 KB and
// standard error, for messages): an index of hundreds of megabytes is read, never held.
using Sink = std::function<void(std::string_view)>;
Ran run_program(const std::vector<std::string>& argv, const std::filesystem::path& cwd = {}, const Sink& sink = {});

// first | second: the first's standard output is the second's input; the status is the first
// failure's (the first program's when both fail), the output both programs' standard error and the
// second's standard output.
Ran run_pipeline(const std::vector<std::string>& first, const std::vector<std::string>& second, const std::filesystem::path& cwd = {});

// As run_program, and a non-zero exit is a data_error naming `what`, the status and the end of the
// output, on one line.
std::string run_checked(const std::vector<std::string>& argv, const std::string& what, const std::filesystem::path& cwd = {});

// The last 200 characters of a program's output on one line (for an error message).
std::string output_tail(const std::string& output);

// A regular file's bytes as text, at most `limit` bytes (checkpoint::read_regular_file: a FIFO,
// a folder or a larger file is an error starting with "ctgrad: <what>").
std::string read_text_file(const std::filesystem::path& p, const std::string& what, std::size_t limit);

}  // namespace ctgrad::data::ende
