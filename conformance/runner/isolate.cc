// hal-conformance --isolate: each test's fate in a child process. The parent
// hands a child the names of the tests still to run; the child appends
// "start\t<name>" and "end\t<result JSON>" lines to a progress file as it
// goes (session.cc). When a child dies of a signal, the test it had started
// is CRASHED; when a test runs past the timeout, the parent kills the child
// and the test is TIMED OUT; then a new child runs the rest.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "runner/session.hpp"

extern char** environ;

namespace hal::conformance {
namespace {

namespace fs = std::filesystem;

std::string signal_text(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return "signal " + std::to_string(sig) + (abbrev != nullptr ? std::string(" (SIG") + abbrev + ")" : "");
}

// Starts this binary (/proc/self/exe: argv[0] may have come from $PATH) as ARGS.
pid_t spawn(const std::vector<std::string>& args, const std::string& log) {
  const std::string self = fs::read_symlink("/proc/self/exe").string();
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  // The child's own output (its progress and summary lines) goes to a log:
  // the parent prints the results.
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, self.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) throw std::runtime_error("cannot start " + self + ": " + std::strerror(rc));
  return pid;
}

}  // namespace

int Session::run_isolated(const std::vector<std::string>& child_command, double timeout_s) {
  const fs::path dir = fs::temp_directory_path() / ("hal-conformance-isolate-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::map<std::string, size_t> index;
  std::vector<std::string> remaining;
  for (size_t i = 0; i < tests_.size(); ++i) {
    index[tests_[i].name] = i;
    if (tests_[i].skip_reason.empty())
      remaining.push_back(tests_[i].name);
    else
      tests_[i].status = Status::kSkipped;
  }
  auto report = [&](const TestEntry& e) {
    const char* what = e.status == Status::kCrashed    ? "CRASHED"
                       : e.status == Status::kTimedOut ? "TIMED OUT"
                       : e.status == Status::kFailed   ? "FAILED"
                       : e.status == Status::kUnexpectedPass ? "UNEXPECTED PASS"
                                                             : nullptr;
    if (what == nullptr) return;
    std::printf("  %s %s: %s\n", what, e.name.c_str(), e.messages.empty() ? "" : e.messages.front().c_str());
    std::fflush(stdout);
  };
  int children = 0;
  while (!remaining.empty()) {
    const std::string list = (dir / ("tests." + std::to_string(children))).string();
    const std::string progress = (dir / ("progress." + std::to_string(children))).string();
    {
      std::ofstream out(list);
      for (const std::string& n : remaining) out << n << "\n";
    }
    std::vector<std::string> args = child_command;
    args.insert(args.end(), {"--isolate-tests", list, "--isolate-child", progress, "--timeout", "0"});
    const pid_t pid = spawn(args, (dir / "children.log").string());
    ++children;
    std::ifstream in;
    std::string partial, current, last_ended, last_case;
    bool progressed = false;  // this child started a test
    auto started = std::chrono::steady_clock::now();
    bool timed_out = false;
    int wstatus = 0;
    auto read_progress = [&] {
      if (!in.is_open()) in.open(progress);
      if (!in.is_open()) return;
      in.clear();
      std::string chunk((std::istreambuf_iterator<char>(in)), {});
      partial += chunk;
      for (size_t nl; (nl = partial.find('\n')) != std::string::npos; partial.erase(0, nl + 1)) {
        const std::string line = partial.substr(0, nl);
        if (line.rfind("start\t", 0) == 0) {
          current = line.substr(6);
          last_case.clear();
          progressed = true;
        } else if (line.rfind("case\t", 0) == 0) {
          last_case = line.substr(5);
          started = std::chrono::steady_clock::now();
        } else if (line.rfind("end\t", 0) == 0) {
          const nlohmann::json r = nlohmann::json::parse(line.substr(4));
          auto it = index.find(r.at("name").get<std::string>());
          if (it == index.end()) continue;
          record(it->second, static_cast<Status>(r.at("status").get<int>()), r.at("seconds").get<double>(),
                 r.at("messages").get<std::vector<std::string>>());
          TestEntry& e = tests_[it->second];
          // doctest caught a signal in it (and the child dies of it next).
          for (std::string& m : e.messages)
            if (e.status == Status::kFailed && m.rfind("crashed: ", 0) == 0) {
              e.status = Status::kCrashed;
              if (!last_case.empty()) m.insert(m.find(" -- rerun: ") == std::string::npos ? m.size() : m.find(" -- rerun: "), " (in case '" + last_case + "')");
            }
          report(e);
          remaining.erase(std::remove(remaining.begin(), remaining.end(), it->first), remaining.end());
          last_ended = it->first;
          current.clear();
        }
      }
    };
    for (;;) {
      const pid_t done = ::waitpid(pid, &wstatus, WNOHANG);
      read_progress();
      if (done == pid) break;
      if (!current.empty() && timeout_s > 0 &&
          std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count() > timeout_s) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, &wstatus, 0);
        timed_out = true;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    read_progress();
    if (!current.empty()) {  // the child died (or was killed) inside CURRENT
      const size_t i = index.at(current);
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
      std::string why;
      Status st;
      if (timed_out) {
        st = Status::kTimedOut;
        why = "timed out after " + std::to_string(static_cast<int>(timeout_s)) + " s (the plugin hangs?); its process was killed";
      } else {
        st = Status::kCrashed;
        why = WIFSIGNALED(wstatus) ? "crashed: " + signal_text(WTERMSIG(wstatus)) + " in this test's process"
                                   : "its process exited (status " + std::to_string(WEXITSTATUS(wstatus)) +
                                         ") while running it";
      }
      if (!last_case.empty()) why += " (in case '" + last_case + "')";
      record(i, st, seconds, {why + " -- rerun: " + rerun_command(tests_[i]) +
                                  (last_case.empty() ? "" : " --case " + shell_quote(last_case))});
      report(tests_[i]);
      remaining.erase(std::remove(remaining.begin(), remaining.end(), current), remaining.end());
    } else if (WIFSIGNALED(wstatus) && !last_ended.empty()) {
      // doctest caught the signal, reported the test (crashed: ...) and the
      // process then died of it: that test crashed.
      TestEntry& e = tests_[index.at(last_ended)];
      if (e.status == Status::kFailed) e.status = Status::kCrashed;
    }
    if (!remaining.empty() && !progressed) {
      // The child ended without starting a test: it cannot start (say why
      // once), and another would not either.
      std::string why = WIFSIGNALED(wstatus) ? signal_text(WTERMSIG(wstatus))
                                             : "exit status " + std::to_string(WEXITSTATUS(wstatus));
      for (const std::string& n : remaining)
        record(index.at(n), Status::kFailed, 0,
               {"not run: the isolated child process ended before it (" + why + "; its output: " +
                (dir / "children.log").string() + ")"});
      std::printf("hal-conformance: a child process ended (%s) before running %zu tests (see %s)\n", why.c_str(),
                  remaining.size(), (dir / "children.log").string().c_str());
      return failed();  // the log is kept for the user
    }
  }
  std::printf("isolated: %d child processes; %d crashed, %d timed out\n", children, count(Status::kCrashed),
              count(Status::kTimedOut));
  std::error_code ec;
  fs::remove_all(dir, ec);
  return failed();
}

}  // namespace hal::conformance
