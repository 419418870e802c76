// An in-memory tensor: name, dtype, shape and little-endian row-major bytes, as stored in
// safetensors / .npy files. The one currency between the file formats, the golden-set
// generator and the checker.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "ropecheck/core/dtype.hpp"
#include "ropecheck/core/input_error.hpp"

namespace ropecheck::io {

// u8 / u32 / e4m3fn / e5m2 carry the quantized stores (golden/GOLDEN_FORMAT.md, "Quantized stores"): packed
// GGML blocks and FP8 codes as bytes, MLX's packed words as uint32; e4m3fn / e5m2 are FP8 bit patterns
// (safetensors F8_E4M3 / F8_E5M2; .npy has no FP8 type, so they are written and read back as u8 there).
enum class TensorDType { f64, f32, f16, bf16, i64, i32, u8, u32, e4m3fn, e5m2 };

// The two tensor files a golden set can be written as (tensor_file_writer.hpp).
enum class FileFormat { safetensors, npz };

std::size_t dtype_size(TensorDType t);
std::string_view to_string(TensorDType t);        // "f64", "f32", "f16", "bf16", "i64", "i32", "u8", "u32", "e4m3fn", "e5m2"
std::optional<TensorDType> parse_tensor_dtype(std::string_view s);
TensorDType tensor_dtype(DType t);                 // the storage type of a computation dtype
std::string_view safetensors_name(TensorDType t);  // "F64", "F32", "F16", "BF16", "I64", "I32", "U8", "U32", "F8_E4M3", "F8_E5M2"
std::optional<TensorDType> parse_safetensors_dtype(std::string_view s);

struct Tensor {
  std::string name;
  TensorDType dtype = TensorDType::f32;
  std::vector<std::int64_t> shape;
  std::vector<std::uint8_t> data;  // little-endian, row-major, size = numel * dtype_size

  std::int64_t numel() const;  // product of shape (1 for a scalar)
  // Element i as a double (exact for every dtype here except i64 beyond 2^53; an FP8 code decoded).
  double value(std::int64_t i) const;
  std::int64_t int_value(std::int64_t i) const;  // i64 / i32 / u8 / u32 only

  friend bool operator==(const Tensor&, const Tensor&) = default;
};

// Throws InputError unless every dimension is >= 0, the element count and byte count fit in
// an int64 (checked multiplication) and data.size() == numel * dtype_size. The message names
// the tensor.
void validate(const Tensor& t);

// Builders (copy the values in, encode little-endian).
Tensor make_f64(std::string name, std::vector<std::int64_t> shape, const std::vector<double>& v);
Tensor make_f32(std::string name, std::vector<std::int64_t> shape, const std::vector<float>& v);
Tensor make_bits16(std::string name, TensorDType f16_or_bf16, std::vector<std::int64_t> shape,
                   const std::vector<std::uint16_t>& bits);
Tensor make_i64(std::string name, std::vector<std::int64_t> shape, const std::vector<std::int64_t>& v);
Tensor make_i32(std::string name, std::vector<std::int64_t> shape, const std::vector<std::int32_t>& v);
// Bytes as u8, e4m3fn or e5m2 (FP8 bit patterns); words as u32.
Tensor make_bytes(std::string name, TensorDType u8_or_fp8, std::vector<std::int64_t> shape,
                  const std::vector<std::uint8_t>& bytes);
Tensor make_u32(std::string name, std::vector<std::int64_t> shape, const std::vector<std::uint32_t>& v);
// Whether t is a byte type (u8, e4m3fn, e5m2): what .npy stores as '|u1'.
bool is_byte_dtype(TensorDType t);
// Every element zero (all bytes 0): a buffer to fill in place (outputs being computed).
Tensor make_zeros(std::string name, TensorDType dt, std::vector<std::int64_t> shape);

std::string shape_string(const std::vector<std::int64_t>& shape);  // "[131072, 64]"
// shape_string() for messages: at most 16 dimensions, then "... (N dims)".
std::string shape_for_message(const std::vector<std::int64_t>& shape);

}  // namespace ropecheck::io
