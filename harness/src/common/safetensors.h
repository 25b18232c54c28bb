// A reader for the safetensors format of the golden fixtures: an 8-byte
// little-endian header length, a JSON header mapping names to
// {dtype, shape, data_offsets} (plus __metadata__), then raw little-endian data.
#pragma once

#include <ATen/ATen.h>

#include <map>
#include <string>

namespace pkb {

struct SafetensorsFile {
  std::map<std::string, at::Tensor> tensors;  // CPU tensors owning their data
  std::map<std::string, std::string> metadata;
};

// Throws pkb::Error naming the file on any malformed content.
SafetensorsFile read_safetensors(const std::string& path);
// The __metadata__ entries alone (reads only the header).
std::map<std::string, std::string> read_safetensors_metadata(const std::string& path);

}  // namespace pkb
