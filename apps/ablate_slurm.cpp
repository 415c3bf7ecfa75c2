#include "ablate_slurm.hpp"

#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include <ctgrad/checkpoint/atomic_file.hpp>
#include <ctgrad/data/ende/process.hpp>
#include <ctgrad/training/config.hpp>
#include <ctgrad/training/escape.hpp>

namespace ctgrad::cli::slurm {

namespace fs = std::filesystem;
using json = nlohmann::json;
using training::config_error;
using training::printable;

namespace {

bool on_path(const std::string& program) {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "");
  for (std::string d; std::getline(dirs, d, ':');)
    if (!d.empty() && ::access((fs::path(d) / program).c_str(), X_OK) == 0) return true;
  return false;
}

// A Slurm client under a deadline: an unresponsive controller makes it wait (MessageTimeout) and
// retry; a minute is past any of that. Exit 124: it did not answer.
data::ende::Ran run(const std::vector<std::string>& argv) {
  std::vector<std::string> bounded{"timeout", "-k", "5", "60"};
  bounded.insert(bounded.end(), argv.begin(), argv.end());
  auto r = data::ende::run_program(bounded);
  if (r.status == 124) r.output = argv[0] + " did not answer within 60 s (is Slurm's controller up?)";
  return r;
}

std::string tail_of(const std::string& output) {
  std::string t = data::ende::output_tail(output);
  return t.empty() ? "no output" : t;
}

// The study's array files, by number: slurm/array-K.json.
std::vector<std::pair<int, fs::path>> array_files(const fs::path& study_dir) {
  std::vector<std::pair<int, fs::path>> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(study_dir / "slurm", ec)) {
    const std::string n = e.path().filename().string();
    if (n.rfind("array-", 0) != 0 || n.size() < 12 || n.substr(n.size() - 5) != ".json") continue;
    const std::string k = n.substr(6, n.size() - 11);
    if (k.empty() || k.size() > 6 || k.find_first_not_of("0123456789") != std::string::npos) continue;
    out.emplace_back(std::stoi(k), e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

json read_array(const fs::path& file) {
  std::error_code ec;
  if (!fs::is_regular_file(file, ec) || fs::file_size(file, ec) > (std::uintmax_t(64) << 20))
    throw config_error(printable(file.string()) + " is not a regular file of ctgrad's (an array of the study's Slurm jobs)");
  std::ifstream f(file);
  const json j = json::parse(f, nullptr, false);
  if (!j.is_object() || j.value("format", "") != "ctgrad-slurm-array-1" || !j.contains("runs") || !j["runs"].is_array())
    throw config_error(printable(file.string()) + " is not an array file ctgrad wrote (damaged?): move it out of the study folder");
  for (const json& r : j["runs"]) {
    bool inside = r.is_string() && fs::path(r.get<std::string>()).is_relative();
    std::size_t n = 0;
    for (const fs::path& part : inside ? fs::path(r.get<std::string>()) : fs::path())
      inside = inside && part != ".." && part != "." && !part.empty() && (n++ > 0 || part == "runs");
    if (!inside || n != 3) throw config_error(printable(file.string()) + " names a run outside the study's runs/ folder: not a file ctgrad wrote");
  }
  return j;
}

// Every submitted array: job id -> its runs' folders (by array index), the latest last.
// Job ids in submission order: as numbers (digits only), not as text ("99" before "100").
struct ByNumber {
  bool operator()(const std::string& a, const std::string& b) const { return a.size() != b.size() ? a.size() < b.size() : a < b; }
};
std::map<std::string, std::vector<fs::path>, ByNumber> submitted(const fs::path& study_dir) {
  std::map<std::string, std::vector<fs::path>, ByNumber> out;
  for (const auto& [k, file] : array_files(study_dir)) {
    const json j = read_array(file);
    if (!j.contains("job") || !j["job"].is_string() || j["job"].get<std::string>().find_first_not_of("0123456789") != std::string::npos)
      continue;  // sbatch refused it
    std::vector<fs::path> runs;
    for (const json& r : j["runs"]) runs.push_back(study_dir / r.get<std::string>());
    out[j["job"].get<std::string>()] = std::move(runs);
  }
  return out;
}

std::string joined(const std::vector<std::string>& v, const char* sep) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : sep) + x;
  return s;
}

// A file system by Linux's magic number (statfs(2)): its name, and whether nodes share it.
struct FileSystem {
  std::string name;
  bool shared = false;
};
FileSystem file_system(long type) {
  static const struct { unsigned long magic; const char* name; bool shared; } known[] = {
      {0x6969, "NFS", true}, {0x517B, "SMB", true}, {0xFF534D42, "CIFS", true}, {0xFE534D42, "SMB2", true},
      {0x0BD00BD0, "Lustre", true}, {0x47504653, "GPFS", true}, {0x19830326, "BeeGFS", true}, {0x00C36400, "CephFS", true},
      {0x5346414F, "AFS", true}, {0x7461636F, "OCFS2", true}, {0x01161970, "GFS2", true}, {0xAAD7AAEA, "PanFS", true},
      {0x65735546, "FUSE", true},  // sshfs, GlusterFS, JuiceFS...: network file systems as a rule
      {0xEF53, "ext4", false}, {0x58465342, "XFS", false}, {0x9123683E, "Btrfs", false}, {0x01021994, "tmpfs", false},
      {0x794C7630, "overlayfs", false}, {0x2FC12FC1, "ZFS", false}, {0xF2F52010, "F2FS", false}};
  const unsigned long magic = static_cast<unsigned long>(type) & 0xffffffffUL;
  for (const auto& k : known)
    if (k.magic == magic) return {k.name, k.shared};
  char hex[32];
  std::snprintf(hex, sizeof hex, "type 0x%lx", magic);
  return {hex, false};
}

// The partition the user's sbatch arguments name (-p P, --partition=P, --partition P), else
// SBATCH_PARTITION's; "" for the default.
std::string partition_of(const std::vector<std::string>& args) {
  const char* env = std::getenv("SBATCH_PARTITION");
  std::string p = env ? env : "";
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a.rfind("--partition=", 0) == 0) p = a.substr(12);
    else if ((a == "--partition" || a == "-p") && i + 1 < args.size()) p = args[++i];
    else if (a.rfind("-p", 0) == 0 && a.size() > 2) p = a.substr(2);
  }
  return p;
}

// The nodes of a partition (its hostnames, expanded), or of the default partition.
std::vector<std::string> partition_nodes(const std::string& partition) {
  std::vector<std::string> cmd{"sinfo", "-h", "-o", "%P %N"};
  if (partition.empty()) cmd.push_back("-a");  // hidden partitions too (sinfo refuses -a beside -p)
  else cmd.insert(cmd.end(), {"-p", partition});
  const auto r = run(cmd);
  if (r.status != 0) throw config_error("--launcher slurm: sinfo failed (" + tail_of(r.output) + "): is Slurm's controller reachable from here?");
  std::string list;
  std::istringstream lines(r.output);
  for (std::string line; std::getline(lines, line);) {
    const auto sp = line.find(' ');
    if (sp == std::string::npos || sp == 0) continue;
    const std::string name = line.substr(0, sp);
    if (partition.empty() ? name.back() == '*' : true) list += (list.empty() ? "" : ",") + line.substr(sp + 1);
  }
  if (list.empty())
    throw config_error("--launcher slurm: " + (partition.empty() ? std::string("Slurm names no default partition: give one with --slurm-arg=--partition=P")
                                                                 : "Slurm knows no partition '" + printable(partition) + "' (sinfo lists none)"));
  const auto h = run({"scontrol", "show", "hostnames", list});
  if (h.status != 0) throw config_error("--launcher slurm: scontrol show hostnames failed: " + tail_of(h.output));
  std::vector<std::string> nodes;
  std::istringstream names(h.output);
  for (std::string n; names >> n;) nodes.push_back(n);
  return nodes;
}

std::string short_host() {
  char name[256] = {0};
  ::gethostname(name, sizeof name - 1);
  std::string h = name;
  return h.substr(0, h.find('.'));
}

// Whether the nodes see `path` (a folder or file of this machine), or why not.
void check_shared(const fs::path& path, const std::string& what, const Launch& launch, std::vector<std::string>& nodes, bool& nodes_read) {
  if (launch.shared_fs) return;
  fs::path at = fs::absolute(path);  // (a study folder not made yet: the folder it will be made in)
  std::error_code ec;
  while (!fs::exists(at, ec) && at.has_parent_path() && at != at.parent_path()) at = at.parent_path();
  struct statfs st {};
  if (::statfs(at.c_str(), &st) != 0) throw config_error("--launcher slurm: cannot read the file system of " + printable(path.string()));
  const FileSystem kind = file_system(st.f_type);
  if (kind.shared) return;
  if (!nodes_read) nodes = partition_nodes(partition_of(launch.sbatch_args)), nodes_read = true;
  const std::string me = short_host();
  std::vector<std::string> others;
  for (const auto& n : nodes)
    if (n.substr(0, n.find('.')) != me) others.push_back(n);
  if (others.empty()) return;  // the partition is this machine: its own disk is the nodes' disk
  std::string shown = joined(std::vector<std::string>(others.begin(), others.begin() + long(std::min<std::size_t>(others.size(), 4))), ", ");
  if (others.size() > 4) shown += " and " + std::to_string(others.size() - 4) + " more";
  throw config_error("--launcher slurm: " + what + " " + printable(path.string()) + " is on " + kind.name +
                     ", a file system of this machine (" + me + ") by its statfs type, and the partition's nodes include other machines (" +
                     printable(shown) + "): put it on a file system the nodes share (NFS, Lustre, GPFS, BeeGFS, CephFS), or add --shared-fs if they do see it");
}

// A path in sbatch's --output, where % starts a replacement (%j, %x, %A).
std::string percent_escaped(const std::string& s) {
  std::string out;
  for (char c : s) out += c == '%' ? std::string("%%") : std::string(1, c);
  return out;
}

int max_array_size() {
  const auto r = run({"scontrol", "show", "config"});
  std::istringstream lines(r.output);
  for (std::string line; std::getline(lines, line);)
    if (line.rfind("MaxArraySize", 0) == 0 && line.find('=') != std::string::npos) {
      const int n = std::atoi(line.substr(line.find('=') + 1).c_str());
      if (n > 1) return n;
    }
  return 1001;  // Slurm's default
}

}  // namespace

void check_cluster(const fs::path& study_dir, const Launch& launch) {
  for (const char* p : {"sbatch", "squeue", "sinfo", "scontrol", "timeout"})
    if (!on_path(p))
      throw config_error(std::string("--launcher slurm: ") + p + " is not on PATH: run the study from a machine of the Slurm cluster (a login node)");
  for (const std::string& a : launch.sbatch_args)
    for (const char* ours : {"--array", "-a", "--parsable", "--wrap", "--output", "-o", "--error", "-e", "--ntasks", "-n", "--cpus-per-task", "-c", "--signal",
                             "--open-mode", "--requeue", "--no-requeue", "--clusters", "-M"})
      if (a == ours || a.rfind(std::string(ours) + (std::string(ours).size() == 2 ? "" : "="), 0) == 0)
        throw config_error("--slurm-arg=" + printable(a) + ": " + (std::string(ours) == "-M" || std::string(ours) == "--clusters"
                                                                      ? std::string("a study is submitted to the cluster of this login node, which its status asks")
                                                                      : "ctgrad sets " + std::string(ours) + " itself (--cpus-per-run, --ranks-per-run and --jobs set the resources and the throttle)"));
  if (fs::absolute(study_dir).string().find('\\') != std::string::npos)  // (sbatch's --output would read it as an escape)
    throw config_error("--launcher slurm: the study folder's path " + printable(fs::absolute(study_dir).string()) + " holds a backslash: choose another --run");
  std::vector<std::string> nodes;
  bool read = false;
  check_shared(study_dir, "the study folder", launch, nodes, read);
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) check_shared(exe, "this program", launch, nodes, read);
  check_shared(fs::current_path(ec), "the working folder (the tasks start in it; relative paths in --set are read from it)", launch, nodes, read);
}

std::map<fs::path, Queued> queued(const fs::path& study_dir) {
  std::map<fs::path, Queued> out;
  const auto jobs = submitted(study_dir);
  if (jobs.empty()) return out;
  if (!on_path("squeue") || !on_path("timeout"))
    throw config_error("cannot tell whether Slurm still runs the study's runs (job " + jobs.rbegin()->first +
                       "): squeue is not on PATH here; ask from a machine of the cluster (or remove " + printable((study_dir / "slurm").string()) +
                       " once its jobs have ended)");
  for (const auto& [job, runs] : jobs) {
    // One call per array: squeue refuses a list in which one job has left its memory (MinJobAge).
    const auto r = run({"squeue", "-h", "-r", "-j", job, "-o", "%K|%T|%r"});
    if (r.status != 0) {
      if (r.output.find("Invalid job id") != std::string::npos) continue;  // ended long ago
      throw config_error("cannot ask Slurm about the study's job " + job + ": squeue: " + tail_of(r.output));
    }
    std::istringstream lines(r.output);
    for (std::string line; std::getline(lines, line);) {
      const auto a = line.find('|'), b = line.find('|', a + 1);
      if (a == std::string::npos || b == std::string::npos) continue;
      const std::string task = line.substr(0, a);
      if (task.empty() || task.find_first_not_of("0123456789") != std::string::npos) continue;
      const std::size_t i = std::stoul(task);
      if (i >= runs.size()) continue;
      out[runs[i]] = Queued{job + "_" + task, line.substr(a + 1, b - a - 1), line.substr(b + 1)};
    }
  }
  return out;
}

std::map<fs::path, std::string> accounting(const fs::path& study_dir) {
  std::map<fs::path, std::string> out;
  const auto jobs = submitted(study_dir);
  if (jobs.empty() || !on_path("sacct")) return out;
  std::vector<std::string> ids;
  for (const auto& [job, runs] : jobs) ids.push_back(job);
  const auto r = run({"sacct", "-n", "-P", "-X", "-j", joined(ids, ","), "-o", "JobID,State"});
  if (r.status != 0) return out;  // accounting disabled ("Slurm accounting storage is disabled")
  std::istringstream lines(r.output);
  for (std::string line; std::getline(lines, line);) {
    const auto bar = line.find('|'), under = line.find('_');
    if (bar == std::string::npos || under == std::string::npos || under > bar) continue;
    const std::string job = line.substr(0, under), task = line.substr(under + 1, bar - under - 1);
    const auto it = jobs.find(job);
    if (it == jobs.end() || task.empty() || task.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::size_t i = std::stoul(task);
    if (i < it->second.size()) out[it->second[i]] = line.substr(bar + 1);  // the last record wins (a requeued task's)
  }
  return out;
}

std::map<fs::path, std::string> last_tasks(const fs::path& study_dir) {
  std::map<fs::path, std::string> out;
  for (const auto& [job, runs] : submitted(study_dir))  // (the latest array last: it wins)
    for (std::size_t i = 0; i < runs.size(); ++i) out[runs[i]] = job + "_" + std::to_string(i);
  return out;
}

bool held(const Queued& q) {
  return q.state == "REQUEUE_HOLD" || q.state == "SPECIAL_EXIT" || q.reason.find("Held") != std::string::npos ||
         q.reason.find("held") != std::string::npos;
}

std::vector<std::string> submit(const ab::Study& study, const std::vector<const ab::RunSpec*>& todo, const Launch& launch) {
  const fs::path dir = fs::absolute(study.options().dir);
  std::error_code ec;
  fs::create_directories(dir / "slurm" / "logs", ec);
  if (ec) throw config_error("cannot make " + printable((dir / "slurm" / "logs").string()) + ": " + ec.message());
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) throw config_error("cannot find this program's file (/proc/self/exe): " + ec.message());
  const auto files = array_files(dir);
  int k = files.empty() ? 0 : files.back().first;
  const std::size_t chunk = std::size_t(max_array_size());
  std::vector<std::string> jobs;
  for (std::size_t from = 0; from < todo.size(); from += chunk) {
    const std::size_t n = std::min(chunk, todo.size() - from);
    ++k;
    const fs::path file = dir / "slurm" / ("array-" + std::to_string(k) + ".json");
    const fs::path script = dir / "slurm" / ("array-" + std::to_string(k) + ".sh");
    json runs = json::array();
    for (std::size_t i = from; i < from + n; ++i) runs.push_back(todo[i]->dir.lexically_relative(study.options().dir).generic_string());
    json j{{"format", "ctgrad-slurm-array-1"}, {"seeds", study.options().seeds}, {"cpus", launch.cpus}, {"ranks", launch.ranks}, {"runs", runs}};
    checkpoint::write_atomically(file, j.dump(2, ' ', false, json::error_handler_t::replace) + "\n");
    checkpoint::write_atomically(script, "#!/bin/sh\n# A task of the study's job array (ctgrad ablate --launcher slurm): the run at index $SLURM_ARRAY_TASK_ID of " +
                                             file.filename().string() + "'s runs.\nexec " + training::shell_quote(exe.string()) +
                                             " ablate --slurm-task " + training::shell_quote(file.string()) + "\n");
    std::vector<std::string> cmd{"sbatch", "--parsable", "--job-name=ctgrad-ablate",
                                 "--array=0-" + std::to_string(n - 1) + (launch.throttle > 0 ? "%" + std::to_string(launch.throttle) : ""),
                                 "--requeue", "--signal=B:USR1@120", "--open-mode=append",
                                 "--output=" + percent_escaped((dir / "slurm" / "logs").string()) + "/%A_%a.log",
                                 "--ntasks=" + std::to_string(launch.ranks), "--cpus-per-task=" + std::to_string(launch.cpus)};
    cmd.insert(cmd.end(), launch.sbatch_args.begin(), launch.sbatch_args.end());
    cmd.push_back(script.string());
    const auto r = run(cmd);
    std::string id;
    std::istringstream lines(r.output);
    for (std::string line; std::getline(lines, line);) {
      const std::string head = line.substr(0, line.find(';'));
      if (!head.empty() && head.find_first_not_of("0123456789") == std::string::npos) id = head;
    }
    if (r.status != 0 || id.empty()) {  // the file stays, marked, so that its number is never another array's
      j["refused"] = tail_of(r.output);
      checkpoint::write_atomically(file, j.dump(2, ' ', false, json::error_handler_t::replace) + "\n");
      throw config_error("sbatch refused the study's array (" + tail_of(r.output) + ")" +
                         (jobs.empty() ? "" : "; jobs " + joined(jobs, ", ") + " were submitted before it"));
    }
    j["job"] = id;
    j["sbatch"] = cmd;
    checkpoint::write_atomically(file, j.dump(2, ' ', false, json::error_handler_t::replace) + "\n");
    jobs.push_back(id);
  }
  return jobs;
}

Task task_of(const fs::path& array_file) {
  const fs::path file = fs::absolute(array_file);
  const json j = read_array(file);
  const char* id = std::getenv("SLURM_ARRAY_TASK_ID");
  if (!id || !*id || std::string(id).find_first_not_of("0123456789") != std::string::npos)
    throw config_error("--slurm-task runs as a task of the study's Slurm job array (SLURM_ARRAY_TASK_ID is not set): ctgrad ablate --launcher slurm submits it");
  const char* job = std::getenv("SLURM_ARRAY_JOB_ID");
  if (j.contains("job") && job && j["job"] != job)  // a job the study lost track of (its array file was not written): not this file's
    throw config_error("array job " + std::string(job) + " is not the job of " + printable(file.string()) + " (" + printable(j["job"].dump()) + "): nothing to run");
  const std::size_t i = std::stoul(id);
  if (i >= j["runs"].size())
    throw config_error("array task " + std::string(id) + " of " + printable(file.string()) + ", which lists " + std::to_string(j["runs"].size()) + " runs");
  Task t;
  t.study_dir = file.parent_path().parent_path();
  t.run_dir = t.study_dir / j["runs"][i].get<std::string>();
  auto positive = [&](const char* key) {
    if (!j.contains(key) || !j[key].is_number_integer() || j[key].get<int>() < 1)
      throw config_error(printable(file.string()) + ": '" + key + "' is not a positive count");
    return j[key].get<int>();
  };
  t.seeds = positive("seeds"), t.cpus = positive("cpus"), t.ranks = positive("ranks");
  return t;
}

int seeds_of(const fs::path& study_dir) {
  int seeds = 1;
  for (const auto& [k, file] : array_files(study_dir)) {
    const json j = read_array(file);
    if (j.contains("seeds") && j["seeds"].is_number_integer()) seeds = std::max(seeds, j["seeds"].get<int>());
  }
  std::error_code ec;
  for (const auto& config : fs::directory_iterator(study_dir / "runs", ec))
    for (const auto& run : fs::directory_iterator(config.path(), ec)) {
      const std::string n = run.path().filename().string();
      if (n.rfind("seed", 0) == 0 && n.size() > 4 && n.size() < 8 && n.find_first_not_of("0123456789", 4) == std::string::npos)
        seeds = std::max(seeds, std::stoi(n.substr(4)));
    }
  return seeds;
}

std::string requeue_self() {
  const char* job = std::getenv("SLURM_ARRAY_JOB_ID");
  const char* task = std::getenv("SLURM_ARRAY_TASK_ID");
  if (!job || !task) return "not an array task";
  const std::string me = std::string(job) + "_" + task;
  const auto r = run({"scontrol", "requeue", me});
  if (r.status == 0) return "";
  // The requeue's own SIGTERM may end scontrol before it reads the answer: ask the queue.
  const auto q = run({"squeue", "-h", "-j", me, "-o", "%T"});
  return q.output.find("PENDING") != std::string::npos || q.output.find("REQUEUE") != std::string::npos ? "" : "scontrol requeue: " + tail_of(r.output);
}

}  // namespace ctgrad::cli::slurm
