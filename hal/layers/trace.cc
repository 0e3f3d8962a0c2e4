// The "trace" layer: every call with its arguments, status and duration, as
// Chrome trace / Perfetto JSON ({"traceEvents": [complete events]}) written
// to $HAL_TRACE (or option path; "%p" becomes the process id). Calls are
// kept as small records and written as JSON by a writer thread, so a traced
// call costs two clock reads and an append.
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <thread>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <map>
#include <memory>
#include <set>

#include "hal/common/status_code.hpp"
#include "hal/runtime/error.hpp"
#include "layers/builtin.hpp"

namespace hal::detail {
namespace {

uint64_t now_ns() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

uint32_t thread_id() {
  thread_local const uint32_t tid = static_cast<uint32_t>(::syscall(SYS_gettid));
  return tid;
}

struct Record {
  const char* name;  // the entry's (static in libhal)
  uint32_t entry, plugin, tid, status;
  uint64_t start_ns, duration_ns;
  uint64_t a[3];
};

class TraceSink;
std::mutex g_live_mutex;
std::set<TraceSink*> g_live;  // finished at exit if still alive
void finish_live_at_exit();

// One trace file and what is to be written to it; shared by the trace
// layers of every runtime in the process that name the same file.
class TraceSink {
 public:
  TraceSink(std::string path, const std::string& source) : path_(std::move(path)) {
    file_ = std::fopen(path_.c_str(), "w");
    if (file_ == nullptr)
      throw Error(HAL_STATUS_INVALID_ARGUMENT,
                  source + " = '" + path_ + "': cannot write the trace file: " + std::strerror(errno));
    std::fputs("{\"displayTimeUnit\": \"ns\", \"traceEvents\": [\n", file_);
    origin_ns_ = now_ns();
    static const bool registered = [] { return std::atexit(finish_live_at_exit) == 0; }();
    (void)registered;
    std::lock_guard<std::mutex> lock(g_live_mutex);
    g_live.insert(this);
    writer_ = std::thread([this] { write_batches(); });
  }
  ~TraceSink() {
    {
      std::lock_guard<std::mutex> lock(g_live_mutex);
      g_live.erase(this);
    }
    finish();
  }

  void add(const hal_layer_call_t& call, uint64_t t0, hal_status_t* status) {
    const uint64_t t1 = now_ns();
    if (status == nullptr) names_.learn(call);
    Record r{call.name, call.entry, 0, thread_id(), status != nullptr ? status->code : 0u, t0, t1 - t0, {0, 0, 0}};
    summarize(call, r.a);
    std::unique_lock<std::mutex> lock(mutex_);
    r.plugin = plugin_index(call.plugin);
    records_.push_back(r);
    if (records_.size() < kBatch) return;
    // A full batch goes to the writer thread; a writer far behind makes the
    // callers wait (memory stays bounded).
    pending_.push_back(std::move(records_));
    records_ = {};
    records_.reserve(kBatch);
    ready_.notify_all();
    ready_.wait(lock, [&] { return pending_.size() <= kMaxPending || stopping_; });
  }

  // Writes what is left and closes the JSON. Idempotent.
  void finish() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (stopping_) return;
      stopping_ = true;
      ready_.notify_all();
    }
    if (writer_.joinable()) writer_.join();
    std::vector<Record> rest;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (auto& batch : pending_) rest.insert(rest.end(), batch.begin(), batch.end());
      pending_.clear();
      rest.insert(rest.end(), records_.begin(), records_.end());
      records_.clear();
    }
    std::lock_guard<std::mutex> lock(file_mutex_);
    if (file_ == nullptr) return;
    write_locked(rest);
    std::fputs("\n]}\n", file_);
    std::fclose(file_);
    file_ = nullptr;
  }

 private:
  // A traced call pays two clock reads and an append: batches of this many
  // records are turned into JSON by a writer thread, the rest when the
  // runtime goes or the process exits. At most kMaxPending batches (256 MiB)
  // wait for the writer.
  static constexpr size_t kBatch = 1 << 16;
  static constexpr size_t kMaxPending = 64;

  void write_batches() {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      ready_.wait(lock, [&] { return !pending_.empty() || stopping_; });
      if (pending_.empty()) return;  // stopping: finish() writes the rest
      std::vector<Record> batch = std::move(pending_.front());
      pending_.pop_front();
      ready_.notify_all();
      lock.unlock();
      write(batch);
      lock.lock();
    }
  }

  uint32_t plugin_index(const char* name) {
    for (size_t i = 0; i < plugins_.size(); ++i)
      if (plugins_[i] == name) return static_cast<uint32_t>(i);
    plugins_.emplace_back(name);
    return static_cast<uint32_t>(plugins_.size() - 1);
  }

  // Up to three numbers worth showing per entry (decoded in write).
  static void summarize(const hal_layer_call_t& c, uint64_t a[3]) {
    auto ptr = [&](uint32_t i) { return reinterpret_cast<uintptr_t>(arg<void*>(c, i)); };
    switch (c.entry) {
      case HAL_LAYER_ENTRY_BUFFER_ALLOCATE: {
        a[0] = arg<uint64_t>(c, 1);
        hal_buffer_t* const* out = arg<hal_buffer_t**>(c, 3);
        a[1] = out != nullptr ? reinterpret_cast<uintptr_t>(*out) : 0;
        break;
      }
      case HAL_LAYER_ENTRY_COPY_HOST_TO_DEVICE:
      case HAL_LAYER_ENTRY_COPY_DEVICE_TO_HOST:
        a[0] = arg<uint64_t>(c, 3), a[1] = ptr(4);
        break;
      case HAL_LAYER_ENTRY_COPY_DEVICE_TO_DEVICE:
        a[0] = arg<uint64_t>(c, 4), a[1] = ptr(5);
        break;
      case HAL_LAYER_ENTRY_BUFFER_FILL:
        a[0] = arg<uint64_t>(c, 2), a[1] = ptr(4);
        break;
      case HAL_LAYER_ENTRY_OP_LAUNCH: {
        const hal_op_args_t* op = arg<const hal_op_args_t*>(c, 1);
        a[0] = op != nullptr ? op->op : 0, a[1] = ptr(2), a[2] = op != nullptr ? op->input_count : 0;
        break;
      }
      case HAL_LAYER_ENTRY_EXECUTABLE_EXECUTE:
        a[0] = ptr(0), a[1] = ptr(5), a[2] = arg<size_t>(c, 2);
        break;
      default:
        a[0] = c.arg_count > 0 ? ptr(0) : 0;
    }
  }

  void write(const std::vector<Record>& records) {
    std::lock_guard<std::mutex> lock(file_mutex_);
    if (file_ != nullptr) write_locked(records);
  }

  static std::string hex(uint64_t v) {
    char buf[24];
    std::snprintf(buf, sizeof(buf), "0x%llx", static_cast<unsigned long long>(v));
    return buf;
  }

  // One event object per kind of arguments, filled in place per record
  // (building a fresh nlohmann::json per event costs several microseconds).
  struct EventTemplate {
    nlohmann::json event;
    std::string *name, *plugin, *status, *text1 = nullptr, *text2 = nullptr, *op = nullptr;
    double *ts, *dur;
    uint64_t *tid, *count1 = nullptr, *count2 = nullptr;
    // ARGS: (key, kind) with kind 's' (text1, text2), 'n' (count1, count2), 'o' (op).
    EventTemplate(int pid, std::initializer_list<std::pair<const char*, char>> args) {
      event = {{"name", ""}, {"cat", "hal"}, {"ph", "X"}, {"ts", 0.0}, {"dur", 0.0},
               {"pid", pid}, {"tid", uint64_t{0}}, {"args", {{"plugin", ""}, {"status", ""}}}};
      name = &event["name"].get_ref<std::string&>();
      ts = &event["ts"].get_ref<double&>();
      dur = &event["dur"].get_ref<double&>();
      tid = &event["tid"].get_ref<nlohmann::json::number_unsigned_t&>();
      nlohmann::json& a = event["args"];
      plugin = &a["plugin"].get_ref<std::string&>();
      status = &a["status"].get_ref<std::string&>();
      for (const auto& [key, kind] : args) {
        if (kind == 'n') {
          a[key] = uint64_t{0};
          (count1 == nullptr ? count1 : count2) = &a[key].get_ref<nlohmann::json::number_unsigned_t&>();
        } else {
          a[key] = "";
          (kind == 'o' ? op : text1 == nullptr ? text1 : text2) = &a[key].get_ref<std::string&>();
        }
      }
    }
  };

  void write_locked(const std::vector<Record>& records) {
    std::vector<std::string> plugins;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      plugins = plugins_;
    }
    const int pid = static_cast<int>(::getpid());
    EventTemplate alloc(pid, {{"bytes", 'n'}, {"buffer", 's'}}), copy(pid, {{"bytes", 'n'}, {"stream", 's'}}),
        launch(pid, {{"op", 'o'}, {"stream", 's'}, {"inputs", 'n'}}),
        execute(pid, {{"stream", 's'}, {"executable", 's'}, {"inputs", 'n'}}), other(pid, {{"handle", 's'}});
    std::map<std::pair<uint32_t, uint64_t>, std::string> ops;  // (plugin, op id) -> name
    std::string text;
    for (const Record& r : records) {
      const std::string& plugin = r.plugin < plugins.size() ? plugins[r.plugin] : plugins.front();
      EventTemplate* t = &other;
      switch (r.entry) {
        case HAL_LAYER_ENTRY_BUFFER_ALLOCATE:
          t = &alloc;
          *t->count1 = r.a[0], *t->text1 = hex(r.a[1]);
          break;
        case HAL_LAYER_ENTRY_COPY_HOST_TO_DEVICE:
        case HAL_LAYER_ENTRY_COPY_DEVICE_TO_HOST:
        case HAL_LAYER_ENTRY_COPY_DEVICE_TO_DEVICE:
        case HAL_LAYER_ENTRY_BUFFER_FILL:
          t = &copy;
          *t->count1 = r.a[0], *t->text1 = hex(r.a[1]);
          break;
        case HAL_LAYER_ENTRY_OP_LAUNCH: {
          t = &launch;
          std::string& op = ops[{r.plugin, r.a[0]}];
          if (op.empty()) op = names_.op(plugin.c_str(), static_cast<uint32_t>(r.a[0]));
          *t->op = op, *t->text1 = hex(r.a[1]), *t->count1 = r.a[2];
          break;
        }
        case HAL_LAYER_ENTRY_EXECUTABLE_EXECUTE:
          t = &execute;
          *t->text2 = hex(r.a[0]), *t->text1 = hex(r.a[1]), *t->count1 = r.a[2];
          break;
        default:
          *t->text1 = hex(r.a[0]);
      }
      *t->name = r.name;
      if (t->op != nullptr) *t->name += " " + *t->op;
      *t->plugin = plugin;
      *t->status = common::status_code_name(r.status);
      *t->ts = static_cast<double>(r.start_ns - origin_ns_) / 1e3;
      *t->dur = static_cast<double>(r.duration_ns) / 1e3;
      *t->tid = r.tid;
      text = t->event.dump();
      std::fputs(first_ ? "" : ",\n", file_);
      first_ = false;
      std::fwrite(text.data(), 1, text.size(), file_);
    }
    std::fflush(file_);
  }

  std::string path_;
  std::FILE* file_ = nullptr;
  bool first_ = true;
  uint64_t origin_ns_ = 0;
  CallNames names_;
  std::mutex mutex_;  // records_, pending_, stopping_, plugins_
  std::condition_variable ready_;
  std::mutex file_mutex_;  // file_, first_
  std::vector<Record> records_;
  std::deque<std::vector<Record>> pending_;
  bool stopping_ = false;
  std::thread writer_;
  std::vector<std::string> plugins_;
};

void finish_live_at_exit() {
  std::lock_guard<std::mutex> lock(g_live_mutex);
  for (TraceSink* t : g_live) t->finish();
}

class TraceLayer final : public BuiltinLayer {
 public:
  explicit TraceLayer(const hal_layer_create_args_t& args) {
    LayerOptionMap options("trace", args, {"path"});
    std::string source;
    std::string path = options.get("path", "HAL_TRACE", "", &source);
    if (path.empty())
      throw Error(HAL_STATUS_INVALID_ARGUMENT,
                  "no output file: set HAL_TRACE=<file> or path in [layer_options.trace]");
    for (size_t at; (at = path.find("%p")) != std::string::npos;) path.replace(at, 2, std::to_string(::getpid()));
    static std::mutex mutex;
    static std::map<std::string, std::weak_ptr<TraceSink>> sinks;
    std::lock_guard<std::mutex> lock(mutex);
    sink_ = sinks[path].lock();
    if (!sink_) sinks[path] = sink_ = std::make_shared<TraceSink>(path, source);
  }

  hal_status_t* begin(const hal_layer_call_t&, void** cookie) override {
    *cookie = reinterpret_cast<void*>(static_cast<uintptr_t>(now_ns()));
    return nullptr;
  }

  hal_status_t* end(const hal_layer_call_t& call, void* cookie, hal_status_t* status) override {
    sink_->add(call, static_cast<uint64_t>(reinterpret_cast<uintptr_t>(cookie)), status);
    return status;
  }

 private:
  std::shared_ptr<TraceSink> sink_;
};

}  // namespace

const hal_layer_api_t* trace_layer_api() {
  return builtin_api<TraceLayer>("trace", "every call with arguments, status and duration to a Chrome/Perfetto "
                                          "trace ($HAL_TRACE)");
}

}  // namespace hal::detail
