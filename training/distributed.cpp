#include <ctgrad/training/config.hpp>
#include <ctgrad/training/distributed.hpp>
#include <ctgrad/training/trainer.hpp>

#include <cstdio>
#include <cstdlib>
#include <vector>

namespace ctgrad::training {

void Solo::abort(const std::string& message, int code) {
  std::fprintf(stderr, "ctgrad: %s\n", message.c_str());
  std::exit(code);
}

void require_same(Communicator& comm, const std::string& what, const std::string& value,
                  const std::function<std::string(const std::string&, const std::string&)>& explain) {
  if (comm.size() == 1) return;
  std::string root = value;
  comm.broadcast(root, 0, what.c_str());
  // Each rank marks itself when it differs: every rank learns which ones do.
  std::vector<double> differs(std::size_t(comm.size()), 0.0);
  differs[std::size_t(comm.rank())] = root == value ? 0.0 : 1.0;
  comm.allreduce_sum(differs, what.c_str());
  std::string ranks;
  for (std::size_t r = 0; r < differs.size(); ++r)
    if (differs[r] != 0) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
  if (ranks.empty()) return;
  const bool one = ranks.find(',') == std::string::npos;
  std::string how;
  if (root != value && explain) how = " (rank 0 has " + explain(root, value) + ")";
  throw config_error("the ranks of this job differ in " + what + ": rank" + (one ? " " : "s ") + ranks + (one ? " differs" : " differ") +
                     " from rank 0" + how + "; every rank must run the same build with the same config and data");
}

bool any_interrupted(Communicator& comm) {
  if (comm.size() == 1) return interrupted();
  double any[1] = {interrupted() ? 1.0 : 0.0};
  comm.allreduce_sum(any, "the interrupt flag");
  if (any[0] > 0) set_interrupted();
  return any[0] > 0;
}

}  // namespace ctgrad::training
