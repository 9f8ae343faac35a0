#include "io/bnb4_weights.hpp"

#include <array>
#include <cmath>
#include <set>

#include <nlohmann/json.hpp>

namespace shardft {
namespace {

constexpr const char* kQuantState = ".quant_state.bitsandbytes__nf4";
// Longest first: ".absmax" is also the tail of ".nested_absmax".
const char* const kCompanions[] = {".quant_state.bitsandbytes__nf4", ".quant_state.bitsandbytes__fp4",
                                   ".nested_quant_map", ".nested_absmax", ".quant_map", ".absmax"};

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

class Checker {
 public:
  Checker(const std::string& where, const std::set<std::string>& names, const TensorFileLookup& file_of)
      : where_(where), names_(names), file_of_(file_of) {}

  [[noreturn]] void fail(const std::string& tensor, const std::string& why) const {
    throw FormatError(where_ + ": tensor '" + tensor + "': " + why);
  }

  // The companion's reader after checking it exists with this dtype and element count.
  SafetensorsReader& expect(const std::string& weight, const std::string& key, TensorDtype dtype, std::int64_t numel) {
    const std::string name = weight + "." + key;
    if (!names_.count(name)) {
      fail(weight, "a bitsandbytes 4-bit weight (it has '" + weight + kQuantState + "') needs its companion '" +
                       name + "', which is missing");
    }
    return check(name, dtype, numel);
  }

  SafetensorsReader& check(const std::string& name, TensorDtype dtype, std::int64_t numel) const {
    SafetensorsReader& r = file_of_(name);
    const SafetensorsReader::Info& info = r.info(name);
    if (info.dtype != dtype || info.numel != numel) {
      fail(name, std::string("is ") + dtype_tag(info.dtype) + " " + shape_text(info.shape) + ", expected " +
                     dtype_tag(dtype) + " with " + std::to_string(numel) + " elements");
    }
    return r;
  }

  template <std::size_t N>
  void expect_values(const std::string& weight, const std::string& key, const std::array<float, N>& want,
                     const std::string& what) {
    std::vector<float> got(N);
    expect(weight, key, TensorDtype::F32, N).read(weight + "." + key, 0, N, got.data());
    for (std::size_t i = 0; i < N; ++i) {
      if (got[i] != want[i]) {
        fail(weight + "." + key, "entry " + std::to_string(i) + " is " + std::to_string(got[i]) + ", expected " +
                                     what + "'s " + std::to_string(want[i]));
      }
    }
  }

 private:
  std::string where_;
  const std::set<std::string>& names_;
  const TensorFileLookup& file_of_;
};

Bnb4State parse_state(const Checker& c, const std::string& name, const std::vector<std::uint8_t>& bytes) {
  nlohmann::json j = nlohmann::json::parse(bytes.begin(), bytes.end(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) c.fail(name, "is not the UTF-8 bytes of a JSON object");
  auto integer = [&](const char* key) {
    if (!j.contains(key) || !j[key].is_number_integer()) c.fail(name, std::string("no integer '") + key + "'");
    return j[key].get<long long>();
  };
  if (!j.contains("quant_type") || j["quant_type"] != "nf4") {
    c.fail(name, "quant_type " + (j.contains("quant_type") ? j["quant_type"].dump() : "missing") +
                     "; shardft reads bitsandbytes' nf4 only");
  }
  if (integer("blocksize") != kNf4Block) {
    c.fail(name, "blocksize " + std::to_string(integer("blocksize")) + "; shardft's NF4 uses 64 (bitsandbytes' default)");
  }
  if (!j.contains("nested_offset") || !j.contains("nested_blocksize")) {
    c.fail(name, "no nested_offset / nested_blocksize: saved without double quantization "
                 "(bnb_4bit_use_double_quant: false); shardft reads NF4 with double-quantized absmax only");
  }
  if (integer("nested_blocksize") != kNf4AbsmaxBlock) {
    c.fail(name, "nested_blocksize " + std::to_string(integer("nested_blocksize")) + "; expected 256");
  }
  if (!j["nested_offset"].is_number() || !std::isfinite(j["nested_offset"].get<double>())) {
    c.fail(name, "nested_offset " + j["nested_offset"].dump() + " is not a finite number");
  }
  Bnb4State s;
  s.offset = static_cast<float>(j["nested_offset"].get<double>());  // an fp32 value written as a double
  s.dtype = j.contains("dtype") && j["dtype"].is_string() ? j["dtype"].get<std::string>() : "";
  if (!j.contains("shape") || !j["shape"].is_array() || j["shape"].empty()) c.fail(name, "no shape array");
  s.numel = 1;
  for (const auto& d : j["shape"]) {
    if (!d.is_number_integer() || d.get<long long>() < 1 || d.get<long long>() > (1LL << 40)) {
      c.fail(name, "shape " + j["shape"].dump() + " is not a list of positive integers");
    }
    s.shape.push_back(d.get<std::int64_t>());
    s.numel *= s.shape.back();
    if (s.numel > (1LL << 40)) c.fail(name, "shape " + j["shape"].dump() + " is too large");
  }
  return s;
}

}  // namespace

std::string bnb4_weight_of(const std::string& tensor) {
  for (const char* tail : kCompanions) {
    if (ends_with(tensor, tail)) return tensor.substr(0, tensor.size() - std::string(tail).size());
  }
  return "";
}

std::map<std::string, Bnb4State> find_bnb4_weights(const std::vector<std::string>& names,
                                                   const TensorFileLookup& file_of, const std::string& where) {
  const std::set<std::string> all(names.begin(), names.end());
  Checker c(where, all, file_of);
  std::map<std::string, Bnb4State> out;
  for (const std::string& name : names) {  // first, so that its companions are not called orphans
    if (ends_with(name, ".quant_state.bitsandbytes__fp4")) {
      c.fail(name, "an FP4 weight (bnb_4bit_quant_type: fp4); shardft reads bitsandbytes' nf4 only");
    }
  }
  for (const std::string& name : names) {
    const std::string weight = bnb4_weight_of(name);
    if (!weight.empty() && !all.count(weight + kQuantState)) {
      c.fail(name, "a bitsandbytes 4-bit companion whose quant_state '" + weight + kQuantState + "' is missing");
    }
    if (weight.empty() || !ends_with(name, kQuantState)) continue;
    if (!all.count(weight)) c.fail(name, "a quant_state whose weight '" + weight + "' is missing");
    Bnb4State s = parse_state(c, name, file_of(name).read_bytes(name));
    c.check(weight, TensorDtype::U8, nf4_packed_bytes(s.numel));
    c.expect(weight, "absmax", TensorDtype::U8, nf4_blocks(s.numel));
    c.expect(weight, "nested_absmax", TensorDtype::F32, nf4_absmax_blocks(s.numel));
    c.expect_values(weight, "quant_map", nf4_code(), "NF4's code book");
    c.expect_values(weight, "nested_quant_map", dynamic_map_signed(), "bitsandbytes' signed dynamic map");
    std::vector<float> scales(static_cast<std::size_t>(nf4_absmax_blocks(s.numel)));
    file_of(weight + ".nested_absmax").read(weight + ".nested_absmax", 0, scales.size(), scales.data());
    for (std::size_t i = 0; i < scales.size(); ++i) {
      if (!std::isfinite(scales[i])) c.fail(weight + ".nested_absmax", "entry " + std::to_string(i) + " is not finite");
    }
    out.emplace(weight, std::move(s));
  }
  // Any other byte tensor would be read as if it were weights: a 4-bit weight whose quant_state is gone.
  for (const std::string& name : names) {
    if (out.count(name) || !bnb4_weight_of(name).empty() || file_of(name).info(name).dtype != TensorDtype::U8) continue;
    c.fail(name, "is U8 with no '" + name + kQuantState + "': a bitsandbytes 4-bit weight needs its quant_state "
                 "(and absmax, quant_map, nested_absmax, nested_quant_map)");
  }
  return out;
}

Nf4Tensor read_bnb4_weight(const std::string& weight, const Bnb4State& state, const TensorFileLookup& file_of) {
  Nf4Tensor q;
  q.shape = state.shape;
  q.numel = state.numel;
  q.offset = state.offset;
  q.packed = View1<std::uint8_t>("bnb4_packed", nf4_packed_bytes(q.numel));
  q.absmax_q = View1<std::uint8_t>("bnb4_absmax_q", nf4_blocks(q.numel));
  q.absmax2 = View1<float>("bnb4_absmax2", nf4_absmax_blocks(q.numel));
  auto to_device = [](const std::vector<std::uint8_t>& bytes, const View1<std::uint8_t>& dst) {
    Kokkos::deep_copy(dst, Kokkos::View<const std::uint8_t*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(
                               bytes.data(), bytes.size()));
  };
  to_device(file_of(weight).read_bytes(weight), q.packed);
  to_device(file_of(weight + ".absmax").read_bytes(weight + ".absmax"), q.absmax_q);
  auto scales = Kokkos::create_mirror_view(q.absmax2);
  file_of(weight + ".nested_absmax").read(weight + ".nested_absmax", 0, q.absmax2.extent(0), scales.data());
  Kokkos::deep_copy(q.absmax2, scales);
  return q;
}

}  // namespace shardft
