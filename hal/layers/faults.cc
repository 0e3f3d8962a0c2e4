// The "faults" layer: fails calls on purpose, seeded so a failure
// reproduces. $HAL_FAULTS (or option spec) is a ';'-separated list:
//
//   alloc:rate=0.01        fail 1 % of allocations (OUT_OF_MEMORY)
//   launch:nth=5           fail the 5th launch (DEVICE_ERROR), once
//   copy:every=100         fail every 100th copy
//   sync:rate=0.1  event:nth=2  device_lost:nth=40  hang:nth=3,ms=200
//   seed=7                 the random draws' seed (default 1)
//   plugin=opencl          count and fail only calls on this plugin (a
//                          failover test loses one plugin's devices)
//
// Kinds and the entries they count: alloc (buffer_allocate, host_allocate),
// launch (op_launch, executable_execute, collective), copy (the copies and
// buffer_fill), sync (stream_synchronize, event_synchronize), event
// (event_create, event_record, stream_wait_event), device_lost (launches:
// from then on every call on that plugin fails DEVICE_LOST, except the ones
// that release), hang (launches and syncs: the call waits MS milliseconds,
// at most 60000, then runs). Each injection is one status naming the fault,
// the entry, op, device and plugin; $HAL_FAULTS_LOG (or option log) appends
// one JSON line per injection to a file.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <thread>

#include "hal/common/status_code.hpp"
#include "hal/runtime/error.hpp"
#include "hal/sdk/status.hpp"
#include "layers/builtin.hpp"

namespace hal::detail {
namespace {

enum Kind { kAlloc, kLaunch, kCopy, kSync, kEvent, kDeviceLost, kHang, kKinds };
const char* const kKindNames[kKinds] = {"alloc", "launch", "copy", "sync", "event", "device_lost", "hang"};

bool counts(Kind k, uint32_t entry) {
  switch (k) {
    case kAlloc:
      return entry == HAL_LAYER_ENTRY_BUFFER_ALLOCATE || entry == HAL_LAYER_ENTRY_HOST_ALLOCATE;
    case kLaunch:
    case kDeviceLost:
      return entry == HAL_LAYER_ENTRY_OP_LAUNCH || entry == HAL_LAYER_ENTRY_EXECUTABLE_EXECUTE ||
             entry == HAL_LAYER_ENTRY_COLLECTIVE;
    case kCopy:
      return entry == HAL_LAYER_ENTRY_COPY_HOST_TO_DEVICE || entry == HAL_LAYER_ENTRY_COPY_DEVICE_TO_HOST ||
             entry == HAL_LAYER_ENTRY_COPY_DEVICE_TO_DEVICE || entry == HAL_LAYER_ENTRY_BUFFER_FILL;
    case kSync:
      return entry == HAL_LAYER_ENTRY_STREAM_SYNCHRONIZE || entry == HAL_LAYER_ENTRY_EVENT_SYNCHRONIZE;
    case kEvent:
      return entry == HAL_LAYER_ENTRY_EVENT_CREATE || entry == HAL_LAYER_ENTRY_EVENT_RECORD ||
             entry == HAL_LAYER_ENTRY_STREAM_WAIT_EVENT;
    case kHang:
      return counts(kLaunch, entry) || counts(kSync, entry);
    default:
      return false;
  }
}

hal_status_code_e code_of(Kind k) {
  switch (k) {
    case kAlloc: return HAL_STATUS_OUT_OF_MEMORY;
    case kDeviceLost: return HAL_STATUS_DEVICE_LOST;
    default: return HAL_STATUS_DEVICE_ERROR;
  }
}

// Calls a lost device still takes: releasing things and asking about them.
bool releases(uint32_t entry) {
  switch (entry) {
    case HAL_LAYER_ENTRY_BUFFER_FREE:
    case HAL_LAYER_ENTRY_HOST_FREE:
    case HAL_LAYER_ENTRY_STREAM_DESTROY:
    case HAL_LAYER_ENTRY_EVENT_DESTROY:
    case HAL_LAYER_ENTRY_EXECUTABLE_DESTROY:
    case HAL_LAYER_ENTRY_COMM_DESTROY:
    case HAL_LAYER_ENTRY_COMM_ABORT:
    case HAL_LAYER_ENTRY_DEVICE_COUNT:
    case HAL_LAYER_ENTRY_DEVICE_GET:
    case HAL_LAYER_ENTRY_DEVICE_GET_PROPERTIES:
    case HAL_LAYER_ENTRY_BUFFER_GET_INFO:
    case HAL_LAYER_ENTRY_OP_COUNT:
    case HAL_LAYER_ENTRY_OP_GET_NAME:
    case HAL_LAYER_ENTRY_OP_RESOLVE:
    case HAL_LAYER_ENTRY_OP_GET_INFO:
    case HAL_LAYER_ENTRY_OP_GET_LAYOUTS:
      return true;
    default:
      return false;
  }
}

struct Rule {
  bool on = false;
  double rate = 0;     // probability per counted call
  uint64_t nth = 0;    // fail the nth counted call, once
  uint64_t every = 0;  // fail every nth counted call
  uint64_t ms = 100;   // hang: how long
  std::string text;    // as written, for messages
};

class FaultsLayer final : public BuiltinLayer {
 public:
  explicit FaultsLayer(const hal_layer_create_args_t& args) {
    LayerOptionMap options("faults", args, {"spec", "log"});
    std::string source;
    spec_ = options.get("spec", "HAL_FAULTS", "", &source);
    parse(source);
    std::string log_source;
    const std::string log = options.get("log", "HAL_FAULTS_LOG", "", &log_source);
    if (!log.empty()) {
      log_ = std::fopen(log.c_str(), "a");
      if (log_ == nullptr)
        throw Error(HAL_STATUS_INVALID_ARGUMENT,
                    log_source + " = '" + log + "': cannot open the fault log: " + std::strerror(errno));
    }
  }
  ~FaultsLayer() override {
    if (log_ != nullptr) std::fclose(log_);
  }

  hal_status_t* begin(const hal_layer_call_t& call, void**) override {
    if (!plugin_.empty() && plugin_ != call.plugin) return nullptr;
    Kind fired = kKinds;
    uint64_t count = 0;
    uint64_t hang_ms = 0;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (lost_.count(call.plugin) && !releases(call.entry)) {
        return sdk::make_status(HAL_STATUS_DEVICE_LOST, "layer faults: " + std::string(call.plugin) +
                                                            ": the device was lost (injected earlier: " +
                                                            lost_[call.plugin] + "); " + call.name + " refused");
      }
      for (int k = 0; k < kKinds; ++k) {
        Rule& r = rules_[k];
        if (!r.on || !counts(static_cast<Kind>(k), call.entry)) continue;
        const uint64_t n = ++seen_[k];
        const bool hit = (r.nth != 0 && n == r.nth) || (r.every != 0 && n % r.every == 0) ||
                         (r.rate > 0 && std::uniform_real_distribution<double>(0, 1)(rng_) < r.rate);
        if (!hit) continue;
        if (k == kHang) {
          hang_ms = r.ms;
          continue;
        }
        fired = static_cast<Kind>(k);
        count = n;
        break;
      }
    }
    if (hang_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(hang_ms));
    return fired == kKinds ? nullptr : inject(call, fired, count);
  }

  hal_status_t* end(const hal_layer_call_t& call, void*, hal_status_t* status) override {
    if (status == nullptr) names_.learn(call);
    return status;
  }

 private:
  hal_status_t* inject(const hal_layer_call_t& call, Kind k, uint64_t n) {
    std::ostringstream what;
    what << "injected fault '" << rules_[k].text << "' (HAL_FAULTS='" << spec_ << "', " << kKindNames[k] << " call #"
         << n << "): " << call.plugin << ": " << call.name;
    std::string op;
    if (call.entry == HAL_LAYER_ENTRY_OP_LAUNCH) {
      const hal_op_args_t* a = arg<const hal_op_args_t*>(call, 1);
      if (a != nullptr) op = names_.op(call.plugin, a->op);
      what << " of " << op;
    }
    const void* device = CallNames::device_of(call);
    if (device != nullptr) what << " on " << names_.device(device);
    what << " failed with " << common::status_code_name(code_of(k));
    const std::string message = what.str();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ++injected_;
      if (k == kDeviceLost) lost_[call.plugin] = message;
      if (log_ != nullptr) {
        nlohmann::json line = {{"kind", kKindNames[k]}, {"count", n},       {"entry", call.name},
                               {"plugin", call.plugin}, {"op", op},         {"code", common::status_code_name(code_of(k))},
                               {"pid", static_cast<int>(::getpid())},       {"message", message}};
        std::fputs((line.dump() + "\n").c_str(), log_);
        std::fflush(log_);
      }
    }
    return sdk::make_status(code_of(k), "layer faults: " + message);
  }

  [[noreturn]] void bad(const std::string& source, const std::string& why) const {
    throw Error(HAL_STATUS_INVALID_ARGUMENT, source + " = '" + spec_ + "' does not parse: " + why +
                                                 " (write e.g. 'alloc:rate=0.01;launch:nth=5;seed=7'; kinds: "
                                                 "alloc, launch, copy, sync, event, device_lost, hang)");
  }

  static bool number(const std::string& s, double* out) {
    if (s.empty()) return false;
    char* end = nullptr;
    *out = std::strtod(s.c_str(), &end);
    return end == s.c_str() + s.size();
  }
  static bool count(const std::string& s, uint64_t* out) {
    if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos || s.size() > 18) return false;
    *out = std::stoull(s);
    return true;
  }

  void parse(const std::string& source) {
    if (spec_.empty())
      throw Error(HAL_STATUS_INVALID_ARGUMENT,
                  "no faults to inject: set HAL_FAULTS (e.g. 'alloc:rate=0.01;seed=1') or spec in "
                  "[layer_options.faults]");
    uint64_t seed = 1;
    std::stringstream items(spec_);
    std::string item;
    while (std::getline(items, item, ';')) {
      if (item.empty()) continue;
      if (item.rfind("seed=", 0) == 0) {
        if (!count(item.substr(5), &seed)) bad(source, "seed '" + item.substr(5) + "' is not a whole number");
        continue;
      }
      if (item.rfind("plugin=", 0) == 0) {
        if (item.size() == 7) bad(source, "'plugin=' needs a plugin name");
        plugin_ = item.substr(7);
        continue;
      }
      const size_t colon = item.find(':');
      const std::string kind = item.substr(0, colon);
      int k = 0;
      while (k < kKinds && kind != kKindNames[k]) ++k;
      if (k == kKinds) bad(source, "unknown fault kind '" + kind + "'");
      Rule& r = rules_[k];
      if (r.on) bad(source, "'" + kind + "' is given twice");
      r.on = true;
      r.text = item;
      if (colon == std::string::npos) bad(source, "'" + kind + "' needs rate=, nth= or every=");
      std::stringstream keys(item.substr(colon + 1));
      std::string kv;
      while (std::getline(keys, kv, ',')) {
        const size_t eq = kv.find('=');
        const std::string key = kv.substr(0, eq), value = eq == std::string::npos ? "" : kv.substr(eq + 1);
        if (key == "rate") {
          if (!number(value, &r.rate) || !(r.rate >= 0 && r.rate <= 1))
            bad(source, kind + ": rate '" + value + "' is not a number in [0, 1]");
        } else if (key == "nth" || key == "every") {
          uint64_t& v = key == "nth" ? r.nth : r.every;
          if (!count(value, &v) || v == 0) bad(source, kind + ": " + key + " '" + value + "' is not a count >= 1");
        } else if (key == "ms" && k == kHang) {
          if (!count(value, &r.ms) || r.ms > 60000) bad(source, "hang: ms '" + value + "' is not in 0..60000");
        } else {
          bad(source, kind + ": unknown key '" + key + "' (rate, nth, every" + (k == kHang ? ", ms" : "") + ")");
        }
      }
      if (r.rate == 0 && r.nth == 0 && r.every == 0) bad(source, "'" + kind + "' needs rate=, nth= or every=");
    }
    rng_.seed(seed);
  }

  std::string spec_;
  std::string plugin_;  // "" = every plugin
  Rule rules_[kKinds];
  uint64_t seen_[kKinds] = {};
  uint64_t injected_ = 0;
  std::mt19937_64 rng_;
  std::map<std::string, std::string> lost_;  // plugin -> the injection that lost it
  std::FILE* log_ = nullptr;
  CallNames names_;
  std::mutex mutex_;
};

}  // namespace

const hal_layer_api_t* faults_layer_api() {
  return builtin_api<FaultsLayer>("faults", "injects failures at configured rates or calls, seeded ($HAL_FAULTS)");
}

}  // namespace hal::detail
