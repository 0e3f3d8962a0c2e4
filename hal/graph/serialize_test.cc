// Graph::serialize / deserialize / hash: a round trip keeps everything,
// bad bytes of every kind are refused without reading past them, and the
// hash ignores names but not constants.
#include <doctest/doctest.h>

#include <cstring>
#include <random>
#include <string>

#include "runtime/sha256.hpp"
#include "hal/runtime/graph.hpp"

namespace {
constexpr hal_dtype_e F32 = HAL_DTYPE_FLOAT32;
using hal::Attr;

hal::Graph sample(const std::string& input_name = "x", uint8_t weight = 1) {
  hal::Graph g;
  int64_t n = g.symbol("n");
  auto x = g.input(F32, {n, 2}, input_name);
  auto w = g.constant(F32, {2, 2}, std::vector<uint8_t>(16, weight), "w");
  auto h = g.add_op("matmul", {x, w});
  auto c = g.add_op("add", {h, h}, {Attr::f("alpha", -1.5)});
  auto p = g.add_op("pad", {c}, {Attr::ints("pad", {1, 1}), Attr::s("mode", "constant")});
  auto s = g.add_op("sum", {p}, {Attr::ints("dim", {1}), Attr::b("keepdim", true), Attr::dtype("dtype", F32)});
  g.mark_output(s, "y");
  return g;
}

// BYTES with the payload's checksum recomputed (the payload sits between
// the 20-byte header and the 32-byte digest).
std::string reseal(std::string bytes) {
  auto d = hal::detail::sha256(bytes.data() + 20, bytes.size() - 52);
  std::memcpy(&bytes[bytes.size() - 32], d.data(), 32);
  return bytes;
}

std::string refusal(const std::string& bytes) {
  try {
    hal::Graph::deserialize(bytes.data(), bytes.size());
  } catch (const hal::Error& e) {
    CHECK(e.code() == HAL_STATUS_INVALID_ARGUMENT);
    return e.what();
  }
  FAIL("accepted");
  return "";
}
}  // namespace

TEST_CASE("serialize: a round trip keeps values, names, symbols, constants, attributes and order") {
  hal::Graph g = sample();
  std::string bytes = g.serialize();
  hal::Graph back = hal::Graph::deserialize(bytes.data(), bytes.size());
  CHECK(back.dump() == g.dump());
  CHECK(back.serialize() == bytes);
  CHECK(back.hash() == g.hash());
  CHECK(*back.constant_data(1) == *g.constant_data(1));
  CHECK(back.symbol_name(-1) == "n");
  CHECK(back.value_name(back.outputs()[0]) == "y");
  // The copy grows like the original.
  auto more = back.add_op("relu", {hal::Graph::Value{back.outputs()[0]}});
  CHECK(back.values()[more.id] == hal::ValueSpec{F32, {-1, 1}});
}

TEST_CASE("serialize: truncated, corrupt, foreign and other-version bytes are refused") {
  std::string bytes = sample().serialize();
  CHECK(refusal("") == "Graph::deserialize: not a HAL graph (0 bytes; a graph starts with \"HALGRAPH\")");
  CHECK(refusal("ONNX....................") ==
        "Graph::deserialize: not a HAL graph (24 bytes; a graph starts with \"HALGRAPH\")");
  std::string v2 = bytes;
  v2[8] = 2;
  CHECK(refusal(v2) == "Graph::deserialize: format version 2 is not this build's (1)");
  CHECK(refusal(bytes.substr(0, bytes.size() - 1)).find("truncated or padded") != std::string::npos);
  CHECK(refusal(bytes + "x").find("truncated or padded") != std::string::npos);
  std::string flipped = bytes;
  flipped[40] ^= 1;
  CHECK(refusal(flipped).find("checksum mismatch") != std::string::npos);
  // A valid checksum over a payload that claims too much: the count is
  // bounded by the bytes left.
  std::string huge = bytes;
  std::memset(&huge[20], 0xff, 4);  // the value count
  CHECK(refusal(reseal(huge)) == "Graph::deserialize: corrupt graph at byte 20: the value count is 4294967295, more "
                                 "than the " + std::to_string(bytes.size() - 52 - 4) + " bytes left can hold");
  // A dtype that does not exist.
  std::string dtype = bytes;
  dtype[24] = 99;
  CHECK(refusal(reseal(dtype)) == "Graph::deserialize: corrupt graph at byte 24: value 0 has unknown dtype value 99");
}

TEST_CASE("serialize: a graph the verifier refuses is refused") {
  hal::Graph g = sample();
  g.set_node_input(0, 0, hal::Graph::Value{g.nodes()[1].outputs[0]});  // a cycle through matmul and clamp
  std::string bytes = g.serialize();
  CHECK(refusal(bytes) == "Graph::deserialize: the graph is not valid: node 0 ('matmul') is on a cycle: node 0 "
                          "('matmul') -> node 1 ('add') -> node 0 ('matmul')");
}

TEST_CASE("serialize: random corruption never crashes and is refused or verified") {
  const std::string bytes = sample().serialize();
  std::mt19937 rng(13);
  int accepted = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    std::string b = bytes;
    int flips = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < flips; ++k) b[20 + rng() % (b.size() - 52)] = static_cast<char>(rng());
    if (trial % 3 == 0) b.resize(20 + rng() % (b.size() - 20));
    b = b.size() >= 52 ? reseal(b) : b;
    try {
      hal::Graph g = hal::Graph::deserialize(b.data(), b.size());
      g.verify();  // whatever is accepted is a valid graph
      ++accepted;
    } catch (const hal::Error& e) {
      CHECK(e.code() == HAL_STATUS_INVALID_ARGUMENT);
    }
  }
  MESSAGE("accepted " << accepted << " of 2000 corrupted graphs (names and constant bytes may change freely)");
}

TEST_CASE("hash: names do not count, constants, shapes and attributes do") {
  hal::Graph a = sample("x"), b = sample("input_ids");
  b.set_value_name(2, "hidden");
  CHECK(a.hash() == b.hash());
  CHECK(a.hash().size() == 64);
  CHECK(a.hash() != sample("x", 2).hash());  // other weights
  hal::Graph c = sample();
  c.add_op("relu", {hal::Graph::Value{0}});  // an extra (dead) node
  CHECK(a.hash() != c.hash());
  CHECK(a.serialize() != b.serialize());  // the names are stored
}
