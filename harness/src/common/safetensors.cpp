#include "common/safetensors.h"

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "pkb/check.h"

namespace pkb {

namespace {

at::ScalarType dtype_of(const std::string& s, const std::string& path) {
  static const std::map<std::string, at::ScalarType> kTypes = {
      {"BF16", at::kBFloat16}, {"F16", at::kHalf},     {"F32", at::kFloat},
      {"F64", at::kDouble},    {"I64", at::kLong},     {"I32", at::kInt},
      {"I16", at::kShort},     {"I8", at::kChar},      {"U8", at::kByte},
      {"BOOL", at::kBool},     {"F8_E4M3", at::kFloat8_e4m3fn}, {"F8_E5M2", at::kFloat8_e5m2},
      {"C64", at::kComplexFloat}};
  auto it = kTypes.find(s);
  PKB_CHECK(it != kTypes.end(), path, ": unsupported safetensors dtype '", s, "'");
  return it->second;
}

}  // namespace

namespace {

nlohmann::json read_header(std::ifstream& f, const std::string& path) {
  PKB_CHECK(f.good(), "cannot open '", path, "'");
  uint64_t header_len = 0;
  f.read(reinterpret_cast<char*>(&header_len), 8);
  PKB_CHECK(f.good() && header_len > 0 && header_len < (1ull << 30), path, ": bad header length");
  std::string header(header_len, '\0');
  f.read(header.data(), static_cast<std::streamsize>(header_len));
  PKB_CHECK(f.good(), path, ": truncated header");
  auto j = nlohmann::json::parse(header, nullptr, false);
  PKB_CHECK(!j.is_discarded() && j.is_object(), path, ": header is not a JSON object");
  return j;
}

}  // namespace

std::map<std::string, std::string> read_safetensors_metadata(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  nlohmann::json j = read_header(f, path);
  std::map<std::string, std::string> out;
  if (j.contains("__metadata__"))
    for (auto& [k, mv] : j["__metadata__"].items()) out[k] = mv.get<std::string>();
  return out;
}

SafetensorsFile read_safetensors(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  nlohmann::json j = read_header(f, path);
  std::string data((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  SafetensorsFile out;
  for (auto& [name, v] : j.items()) {
    if (name == "__metadata__") {
      for (auto& [k, mv] : v.items()) out.metadata[k] = mv.get<std::string>();
      continue;
    }
    at::ScalarType dt = dtype_of(v.at("dtype").get<std::string>(), path);
    std::vector<int64_t> shape = v.at("shape").get<std::vector<int64_t>>();
    auto offs = v.at("data_offsets").get<std::vector<uint64_t>>();
    PKB_CHECK(offs.size() == 2 && offs[0] <= offs[1] && offs[1] <= data.size(), path, ": tensor '", name,
              "' has bad data offsets");
    at::Tensor t = at::empty(shape, at::TensorOptions().dtype(dt));
    PKB_CHECK(t.nbytes() == offs[1] - offs[0], path, ": tensor '", name, "' holds ", offs[1] - offs[0],
              " bytes, its shape needs ", t.nbytes());
    if (t.nbytes()) std::memcpy(t.data_ptr(), data.data() + offs[0], t.nbytes());
    out.tensors[name] = t;
  }
  return out;
}

}  // namespace pkb
