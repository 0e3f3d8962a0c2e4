// The "trace" layer: every call with its arguments, status and duration, as
// Chrome trace / Perfetto JSON ({"traceEvents": [complete events]}) written
// to $HAL_TRACE (or option path; "%p" becomes the process id). Calls are
// kept as small records and written as JSON by a writer thread, so a traced
// call costs two clock reads and an append.
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <unordered_map>
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
    if (!spare_.empty()) {  // a written batch's memory, pages already faulted in
      records_ = std::move(spare_.back());
      spare_.pop_back();
    }
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
      batch.clear();
      lock.lock();
      if (spare_.size() < 2) spare_.push_back(std::move(batch));
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

  // The event text is assembled from pieces JSON-escaped once by nlohmann
  // (names, plugins, ops, statuses: cached) and numbers: a nlohmann::json
  // dump per event costs more than the call it traces, and a writer slower
  // than the callers makes them wait.
  static std::string escaped(const std::string& text) {
    std::string q = nlohmann::json(text).dump();
    return q.substr(1, q.size() - 2);
  }
  static void number(std::string& out, uint64_t v) {
    char buf[24];
    out.append(buf, std::to_chars(buf, buf + sizeof(buf), v).ptr);
  }
  static void hex(std::string& out, uint64_t v) {
    char buf[24];
    out += "\"0x";
    out.append(buf, std::to_chars(buf, buf + sizeof(buf), v, 16).ptr);
    out += '"';
  }
  static void micros(std::string& out, uint64_t ns) {  // "12.345": microseconds, as Chrome traces count
    number(out, ns / 1000);
    char frac[4] = {'.', static_cast<char>('0' + ns / 100 % 10), static_cast<char>('0' + ns / 10 % 10),
                    static_cast<char>('0' + ns % 10)};
    out.append(frac, 4);
  }

  void write_locked(const std::vector<Record>& records) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      while (plugin_raw_.size() < plugins_.size()) {
        plugin_raw_.push_back(plugins_[plugin_raw_.size()]);
        plugin_text_.push_back(escaped(plugin_raw_.back()));
      }
    }
    const std::string pid = std::to_string(::getpid());
    std::string& text = text_;
    for (const Record& r : records) {
      text.clear();
      text += first_ ? "{\"name\":\"" : ",\n{\"name\":\"";
      first_ = false;
      std::string& name = entry_text_[r.name];
      if (name.empty()) name = escaped(r.name);
      text += name;
      const std::string* op = nullptr;
      if (r.entry == HAL_LAYER_ENTRY_OP_LAUNCH) {
        std::string& known = op_text_[{r.plugin, r.a[0]}];
        if (known.empty())
          known = escaped(names_.op(r.plugin < plugin_raw_.size() ? plugin_raw_[r.plugin].c_str() : "",
                                    static_cast<uint32_t>(r.a[0])));
        op = &known;
        text += ' ';
        text += known;
      }
      text += "\",\"cat\":\"hal\",\"ph\":\"X\",\"ts\":";
      micros(text, r.start_ns > origin_ns_ ? r.start_ns - origin_ns_ : 0);
      text += ",\"dur\":";
      micros(text, r.duration_ns);
      text += ",\"pid\":";
      text += pid;
      text += ",\"tid\":";
      number(text, r.tid);
      text += ",\"args\":{\"plugin\":\"";
      text += r.plugin < plugin_text_.size() ? plugin_text_[r.plugin] : std::string();
      text += "\",\"status\":\"";
      std::string& status = status_text_[r.status];
      if (status.empty()) status = escaped(common::status_code_name(r.status));
      text += status;
      text += '"';
      switch (r.entry) {
        case HAL_LAYER_ENTRY_BUFFER_ALLOCATE:
          text += ",\"bytes\":";
          number(text, r.a[0]);
          text += ",\"buffer\":";
          hex(text, r.a[1]);
          break;
        case HAL_LAYER_ENTRY_COPY_HOST_TO_DEVICE:
        case HAL_LAYER_ENTRY_COPY_DEVICE_TO_HOST:
        case HAL_LAYER_ENTRY_COPY_DEVICE_TO_DEVICE:
        case HAL_LAYER_ENTRY_BUFFER_FILL:
          text += ",\"bytes\":";
          number(text, r.a[0]);
          text += ",\"stream\":";
          hex(text, r.a[1]);
          break;
        case HAL_LAYER_ENTRY_OP_LAUNCH:
          text += ",\"op\":\"";
          text += *op;
          text += "\",\"stream\":";
          hex(text, r.a[1]);
          text += ",\"inputs\":";
          number(text, r.a[2]);
          break;
        case HAL_LAYER_ENTRY_EXECUTABLE_EXECUTE:
          text += ",\"executable\":";
          hex(text, r.a[0]);
          text += ",\"stream\":";
          hex(text, r.a[1]);
          text += ",\"inputs\":";
          number(text, r.a[2]);
          break;
        default:
          text += ",\"handle\":";
          hex(text, r.a[0]);
      }
      text += "}}";
      std::fwrite(text.data(), 1, text.size(), file_);
    }
    std::fflush(file_);
  }

  std::string path_;
  std::FILE* file_ = nullptr;
  bool first_ = true;
  uint64_t origin_ns_ = 0;
  CallNames names_;
  std::mutex mutex_;  // records_, pending_, spare_, stopping_, plugins_
  std::condition_variable ready_;
  std::mutex file_mutex_;  // file_, first_
  std::vector<Record> records_;
  std::deque<std::vector<Record>> pending_;
  std::vector<std::vector<Record>> spare_;  // written batches kept for reuse
  bool stopping_ = false;
  std::thread writer_;
  std::vector<std::string> plugins_;
  // The writer's (under file_mutex_): escaped text per plugin index, entry
  // name, (plugin, op id) and status code, and the event being written.
  std::vector<std::string> plugin_raw_, plugin_text_;
  std::unordered_map<const char*, std::string> entry_text_;
  std::map<std::pair<uint32_t, uint64_t>, std::string> op_text_;
  std::unordered_map<uint32_t, std::string> status_text_;
  std::string text_;
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
