//===- Safetensors.h - read safetensors headers -----------------*- C++ -*-===//
//
// Reads the JSON header of a safetensors file (or of every shard named by a
// model.safetensors.index.json) and checks it: offsets inside the file, no
// overlaps, sizes that match shape and dtype. Only headers are read; tensor
// data stays on disk. Plain C++ (no MLIR), so the weight packer can use it too.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_COMPILER_IMPORT_SAFETENSORS_H
#define MOE_COMPILER_IMPORT_SAFETENSORS_H

#include <cstdint>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace moe {

/// A bad input file; what() is one line that names the file and the problem.
struct InputError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct PackedInt4;

/// One tensor of a checkpoint.
struct TensorInfo {
  std::string file;           ///< path of the file that holds it
  std::string dtype;          ///< safetensors dtype: "F32", "BF16", ...
  std::vector<int64_t> shape;
  uint64_t offset = 0;        ///< absolute byte offset of the data in `file`
  uint64_t size = 0;          ///< bytes
  /// A view of some columns of a matrix (a tensor-parallel slice): bytes
  /// from one row's start to the next's in `file`; 0: the rows are
  /// contiguous. Each of shape[0] rows is size / shape[0] bytes.
  uint64_t rowPitch = 0;
  /// A GPTQ layer's view (dtype kPackedInt4, PackedInt4.h): the tensors it
  /// reads; null for a tensor of the file.
  std::shared_ptr<const PackedInt4> packed;
};

/// Bytes per element of a safetensors dtype, or 0 when the dtype is unknown.
unsigned dtypeSize(const std::string &dtype);

/// True for the dtypes decodeElements reads: "F32", "BF16", "F16".
bool canDecode(const std::string &dtype);

/// `count` elements of safetensors dtype `dtype` (canDecode) at src as f32.
void decodeElements(const std::string &dtype, const char *src, uint64_t count, float *dst);

/// "[2, 3]".
std::string shapeString(const std::vector<int64_t> &shape);

/// Whether two tensors hold the same dtype, shape and bytes (their data read
/// in parts). Throws InputError when a file cannot be read.
bool sameData(const TensorInfo &a, const TensorInfo &b);

/// All tensors of a checkpoint, by name.
class TensorCatalog {
public:
  /// Reads `dir`/model.safetensors, or every shard of
  /// `dir`/model.safetensors.index.json. Throws InputError.
  static TensorCatalog open(const std::string &dir);

  /// Adds the tensors of one safetensors file. Throws InputError.
  void addFile(const std::string &path);

  const TensorInfo *find(const std::string &name) const;
  /// Adds or replaces tensor `name` (a view standing for others).
  void insert(const std::string &name, TensorInfo info) { tensors_[name] = std::move(info); }
  /// Removes tensor `name` if present (tensors a view reads).
  void erase(const std::string &name) { tensors_.erase(name); }
  const std::map<std::string, TensorInfo> &tensors() const { return tensors_; }
  /// The file a missing tensor should have been in, for messages.
  const std::string &source() const { return source_; }

private:
  std::map<std::string, TensorInfo> tensors_;
  std::string source_;
};

} // namespace moe

#endif
