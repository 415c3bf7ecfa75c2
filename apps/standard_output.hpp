// Standard output as a stream whose reader may stop reading (`ctgrad translate ... | head -1`):
// SIGPIPE is caught, not ignored (a child process starts with the default), so a write to a pipe
// nobody reads fails with EPIPE; that is a normal end of the command, with nothing written after it.
// Any other failed write (a full disk, a closed descriptor) is an error that says why.
#pragma once
#include <string_view>

namespace ctgrad::cli {

void catch_broken_pipe();  // in main, once
// Whether standard output's reader is gone: a write failed with EPIPE, or it is a pipe or socket
// whose other end is closed.
bool stdout_reader_gone();
// Writes `text` and flushes it: false when the reader is gone (stop writing); a failure for any
// other reason throws std::runtime_error("cannot write standard output: <reason>").
bool write_stdout(std::string_view text);

}  // namespace ctgrad::cli
