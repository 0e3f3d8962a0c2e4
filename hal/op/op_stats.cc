#include "hal/runtime/op_stats.hpp"

#include <map>
#include <mutex>
#include <utility>

#include "hal/runtime/device.hpp"

namespace hal {

namespace {

// Only the slow paths (casts, fallbacks) count, so one lock is enough.
struct Table {
  std::mutex mu;
  std::map<std::pair<std::string, std::string>, OpStat> stats;
};

Table& table() {
  static Table* t = new Table;  // never destroyed: counted from static destructors too
  return *t;
}

template <class Fn>
void update(const Device& device, const std::string& op, Fn fn) {
  std::string id = device.id();
  Table& t = table();
  std::lock_guard<std::mutex> lock(t.mu);
  OpStat& s = t.stats[{id, op}];
  if (s.op.empty()) {
    s.device = id;
    s.op = op;
  }
  fn(s);
}

}  // namespace

std::vector<OpStat> op_stats() {
  Table& t = table();
  std::lock_guard<std::mutex> lock(t.mu);
  std::vector<OpStat> out;
  for (const auto& [key, s] : t.stats)
    if (s.casts || s.fallback_casts || s.fallbacks) out.push_back(s);
  return out;
}

void reset_op_stats() {
  Table& t = table();
  std::lock_guard<std::mutex> lock(t.mu);
  t.stats.clear();
}

void record_fallback(const Device& device, const std::string& op, uint64_t bytes) {
  update(device, op, [&](OpStat& s) {
    s.fallbacks++;
    s.fallback_bytes += bytes;
  });
}

void detail::record_cast(const Device& device, const std::string& op, bool through_fallback, uint64_t bytes) {
  update(device, op, [&](OpStat& s) {
    (through_fallback ? s.fallback_casts : s.casts)++;
    s.cast_bytes += bytes;
  });
}

}  // namespace hal
