//===- Safetensors.cpp - read safetensors headers -------------------------===//
#include "compiler/import/Safetensors.h"
#include "moe/abi/Numeric.h"
#include "moe/abi/File.h"

#include <algorithm>
#include <cstring>
#include <tuple>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace moe {

namespace {

/// A header larger than this is not a real checkpoint (real ones are < 10 MB).
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;

[[noreturn]] void fail(const std::string &file, const std::string &what) {
  throw InputError(file + ": " + what);
}

std::string describe(const json &value) {
  std::string s = value.dump();
  return s.size() > 40 ? s.substr(0, 37) + "..." : s;
}

TensorInfo parseEntry(const std::string &file, const std::string &name,
                      const json &entry, uint64_t dataStart,
                      uint64_t dataSize) {
  auto bad = [&](const std::string &what) {
    fail(file, "tensor '" + name + "' " + what);
  };
  if (!entry.is_object())
    bad("must be an object, got " + describe(entry));
  TensorInfo info;
  info.file = file;
  auto dtype = entry.find("dtype");
  if (dtype == entry.end() || !dtype->is_string())
    bad("has no string 'dtype'");
  info.dtype = dtype->get<std::string>();
  unsigned elemSize = dtypeSize(info.dtype);
  if (elemSize == 0)
    bad("has unknown dtype '" + info.dtype + "'");
  auto shape = entry.find("shape");
  if (shape == entry.end() || !shape->is_array())
    bad("has no 'shape' array");
  uint64_t numel = 1;
  for (const json &d : *shape) {
    if (!d.is_number_unsigned())
      bad("has a shape entry that is not a non-negative integer: " +
          describe(*shape));
    uint64_t v = d.get<uint64_t>();
    if (v != 0 && numel > UINT64_MAX / 8 / v)
      bad("has a shape too large to address: " + describe(*shape));
    numel *= v;
    info.shape.push_back(static_cast<int64_t>(v));
  }
  auto offsets = entry.find("data_offsets");
  if (offsets == entry.end() || !offsets->is_array() || offsets->size() != 2 ||
      !(*offsets)[0].is_number_unsigned() || !(*offsets)[1].is_number_unsigned())
    bad("needs 'data_offsets' [begin, end] of non-negative integers");
  uint64_t begin = (*offsets)[0].get<uint64_t>();
  uint64_t end = (*offsets)[1].get<uint64_t>();
  if (end < begin)
    bad("has data_offsets [" + std::to_string(begin) + ", " +
        std::to_string(end) + "] that end before they begin");
  if (end > dataSize)
    bad("ends at byte " + std::to_string(end) +
        ", past the end of the data (" + std::to_string(dataSize) +
        " bytes); the file may be truncated");
  if (end - begin != numel * elemSize)
    bad("spans " + std::to_string(end - begin) + " bytes but shape " +
        shapeString(info.shape) + " of " + info.dtype + " needs " +
        std::to_string(numel * elemSize));
  info.offset = dataStart + begin;
  info.size = end - begin;
  return info;
}

} // namespace

unsigned dtypeSize(const std::string &dtype) {
  static const std::map<std::string, unsigned> sizes = {
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},   {"F8_E4M3", 1}, {"F8_E5M2", 1},
      {"I16", 2},  {"U16", 2}, {"F16", 2},  {"BF16", 2},    {"I32", 4},
      {"U32", 4},  {"F32", 4}, {"I64", 8},  {"U64", 8},     {"F64", 8}};
  auto it = sizes.find(dtype);
  return it == sizes.end() ? 0 : it->second;
}

std::string shapeString(const std::vector<int64_t> &shape) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < shape.size(); ++i)
    os << (i ? ", " : "") << shape[i];
  os << "]";
  return os.str();
}

void TensorCatalog::addFile(const std::string &path) {
  auto in = rt::InputFile::open(path);
  if (!in)
    throw InputError(in.status().message());
  const uint64_t fileSize = in->size();
  if (fileSize < 8)
    fail(path, "truncated: " + std::to_string(fileSize) +
                   " bytes, but a safetensors file starts with an 8-byte "
                   "header length");
  unsigned char lenBytes[8];
  if (rt::Status st = in->readAt(0, lenBytes, 8); !st)
    throw InputError(st.message());
  uint64_t headerSize = 0;
  for (int i = 7; i >= 0; --i)
    headerSize = (headerSize << 8) | lenBytes[i];
  if (headerSize > kMaxHeaderBytes)
    fail(path, "header length " + std::to_string(headerSize) +
                   " is implausible (limit " + std::to_string(kMaxHeaderBytes) +
                   "); not a safetensors file?");
  if (8 + headerSize > fileSize)
    fail(path, "truncated: header of " + std::to_string(headerSize) +
                   " bytes runs past the end of the file (" +
                   std::to_string(fileSize) + " bytes)");
  std::string text(headerSize, '\0');
  if (rt::Status st = in->readAt(8, text.data(), headerSize); !st)
    throw InputError(st.message());
  json header = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (header.is_discarded())
    fail(path, "header is not valid JSON");
  if (!header.is_object())
    fail(path, "header must be a JSON object, got " + describe(header));

  uint64_t dataStart = 8 + headerSize, dataSize = fileSize - dataStart;
  std::vector<std::pair<const TensorInfo *, std::string>> spans;
  for (auto &[name, entry] : header.items()) {
    if (name == "__metadata__")
      continue;
    if (tensors_.count(name))
      fail(path, "tensor '" + name + "' also appears in " +
                     tensors_.at(name).file);
    auto &info = tensors_[name] =
        parseEntry(path, name, entry, dataStart, dataSize);
    if (info.size > 0)
      spans.emplace_back(&info, name);
  }
  std::sort(spans.begin(), spans.end(), [](const auto &a, const auto &b) {
    return a.first->offset < b.first->offset;
  });
  for (size_t i = 1; i < spans.size(); ++i) {
    const TensorInfo &prev = *spans[i - 1].first, &cur = *spans[i].first;
    if (cur.offset < prev.offset + prev.size)
      fail(path, "tensors '" + spans[i - 1].second + "' and '" +
                     spans[i].second + "' overlap at data bytes [" +
                     std::to_string(cur.offset - dataStart) + ", " +
                     std::to_string(prev.offset + prev.size - dataStart) + ")");
  }
}

TensorCatalog TensorCatalog::open(const std::string &dir) {
  TensorCatalog catalog;
  fs::path single = fs::path(dir) / "model.safetensors";
  fs::path index = fs::path(dir) / "model.safetensors.index.json";
  if (fs::exists(single)) {
    catalog.source_ = single.string();
    catalog.addFile(single.string());
    return catalog;
  }
  if (!fs::exists(index))
    throw InputError(dir +
                     ": no model.safetensors or model.safetensors.index.json "
                     "(use --shape-only to import from config.json alone)");
  catalog.source_ = index.string();
  auto indexText = rt::readFile(index.string(), 1u << 30);
  if (!indexText)
    throw InputError(indexText.status().message());
  json parsed = json::parse(*indexText, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded() || !parsed.is_object())
    fail(index.string(), "is not a JSON object");
  auto map = parsed.find("weight_map");
  if (map == parsed.end() || !map->is_object())
    fail(index.string(), "has no 'weight_map' object");
  std::set<std::string> shards;
  for (auto &[name, file] : map->items()) {
    if (!file.is_string())
      fail(index.string(), "weight_map entry '" + name +
                               "' must name a file, got " + describe(file));
    shards.insert(file.get<std::string>());
  }
  for (const std::string &shard : shards) {
    fs::path path = fs::path(dir) / shard;
    if (!fs::exists(path))
      fail(path.string(), "missing (listed in " + index.string() + ")");
    catalog.addFile(path.string());
  }
  for (auto &[name, file] : map->items()) {
    const TensorInfo *info = catalog.find(name);
    fs::path listed = fs::path(dir) / file.get<std::string>();
    if (!info || info->file != listed.string())
      fail(listed.string(), "does not hold tensor '" + name +
                                "' that " + index.string() + " places there");
  }
  return catalog;
}

const TensorInfo *TensorCatalog::find(const std::string &name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

bool canDecode(const std::string &dtype) {
  return dtype == "F32" || dtype == "BF16" || dtype == "F16";
}

void decodeElements(const std::string &dtype, const char *src, uint64_t count, float *dst) {
  if (dtype == "F32") {
    std::memcpy(dst, src, count * 4);
    return;
  }
  for (uint64_t i = 0; i < count; ++i) {
    uint16_t h;
    std::memcpy(&h, src + 2 * i, 2);
    dst[i] = dtype == "BF16" ? cpu::bf16ToF32(h) : cpu::f16ToF32(h);
  }
}

bool sameData(const TensorInfo &a, const TensorInfo &b) {
  if (a.dtype != b.dtype || a.shape != b.shape || a.size != b.size)
    return false;
  auto open = [](const std::string &path) {
    auto f = rt::InputFile::open(path);
    if (!f)
      throw InputError(f.status().message());
    return std::move(*f);
  };
  const rt::InputFile fa = open(a.file), fb = open(b.file);
  constexpr uint64_t kPart = uint64_t(1) << 20;
  std::vector<char> pa(kPart), pb(kPart);
  for (uint64_t done = 0; done < a.size; done += kPart) {
    const size_t n = size_t(std::min(kPart, a.size - done));
    for (auto [file, offset, part] : {std::tuple{&fa, a.offset, &pa}, {&fb, b.offset, &pb}})
      if (rt::Status st = file->readAt(offset + done, part->data(), n); !st)
        throw InputError(st.message());
    if (std::memcmp(pa.data(), pb.data(), n) != 0)
      return false;
  }
  return true;
}

} // namespace moe
