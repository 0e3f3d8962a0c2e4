// Graph::serialize / deserialize / hash.
//
// Format (version 1), all integers little-endian:
//   "HALGRAPH"  u32 version  u64 payload size  payload  sha256(payload) (32 bytes)
// payload:
//   u32 values,    each: u32 dtype, u32 rank, i64 dims[rank], str name
//   u32 symbols,   each: i64 symbol, str name
//   u32 inputs,    each: u32 value id
//   u32 constants, each: u32 value id, u64 byte count, bytes
//   u32 nodes,     each: str op, u32 n, u32 input ids[n], u32 m, u32 output ids[m],
//                        u32 attrs, each: str name, u32 hal_attr_type_e, value
//                        (INT/BOOL/DTYPE: i64; FLOAT: f64 bits; STRING: str;
//                         INTS: u32 count, i64s; FLOATS: u32 count, f64 bits)
//   u32 outputs,   each: u32 value id
// str = u32 length + bytes. A reader of another version refuses the bytes
// (the compile cache then rebuilds); any change to this layout bumps it.
#include <cstring>

#include "runtime/sha256.hpp"
#include "hal/runtime/graph.hpp"

namespace hal {
namespace {

constexpr char kMagic[8] = {'H', 'A', 'L', 'G', 'R', 'A', 'P', 'H'};
constexpr uint32_t kVersion = 1;
constexpr size_t kHeader = sizeof(kMagic) + 4 + 8, kDigest = 32;

class Writer {
 public:
  void u32(uint32_t v) { le(v, 4); }
  void u64(uint64_t v) { le(v, 8); }
  void i64(int64_t v) { le(static_cast<uint64_t>(v), 8); }
  void f64(double v) {
    uint64_t bits;
    std::memcpy(&bits, &v, 8);
    le(bits, 8);
  }
  void str(const std::string& s) {
    u32(static_cast<uint32_t>(s.size()));
    out_ += s;
  }
  void bytes(const void* p, size_t n) { out_.append(static_cast<const char*>(p), n); }
  std::string& out() { return out_; }

 private:
  void le(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) out_ += static_cast<char>((v >> (8 * i)) & 0xff);
  }
  std::string out_;
};

// Reads DATA[0, SIZE) front to back; every read checks the bytes left.
class Reader {
 public:
  Reader(const uint8_t* data, size_t size, size_t base) : p_(data), size_(size), base_(base) {}
  uint32_t u32(const char* what) { return static_cast<uint32_t>(le(4, what)); }
  uint64_t u64(const char* what) { return le(8, what); }
  int64_t i64(const char* what) { return static_cast<int64_t>(le(8, what)); }
  double f64(const char* what) {
    uint64_t bits = le(8, what);
    double v;
    std::memcpy(&v, &bits, 8);
    return v;
  }
  std::string str(const char* what) {
    size_t n = u32(what);
    need(n, what);
    std::string s(reinterpret_cast<const char*>(p_ + pos_), n);
    pos_ += n;
    return s;
  }
  std::vector<uint8_t> bytes(uint64_t n, const char* what) {
    need(n, what);
    std::vector<uint8_t> v(p_ + pos_, p_ + pos_ + n);
    pos_ += static_cast<size_t>(n);
    return v;
  }
  // A count of items of at least MIN_BYTES each: more than the bytes left
  // could hold is corrupt, so no count makes us allocate beyond the input.
  size_t count(size_t min_bytes, const char* what) {
    size_t at = pos_;
    size_t n = u32(what);
    if (n > (size_ - pos_) / min_bytes)
      corrupt(at, std::string(what) + " is " + std::to_string(n) + ", more than the " +
                      std::to_string(size_ - pos_) + " bytes left can hold");
    return n;
  }
  size_t offset() const { return base_ + pos_; }
  bool at_end() const { return pos_ == size_; }
  [[noreturn]] void corrupt(size_t at, const std::string& why) const {
    throw Error(HAL_STATUS_INVALID_ARGUMENT, "Graph::deserialize: corrupt graph at byte " + std::to_string(base_ + at) +
                                                 ": " + why);
  }

 private:
  void need(uint64_t n, const char* what) {
    if (n > size_ - pos_)
      throw Error(HAL_STATUS_INVALID_ARGUMENT, "Graph::deserialize: truncated: " + std::string(what) + " at byte " +
                                                   std::to_string(base_ + pos_) + " needs " + std::to_string(n) +
                                                   " bytes but " + std::to_string(size_ - pos_) + " are left");
  }
  uint64_t le(int n, const char* what) {
    need(static_cast<uint64_t>(n), what);
    uint64_t v = 0;
    for (int i = 0; i < n; ++i) v |= static_cast<uint64_t>(p_[pos_ + i]) << (8 * i);
    pos_ += static_cast<size_t>(n);
    return v;
  }
  const uint8_t* p_;
  size_t size_, pos_ = 0, base_;
};

}  // namespace

// The payload; NAMES false leaves every value and symbol name empty (hash()).
static std::string encode(const Graph& g, const std::vector<std::pair<int64_t, std::string>>& symbols, bool names) {
  Writer w;
  w.u32(static_cast<uint32_t>(g.values().size()));
  for (size_t id = 0; id < g.values().size(); ++id) {
    const ValueSpec& v = g.values()[id];
    w.u32(v.dtype);
    w.u32(static_cast<uint32_t>(v.shape.size()));
    for (int64_t d : v.shape) w.i64(d);
    w.str(names ? g.value_name(static_cast<uint32_t>(id)) : "");
  }
  w.u32(static_cast<uint32_t>(symbols.size()));
  for (const auto& [sym, name] : symbols) {
    w.i64(sym);
    w.str(names ? name : "");
  }
  auto ids = [&](const std::vector<uint32_t>& v) {
    w.u32(static_cast<uint32_t>(v.size()));
    for (uint32_t id : v) w.u32(id);
  };
  ids(g.inputs());
  w.u32(static_cast<uint32_t>(g.constants().size()));
  for (uint32_t id : g.constants()) {
    const std::vector<uint8_t>& bytes = *g.constant_data(id);
    w.u32(id);
    w.u64(bytes.size());
    w.bytes(bytes.data(), bytes.size());
  }
  w.u32(static_cast<uint32_t>(g.nodes().size()));
  for (const Graph::Node& n : g.nodes()) {
    w.str(n.op);
    ids(n.inputs);
    ids(n.outputs);
    w.u32(static_cast<uint32_t>(n.attrs.size()));
    for (const Attr& attr : n.attrs) {
      hal_attr_t a = attr.c_attr();
      w.str(attr.name());
      w.u32(a.type);
      switch (a.type) {
        case HAL_ATTR_TYPE_FLOAT: w.f64(a.value.f); break;
        case HAL_ATTR_TYPE_STRING: w.str(a.value.s); break;
        case HAL_ATTR_TYPE_INTS:
          w.u32(static_cast<uint32_t>(a.count));
          for (size_t k = 0; k < a.count; ++k) w.i64(a.value.ints[k]);
          break;
        case HAL_ATTR_TYPE_FLOATS:
          w.u32(static_cast<uint32_t>(a.count));
          for (size_t k = 0; k < a.count; ++k) w.f64(a.value.floats[k]);
          break;
        default: w.i64(a.value.i); break;  // INT, BOOL, DTYPE
      }
    }
  }
  ids(g.outputs());
  return std::move(w.out());
}

std::string Graph::serialize() const {
  std::string payload = encode(*this, symbols_, true);
  Writer w;
  w.bytes(kMagic, sizeof(kMagic));
  w.u32(kVersion);
  w.u64(payload.size());
  w.bytes(payload.data(), payload.size());
  auto digest = detail::sha256(payload.data(), payload.size());
  w.bytes(digest.data(), digest.size());
  return std::move(w.out());
}

std::string Graph::hash() const {
  std::string payload = "HALGRAPH hash v" + std::to_string(kVersion) + "\n" + encode(*this, symbols_, false);
  return detail::sha256_hex(payload.data(), payload.size());
}

Graph Graph::deserialize(const void* data, size_t size) {
  auto refuse = [](const std::string& why) {
    throw Error(HAL_STATUS_INVALID_ARGUMENT, "Graph::deserialize: " + why);
  };
  if (data == nullptr && size > 0) refuse("data is NULL but size is " + std::to_string(size));
  const auto* bytes = static_cast<const uint8_t*>(data);
  if (size < kHeader || std::memcmp(bytes, kMagic, sizeof(kMagic)) != 0)
    refuse("not a HAL graph (" + std::to_string(size) + " bytes; a graph starts with \"HALGRAPH\")");
  Reader header(bytes + sizeof(kMagic), kHeader - sizeof(kMagic), sizeof(kMagic));
  uint32_t version = header.u32("the format version");
  if (version != kVersion)
    refuse("format version " + std::to_string(version) + " is not this build's (" + std::to_string(kVersion) + ")");
  uint64_t payload_size = header.u64("the payload size");
  if (payload_size > size - kHeader || size - kHeader - payload_size != kDigest)
    refuse("truncated or padded: the header says " + std::to_string(payload_size) + " payload bytes + " +
           std::to_string(kDigest) + " checksum bytes but " + std::to_string(size - kHeader) + " follow it");
  const uint8_t* payload = bytes + kHeader;
  auto digest = detail::sha256(payload, payload_size);
  if (std::memcmp(digest.data(), payload + payload_size, kDigest) != 0)
    refuse("checksum mismatch: the payload's sha256 is " + detail::hex(digest.data(), kDigest) +
           " but the stored one is " + detail::hex(payload + payload_size, kDigest) + " (corrupt bytes)");

  Reader r(payload, payload_size, kHeader);
  Graph g;
  size_t nv = r.count(8 + 4, "the value count");  // dtype, rank, name length
  for (size_t id = 0; id < nv; ++id) {
    size_t at = r.offset() - kHeader;
    ValueSpec v;
    uint32_t dtype = r.u32("a value's dtype");  // checked before it becomes an enum
    size_t rank = r.count(8, "a value's rank");
    if (common::dtype_size(dtype) == 0)
      r.corrupt(at, "value " + std::to_string(id) + " has unknown dtype value " + std::to_string(dtype));
    v.dtype = static_cast<hal_dtype_e>(dtype);
    if (rank > HAL_TENSOR_MAX_RANK)
      r.corrupt(at, "value " + std::to_string(id) + " has rank " + std::to_string(rank) + " > HAL_TENSOR_MAX_RANK");
    for (size_t d = 0; d < rank; ++d) {
      v.shape.push_back(r.i64("a dim"));
      if (v.shape.back() > (int64_t{1} << 56) || v.shape.back() < -(int64_t{1} << 56))  // as a launch bounds sizes
        r.corrupt(at, "value " + std::to_string(id) + " has dim " + std::to_string(v.shape.back()) +
                          " beyond +-2^56");
    }
    g.values_.push_back(std::move(v));
    g.names_.push_back(r.str("a value name"));
    g.constant_.emplace_back();
    g.producer_.push_back(-3);
  }
  size_t ns = r.count(8 + 4, "the symbol count");
  for (size_t k = 0; k < ns; ++k) {
    size_t at = r.offset() - kHeader;
    int64_t sym = r.i64("a symbol");
    if (sym >= 0) r.corrupt(at, "symbol " + std::to_string(sym) + " is not negative");
    g.symbols_.emplace_back(sym, r.str("a symbol name"));
  }
  auto ids = [&](std::vector<uint32_t>& out, const char* what) {
    size_t n = r.count(4, what);
    for (size_t i = 0; i < n; ++i) out.push_back(r.u32("a value id"));
  };
  ids(g.inputs_, "the input count");
  for (uint32_t id : g.inputs_)
    if (id < nv) g.producer_[id] = -1;
  size_t nc = r.count(4 + 8, "the constant count");
  for (size_t k = 0; k < nc; ++k) {
    size_t at = r.offset() - kHeader;
    uint32_t id = r.u32("a constant's value id");
    uint64_t n = r.u64("a constant's byte count");
    if (id >= nv || g.constant_[id])
      r.corrupt(at, "constant " + std::to_string(k) + " is value " + std::to_string(id) +
                        (id >= nv ? ", out of range" : ", already a constant"));
    uint64_t want = common::dtype_size(g.values_[id].dtype);
    for (int64_t d : g.values_[id].shape)
      if (d < 0 || (d > 0 && want > UINT64_MAX / static_cast<uint64_t>(d)))
        r.corrupt(at, "constant " + std::to_string(k) + " has shape " + g.shape_string(g.values_[id].shape) +
                          ", not a concrete size");
      else
        want *= static_cast<uint64_t>(d);
    if (n != want)
      r.corrupt(at, "constant " + std::to_string(k) + " holds " + std::to_string(n) + " bytes but its shape needs " +
                        std::to_string(want));
    g.constant_[id] = std::make_shared<const std::vector<uint8_t>>(r.bytes(n, "a constant's bytes"));
    g.constants_.push_back(id);
    g.producer_[id] = -2;
  }
  size_t nn = r.count(4 * 4, "the node count");
  for (size_t n = 0; n < nn; ++n) {
    Node node;
    node.op = r.str("an op name");
    ids(node.inputs, "a node's input count");
    ids(node.outputs, "a node's output count");
    size_t na = r.count(4 + 4 + 4, "a node's attribute count");
    for (size_t k = 0; k < na; ++k) {
      size_t at = r.offset() - kHeader;
      std::string name = r.str("an attribute name");
      uint32_t type = r.u32("an attribute type");
      switch (type) {
        case HAL_ATTR_TYPE_INT: node.attrs.push_back(Attr::i(name, r.i64("an int"))); break;
        case HAL_ATTR_TYPE_DTYPE: {
          int64_t d = r.i64("a dtype");
          if (d < 0 || d >= HAL_DTYPE_COUNT_) r.corrupt(at, "attribute '" + name + "' has dtype value " + std::to_string(d));
          node.attrs.push_back(Attr::dtype(name, static_cast<hal_dtype_e>(d)));
          break;
        }
        case HAL_ATTR_TYPE_BOOL: {
          int64_t b = r.i64("a bool");
          if (b != 0 && b != 1) r.corrupt(at, "attribute '" + name + "' is a bool of value " + std::to_string(b));
          node.attrs.push_back(Attr::b(name, b != 0));
          break;
        }
        case HAL_ATTR_TYPE_FLOAT: node.attrs.push_back(Attr::f(name, r.f64("a float"))); break;
        case HAL_ATTR_TYPE_STRING: node.attrs.push_back(Attr::s(name, r.str("a string"))); break;
        case HAL_ATTR_TYPE_INTS: {
          std::vector<int64_t> v(r.count(8, "an ints count"));
          for (int64_t& x : v) x = r.i64("an int");
          node.attrs.push_back(Attr::ints(name, std::move(v)));
          break;
        }
        case HAL_ATTR_TYPE_FLOATS: {
          std::vector<double> v(r.count(8, "a floats count"));
          for (double& x : v) x = r.f64("a float");
          node.attrs.push_back(Attr::floats(name, std::move(v)));
          break;
        }
        default: r.corrupt(at, "attribute '" + name + "' has unknown type " + std::to_string(type));
      }
    }
    for (uint32_t id : node.outputs)
      if (id < nv && g.producer_[id] == -3) g.producer_[id] = static_cast<int64_t>(n);
    g.nodes_.push_back(std::move(node));
  }
  ids(g.outputs_, "the output count");
  if (!r.at_end())
    r.corrupt(r.offset() - kHeader, std::to_string(payload_size - (r.offset() - kHeader)) +
                                        " bytes follow the graph inside the payload");
  try {
    g.verify();
  } catch (const Error& e) {
    refuse(std::string("the graph is not valid: ") + e.what());
  }
  return g;
}

}  // namespace hal
