#include "comm/communicator.hpp"

namespace shardft {

namespace {
struct Completed : Request {
  void wait() override {}
  bool test() override { return true; }
};
}  // namespace

RequestPtr completed_request() { return std::make_unique<Completed>(); }

std::size_t dtype_size(DType t) {
  switch (t) {
    case DType::f32: case DType::i32: return 4;
    case DType::f64: case DType::i64: return 8;
    case DType::bf16: return 2;
    case DType::i8: case DType::u8: return 1;
  }
  return 0;
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "f32";
    case DType::f64: return "f64";
    case DType::bf16: return "bf16";
    case DType::i8: return "i8";
    case DType::u8: return "u8";
    case DType::i32: return "i32";
    case DType::i64: return "i64";
  }
  return "?";
}

}  // namespace shardft
