#include "model/linear.hpp"

#include <stdexcept>
#include <string>
#include <type_traits>

#include "kernels/bias.hpp"
#include "kernels/elementwise.hpp"
#include "kernels/fp16.hpp"
#include "kernels/kernel_scratch.hpp"
#include "kernels/rmsnorm.hpp"

namespace shardft {

namespace {
void check_bias(std::size_t bias, std::size_t out) {
  if (bias != 0 && bias != out) {
    throw std::invalid_argument("Linear: a bias of " + std::to_string(bias) + " entries for " + std::to_string(out) +
                                " outputs");
  }
}
}  // namespace

Linear::Linear(Unmanaged2<const float> weight, Unmanaged1<const float> bias, ComputeDtype dtype)
    : weight_(weight), bias_(bias), dtype_(dtype) {
  check_bias(bias.extent(0), weight.extent(0));
}

Linear::Linear(Unmanaged2<const bf16> weight, Unmanaged1<const float> bias)
    : weight_(weight), bias_(bias), dtype_(ComputeDtype::bf16) {
  check_bias(bias.extent(0), weight.extent(0));
}

bool Linear::stack(std::initializer_list<const Linear*> parts, Linear& stacked) {
  if (parts.size() == 0) return false;
  const Linear& first = **parts.begin();
  const GemmOperand& w0 = first.weight_;
  const std::size_t in = w0.extent(1);
  std::size_t rows = 0;
  int terms = 0;
  for (const Linear* p : parts) {
    const GemmOperand& w = p->weight_;
    if (p->has_bias() || p->dtype_ != first.dtype_ || w.is_bf16 != w0.is_bf16 || w.extent(1) != in) return false;
    const bool follows = w.is_bf16 ? w.b16.data() == w0.b16.data() + rows * in : w.f32.data() == w0.f32.data() + rows * in;
    if (!follows) return false;
    rows += w.extent(0);
    terms += p->num_lora_;
  }
  if (terms > kMaxLoraTerms) return false;
  Linear out = w0.is_bf16 ? Linear(Unmanaged2<const bf16>(w0.b16.data(), rows, in), {})
                          : Linear(Unmanaged2<const float>(w0.f32.data(), rows, in), {}, first.dtype_);
  std::int64_t col0 = 0;
  for (const Linear* p : parts) {
    for (int i = 0; i < p->num_lora_; ++i) {
      LoraTerm t = p->lora_[i];
      t.col0 += col0;
      out.add_lora(t);
    }
    col0 += p->out_features();
  }
  stacked = out;
  return true;
}

bool stack_linear_grads(std::initializer_list<const LinearGrads*> parts, LinearGrads& stacked) {
  stacked = LinearGrads{};
  if (parts.size() == 0) return false;
  int terms = 0;
  for (const LinearGrads* p : parts) {
    for (const LoraGrads& l : p->lora) {
      if (l.a.extent(0) == 0) continue;
      if (terms == kMaxLoraTerms) throw std::invalid_argument("stack_linear_grads: more LoRA gradients than terms");
      stacked.lora[terms++] = l;
    }
  }
  const Unmanaged2<float> g0 = (*parts.begin())->weight;
  const bool frozen = g0.extent(0) == 0, overwrite = (*parts.begin())->overwrite_weight;
  std::size_t rows = 0;
  for (const LinearGrads* p : parts) {
    if (p->bias.extent(0) > 0) return false;
    if (p->overwrite_weight != overwrite) return false;
    if ((p->weight.extent(0) == 0) != frozen) return false;
    if (frozen) continue;
    if (p->weight.extent(1) != g0.extent(1) || p->weight.data() != g0.data() + rows * g0.extent(1)) return false;
    rows += p->weight.extent(0);
  }
  if (!frozen) stacked.weight = Unmanaged2<float>(g0.data(), rows, g0.extent(1));
  stacked.overwrite_weight = overwrite;
  return true;
}

void Linear::add_lora(const LoraTerm& t) {
  if (num_lora_ == kMaxLoraTerms) {
    throw std::invalid_argument("Linear: more than " + std::to_string(kMaxLoraTerms) + " LoRA terms");
  }
  const std::size_t r = t.a.extent(0);
  if (r == 0 || t.a.extent(1) != weight_.extent(1) || t.b.extent(1) != r || t.col0 < 0 ||
      t.col0 + static_cast<std::int64_t>(t.b.extent(0)) > out_features()) {
    throw std::invalid_argument("Linear: a LoRA term whose A [r, in] and B [out, r] do not fit the layer");
  }
  lora_[num_lora_++] = t;
}

void Linear::set_lora_dropout(int i, const DropoutMask& mask) {
  if (i < 0 || i >= num_lora_) throw std::invalid_argument("Linear: dropout for LoRA term " + std::to_string(i) +
                                                           " of " + std::to_string(num_lora_));
  lora_[i].dropout = mask;
}

GemmOperand Linear::lora_input(int i, const GemmOperand& x) const {
  const DropoutMask& m = lora_[i].dropout;
  if (!m.on()) return x;
  // dropout's output in the compute dtype, as autocast hands it on; in bf16 a bf16 buffer written in the
  // mask's one pass, so the GEMMs that read it are bf16 x bf16
  if (dtype_ == ComputeDtype::bf16) {
    const auto xd16 = kernel_scratch<bf16>("lora_dropped_x_bf16", x.extent(0), x.extent(1));
    if (x.is_bf16) {
      dropout_apply(m, x.b16, xd16);
    } else {
      dropout_apply(m, x.f32, xd16, 0.f);
    }
    return Unmanaged2<const bf16>(xd16);
  }
  const auto xd = kernel_scratch<float>("lora_dropped_x", x.extent(0), x.extent(1));
  if (x.is_bf16) {
    to_f32(flat(x.b16), flat(xd));
    dropout_apply(m, Unmanaged2<const float>(xd), xd, 0.f);
  } else {
    dropout_apply(m, x.f32, xd, 0.f);
  }
  round_activation(xd, dtype_);
  return Unmanaged2<const float>(xd);
}

namespace {
// The input a kept u was made from, as LoraKept notes it
const void* first_element(const GemmOperand& x) {
  return x.is_bf16 ? static_cast<const void*>(x.b16_data()) : x.f32_data();
}
}  // namespace

GemmOperand Linear::lora_u(int i, const GemmOperand& x, const GemmOperand& xi, LoraKept* keep_u) const {
  const std::int64_t N = static_cast<std::int64_t>(xi.extent(0));
  const std::int64_t r = static_cast<std::int64_t>(lora_[i].a.extent(0));
  if (keep_u != nullptr) keep_u->input_[i] = first_element(x);
  if (dtype_ == ComputeDtype::bf16) {
    const auto u = keep_u != nullptr ? keep_u->b16_[i].mat(N, r) : kernel_scratch<bf16>("lora_u_bf16", N, r);
    gemm_mixed_bf16_out(Op::N, Op::T, 1.f, xi, lora_[i].a, u);
    return Unmanaged2<const bf16>(u);
  }
  const auto u = keep_u != nullptr ? keep_u->f32_[i].mat(N, r) : kernel_scratch<float>("lora_u", N, r);
  gemm_mixed(Op::N, Op::T, 1.f, xi, lora_[i].a, 0.f, u);
  round_activation(u, dtype_);  // lora_B reads lora_A's output as autocast hands it on
  return Unmanaged2<const float>(u);
}

GemmOperand Linear::lora_u_for_backward(int i, const GemmOperand& x, const GemmOperand& xi, LoraKept* kept_u) const {
  if (kept_u == nullptr || kept_u->input_[i] != first_element(x)) return lora_u(i, x, xi);
  kept_u->input_[i] = nullptr;  // read once: a later backward without its own forward recomputes
  const std::int64_t N = static_cast<std::int64_t>(xi.extent(0));
  const std::int64_t r = static_cast<std::int64_t>(lora_[i].a.extent(0));
  if (dtype_ == ComputeDtype::bf16) return Unmanaged2<const bf16>(kept_u->b16_[i].mat(N, r));
  return Unmanaged2<const float>(kept_u->f32_[i].mat(N, r));
}

namespace {
// y += alpha a op_b(b): an fp32 y, or a bf16 one (the sum in fp32, rounded once); y may be a block of a
// wider matrix's columns (a term of a stacked layer), written in place
void gemm_add(Op op_b, float alpha, const GemmOperand& a, const GemmOperand& b, Unmanaged2<float> y) {
  gemm_mixed(Op::N, op_b, alpha, a, b, 1.f, y);
}
void gemm_add(Op op_b, float alpha, const GemmOperand& a, const GemmOperand& b, Unmanaged2<bf16> y) {
  gemm_mixed_bf16_out(Op::N, op_b, alpha, a, b, y, 1.f);
}
void gemm_add(Op op_b, float alpha, const GemmOperand& a, const GemmOperand& b, Strided2<float> y) {
  gemm_mixed_to_columns(Op::N, op_b, alpha, a, b, 1.f, y);
}
void gemm_add(Op op_b, float alpha, const GemmOperand& a, const GemmOperand& b, Strided2<bf16> y) {
  gemm_mixed_bf16_out_to_columns(Op::N, op_b, alpha, a, b, y, 1.f);
}

// y[:, each term's columns] += s u B^T, u_of(i) giving term i's u: one GEMM per term, beta 1, writing the
// term's columns of y in place
template <class T, class UOf>
void add_lora_outputs(const LoraTerm* terms, int n, const UOf& u_of, Unmanaged2<T> y) {
  for (int i = 0; i < n; ++i) {
    const LoraTerm& t = terms[i];
    gemm_add(Op::T, t.scale, u_of(i), t.b, columns_of(y, t.col0, static_cast<std::int64_t>(t.b.extent(0))));
  }
}

// dx += du A through each term's dropout mask, du_of(i) giving term i's du. Under dropout du A goes
// through scratch first: in bf16 where dx is bf16, rounded once as lora_A's backward under autocast hands
// it to dropout's backward (half the bytes of an fp32 buffer, written and read again); an fp32 dx, fp32.
template <class T, class DuOf>
void add_lora_input_grads(const LoraTerm* terms, int n, const DuOf& du_of, Unmanaged2<T> dx) {
  for (int i = 0; i < n; ++i) {
    const LoraTerm& t = terms[i];
    if (!t.dropout.on()) {
      gemm_add(Op::N, 1.f, du_of(i), t.a, dx);
      continue;
    }
    if constexpr (std::is_same_v<T, bf16>) {
      const auto dxd = kernel_scratch<bf16>("lora_dropped_dx_bf16", dx.extent(0), dx.extent(1));
      gemm_mixed_bf16_out(Op::N, Op::N, 1.f, du_of(i), t.a, dxd);
      dropout_apply(t.dropout, Unmanaged2<const bf16>(dxd), dx, 1.f);
    } else {
      const auto dxd = kernel_scratch<float>("lora_dropped_dx", dx.extent(0), dx.extent(1));
      gemm_mixed(Op::N, Op::N, 1.f, du_of(i), t.a, 0.f, dxd);
      dropout_apply(t.dropout, Unmanaged2<const float>(dxd), dx, 1.f);
    }
  }
}
}  // namespace

template <class T>
void Linear::lora_forward(const GemmOperand& x, Unmanaged2<T> y, LoraKept* keep_u) const {
  add_lora_outputs(lora_, num_lora_, [&](int i) { return lora_u(i, x, lora_input(i, x), keep_u); }, y);
}

LoraTermGrad Linear::lora_term_grad(int i, const LinearGrad& g, const char* scratch) const {
  const std::int64_t rows = static_cast<std::int64_t>(g.gemm.extent(0));
  const std::int64_t out = static_cast<std::int64_t>(lora_[i].b.extent(0));
  const std::int64_t r = static_cast<std::int64_t>(lora_[i].a.extent(0));
  const std::string du_name = scratch + ("_lora_du" + std::to_string(i));
  LoraTermGrad t;
  // A term on some of the layer's columns reads them in place (the GEMMs take dy's row stride).
  t.dy = out == out_features() ? g.gemm : GemmOperand::columns(g.gemm, lora_[i].col0, out);
  if (dtype_ == ComputeDtype::bf16) {
    const auto du = kernel_scratch<bf16>(du_name.c_str(), rows, r);
    gemm_mixed_bf16_out(Op::N, Op::N, lora_[i].scale, t.dy, lora_[i].b, du);
    t.du = Unmanaged2<const bf16>(du);
  } else {
    const auto du = kernel_scratch<float>(du_name.c_str(), rows, r);
    gemm_mixed(Op::N, Op::N, lora_[i].scale, t.dy, lora_[i].b, 0.f, du);
    t.du = Unmanaged2<const float>(du);
  }
  return t;
}

LoraTermGrad Linear::lora_term_grad(int i, const LinearGrad& g) const {
  if (i < g.lora_terms) return g.lora[i];
  return lora_term_grad(i, g, "linear_dy");
}

LinearGrad Linear::with_lora_operands(LinearGrad g, const char* scratch) const {
  for (int i = 0; i < num_lora_; ++i) g.lora[i] = lora_term_grad(i, g, scratch);
  g.lora_terms = num_lora_;
  return g;
}

void Linear::forward(Unmanaged2<float> x, Unmanaged2<float> y) const {
  round_activation(x, dtype_);
  forward(GemmOperand(Unmanaged2<const float>(x)), y);
}

void Linear::forward(const GemmOperand& x, Unmanaged2<float> y, LoraKept* keep_u) const {
  gemm_mixed(Op::N, Op::T, 1.f, x, weight_, 0.f, y);
  if (has_bias()) bias_forward(y, bias_);
  if (num_lora_ > 0 && dtype_ == ComputeDtype::bf16) round_activation(y, dtype_);  // as forward_bf16 rounds it
  lora_forward(x, y, keep_u);
}

void Linear::forward_add(const GemmOperand& x, Unmanaged2<float> y, LoraKept* keep_u) const {
  gemm_mixed(Op::N, Op::T, 1.f, x, weight_, 1.f, y);
  if (has_bias()) bias_forward(y, bias_);
  if (num_lora_ > 0 && dtype_ == ComputeDtype::bf16) round_activation(y, dtype_);  // as a bf16 stream rounds it
  lora_forward(x, y, keep_u);
}

void Linear::forward_add(const GemmOperand& x, const Residual& y, LoraKept* keep_u) const {
  if (!y.is_bf16) return forward_add(x, y.f32, keep_u);
  if (!has_bias()) {
    gemm_mixed_bf16_out(Op::N, Op::T, 1.f, x, weight_, y.b16, 1.f);
    lora_forward(x, y.b16, keep_u);
    return;
  }
  const auto wide = kernel_scratch<float>("residual_stream_f32", y.rows(), y.cols());
  to_f32(flat(Unmanaged2<const bf16>(y.b16)), flat(wide));
  forward_add(x, wide, keep_u);
  to_bf16(flat(Unmanaged2<const float>(wide)), flat(y.b16));
}

LinearGrad Linear::grad_operand(Unmanaged2<const float> dy, const char* scratch_name) const {
  if (dtype_ != ComputeDtype::bf16) return with_lora_operands({dy, dy}, scratch_name);
  const auto rounded = kernel_scratch<bf16>(scratch_name, dy.extent(0), dy.extent(1));
  to_bf16(flat(dy), flat(rounded));
  return with_lora_operands({dy, Unmanaged2<const bf16>(rounded)}, scratch_name);
}

LinearGrad Linear::grad_operand(Unmanaged2<const float> dy, Unmanaged2<const bf16> rounded,
                                const char* scratch_name) const {
  if (dtype_ != ComputeDtype::bf16 || rounded.extent(0) == 0) return grad_operand(dy, scratch_name);
  if (rounded.extent(0) != dy.extent(0) || rounded.extent(1) != dy.extent(1)) {
    throw std::invalid_argument("Linear::grad_operand: the rounded gradient must have dy's shape");
  }
  return with_lora_operands({dy, rounded}, scratch_name);
}

void Linear::forward_bf16(const GemmOperand& x, Unmanaged2<bf16> y, LoraKept* keep_u) const {
  if (has_bias()) throw std::logic_error("Linear::forward_bf16: a layer with a bias writes fp32");
  gemm_mixed_bf16_out(Op::N, Op::T, 1.f, x, weight_, y);
  lora_forward(x, y, keep_u);
}

void Linear::backward_weight(const GemmOperand& x, const LinearGrad& g, const LinearGrads& grads, float dw_beta,
                             LoraKept* kept_u) const {
  const Unmanaged2<const float> dy = g.f32;
  const float beta = grads.overwrite_weight ? 0.f : dw_beta;  // beta 0: the stale values are not read
  if (grads.weight.extent(0) > 0) gemm_mixed(Op::T, Op::N, 1.f, g.gemm, x, beta, grads.weight);
  if (bias_.extent(0) > 0 && grads.bias.extent(0) > 0) bias_backward(dy, grads.bias);
  for (int i = 0; i < num_lora_; ++i) {
    const LoraTermGrad d = lora_term_grad(i, g);
    const GemmOperand xi = lora_input(i, x);
    const LoraGrads& gi = grads.lora[i];
    gemm_mixed(Op::T, Op::N, lora_[i].scale, d.dy, lora_u_for_backward(i, x, xi, kept_u), gi.overwrite_b ? 0.f : 1.f,
               gi.b);
    gemm_mixed(Op::T, Op::N, 1.f, d.du, xi, gi.overwrite_a ? 0.f : 1.f, gi.a);
  }
}

template <class T>
void Linear::lora_backward_input(const LinearGrad& g, Unmanaged2<T> dx) const {
  add_lora_input_grads(lora_, num_lora_, [&](int i) { return lora_term_grad(i, g).du; }, dx);
}

void Linear::backward_input(const LinearGrad& g, Unmanaged2<float> dx, float dx_beta) const {
  gemm_mixed(Op::N, Op::N, 1.f, g.gemm, weight_, dx_beta, dx);
  lora_backward_input(g, dx);
  if (dtype_ == ComputeDtype::fp16) round_to_fp16(flat(Unmanaged2<const float>(dx)), flat(dx));
}

void Linear::backward_input_bf16(const LinearGrad& g, Unmanaged2<bf16> dx) const {
  if (has_bias()) throw std::logic_error("Linear::backward_input_bf16: a layer with a bias writes fp32");
  gemm_mixed_bf16_out(Op::N, Op::N, 1.f, g.gemm, weight_, dx);
  lora_backward_input(g, dx);
}

void Linear::backward(const GemmOperand& x, Unmanaged2<const float> dy, Unmanaged2<float> dx, float dx_beta,
                      const LinearGrads& grads) const {
  const LinearGrad g = grad_operand(dy);
  backward_weight(x, g, grads);
  backward_input(g, dx, dx_beta);
}

Unmanaged2<float> LinearInput::staging(std::int64_t rows, std::int64_t cols, ComputeDtype dtype,
                                       GrowingBuffer& scratch) {
  return dtype == ComputeDtype::bf16 ? scratch.mat(rows, cols) : f32_.mat(rows, cols);
}

GemmOperand LinearInput::keep(Unmanaged2<float> staged, ComputeDtype dtype) {
  if (dtype == ComputeDtype::fp16) round_to_fp16(flat(Unmanaged2<const float>(staged)), flat(staged));
  if (dtype != ComputeDtype::bf16) return Unmanaged2<const float>(staged);
  const auto kept = bf16_.mat(staged.extent(0), staged.extent(1));
  to_bf16(flat(Unmanaged2<const float>(staged)), flat(kept));
  return Unmanaged2<const bf16>(kept);
}

GemmOperand LinearInput::keep_rmsnorm(Unmanaged2<const float> x, const NormWeight& w, float eps,
                                      Unmanaged1<float> rstd, ComputeDtype dtype, GrowingBuffer& scratch) {
  const std::int64_t rows = static_cast<std::int64_t>(x.extent(0)), cols = static_cast<std::int64_t>(x.extent(1));
  if (dtype == ComputeDtype::bf16) {
    const auto kept = bf16_.mat(rows, cols);
    rmsnorm_forward(x, w, eps, kept, rstd);
    return Unmanaged2<const bf16>(kept);
  }
  const auto staged = staging(rows, cols, dtype, scratch);
  rmsnorm_forward(x, w, eps, staged, rstd);
  return keep(staged, dtype);
}

GemmOperand LinearInput::keep_rmsnorm(const StreamKeep& keep, const Residual& x, const NormWeight& w, float eps,
                                      Unmanaged1<float> rstd, ComputeDtype dtype, GrowingBuffer& scratch) {
  const std::int64_t rows = x.rows(), cols = x.cols();
  if (x.is_bf16) {  // a bf16 stream (bf16 compute): read as it is, copied into the kept buffer if asked
    if (dtype != ComputeDtype::bf16 || (keep.kept != nullptr && keep.how != Kept::bf16)) {
      throw std::logic_error("keep_rmsnorm: a bf16 residual stream outside a bf16 step that keeps it as bf16");
    }
    const auto h = bf16_.mat(rows, cols);
    rmsnorm_forward_keeping(Unmanaged2<const bf16>(x.b16),
                            keep.kept != nullptr ? keep.kept->bf16_output(rows, cols) : Unmanaged2<bf16>(), w, eps, h,
                            rstd);
    return Unmanaged2<const bf16>(h);
  }
  if (keep.kept == nullptr) return keep_rmsnorm(x.f32, w, eps, rstd, dtype, scratch);
  if (keep.stream.data() != x.data()) throw std::logic_error("keep_rmsnorm: the stream to keep is not the norm's input");
  keep.kept->keep(keep.stream.f32, keep.how);
  return keep_rmsnorm(x.f32, w, eps, rstd, dtype, scratch);
}

GemmOperand LinearInput::kept(std::int64_t rows, std::int64_t cols, ComputeDtype dtype) {
  if (dtype != ComputeDtype::bf16) return Unmanaged2<const float>(f32_.mat(rows, cols));
  return Unmanaged2<const bf16>(bf16_.mat(rows, cols));
}

Unmanaged2<const float> LinearInput::values(std::int64_t rows, std::int64_t cols, ComputeDtype dtype,
                                            GrowingBuffer& scratch) {
  if (dtype != ComputeDtype::bf16) return f32_.mat(rows, cols);
  const auto out = scratch.mat(rows, cols);
  to_f32(flat(Unmanaged2<const bf16>(bf16_.mat(rows, cols))), flat(out));
  return out;
}

Unmanaged2<float> LinearInput::reusable(std::int64_t rows, std::int64_t cols, ComputeDtype dtype,
                                        GrowingBuffer& scratch) {
  return dtype == ComputeDtype::bf16 ? scratch.mat(rows, cols) : f32_.mat(rows, cols);
}

void rmsnorm_backward_kept(const GemmOperand& x, const NormWeight& w, Unmanaged1<const float> rstd,
                           const GemmOperand& dy, Unmanaged2<float> dx, const GradWrite& dw,
                           Unmanaged2<bf16> dx_rounded) {
  auto with_dy = [&](auto xv) {
    if (dy.is_bf16) {
      rmsnorm_backward(xv, w, rstd, dy.b16, dx, dw.values, dx_rounded, dw.overwrite);
    } else {
      rmsnorm_backward(xv, w, rstd, dy.f32, dx, dw.values, dx_rounded, dw.overwrite);
    }
  };
  if (x.is_bf16) {
    with_dy(x.b16);
  } else {
    with_dy(x.f32);
  }
}

bool dgrad_writes_bf16(const Linear& layer) { return layer.dtype() == ComputeDtype::bf16 && !layer.has_bias(); }

GemmOperand norm_output_grad(const Linear& layer, const LinearGrad& dy, NormOutputGrad& dh) {
  const std::int64_t rows = static_cast<std::int64_t>(dy.gemm.extent(0)), cols = layer.in_features();
  if (dgrad_writes_bf16(layer)) {
    const auto out = dh.b16.mat(rows, cols);
    layer.backward_input_bf16(dy, out);
    return Unmanaged2<const bf16>(out);
  }
  const auto out = dh.f32.mat(rows, cols);
  layer.backward_input(dy, out, 0.f);
  return Unmanaged2<const float>(out);
}

Kept kept_as(ComputeDtype dtype, bool every_layer) {
  if (dtype == ComputeDtype::fp16) return Kept::fp16_values;
  if (dtype != ComputeDtype::bf16) return Kept::fp32;
  return every_layer ? Kept::bf16 : Kept::bf16_values;
}

Unmanaged2<float> KeptActivation::staging(std::int64_t rows, std::int64_t cols, Kept how, GrowingBuffer& scratch,
                                          std::int64_t offset) {
  return how == Kept::bf16 ? scratch.mat_at(offset, rows, cols) : f32_.mat(rows, cols);
}

void KeptActivation::keep(Unmanaged2<float> staged, Kept how) {
  if (how == Kept::fp16_values) round_to_fp16(flat(Unmanaged2<const float>(staged)), flat(staged));
  if (how == Kept::bf16_values) round_to_bf16(flat(Unmanaged2<const float>(staged)), flat(staged));
  if (how == Kept::bf16) round_and_copy_to_bf16(flat(staged), flat(bf16_.mat(staged.extent(0), staged.extent(1))));
}

Unmanaged2<float> KeptActivation::values(std::int64_t rows, std::int64_t cols, Kept how, GrowingBuffer& scratch,
                                         std::int64_t offset) {
  if (how != Kept::bf16) return f32_.mat(rows, cols);
  const auto out = scratch.mat_at(offset, rows, cols);
  to_f32(flat(Unmanaged2<const bf16>(bf16_.mat(rows, cols))), flat(out));
  return out;
}

void copy_stream(const Residual& x, const Residual& out) {
  if (out.data() == x.data()) return;
  if (x.is_bf16 != out.is_bf16) throw std::logic_error("copy_stream: an fp32 and a bf16 residual stream");
  if (x.is_bf16) {
    Kokkos::deep_copy(ExecSpace(), out.b16, x.b16);
  } else {
    Kokkos::deep_copy(ExecSpace(), out.f32, x.f32);
  }
}

void round_activation(Unmanaged2<float> x, ComputeDtype dtype) {
  if (dtype == ComputeDtype::bf16) round_to_bf16(flat(Unmanaged2<const float>(x)), flat(x));
  if (dtype == ComputeDtype::fp16) round_to_fp16(flat(Unmanaged2<const float>(x)), flat(x));
}

namespace {
GemmOperand matrix_operand(ParamSource& params, const ParamLayout& layout, int param) {
  const Unmanaged2<const bf16> w16 = weight_matrix_bf16(params, layout, param);
  if (w16.extent(0) > 0) return w16;
  return weight_matrix(params, layout, param);
}
}  // namespace

NormWeight norm_weight_of(ParamSource& params, int param) {
  const Unmanaged1<const bf16> w16 = params.weight_bf16(param);
  if (w16.extent(0) > 0) return w16;
  return params.weight(param);
}

LoraTerm lora_term_of(ParamSource& params, const ParamLayout& layout, const LoraParams& lora, std::int64_t col0) {
  return {matrix_operand(params, layout, lora.a), matrix_operand(params, layout, lora.b),
          static_cast<float>(layout.lora().scale()), col0, {}};
}

LoraGrads lora_grads_of(GradSink& grads, const ParamLayout& layout, const LoraParams& lora) {
  LoraGrads g;
  g.a = grad_matrix_to_write(grads, layout, lora.a, &g.overwrite_a);
  g.b = grad_matrix_to_write(grads, layout, lora.b, &g.overwrite_b);
  return g;
}

Linear linear_of(ParamSource& params, const ParamLayout& layout, int weight, int bias, ComputeDtype dtype,
                 const LoraParams& lora) {
  const Unmanaged1<const float> b = bias >= 0 ? params.weight(bias) : Unmanaged1<const float>();
  const Unmanaged2<const bf16> w16 = weight_matrix_bf16(params, layout, weight);
  Linear out = w16.extent(0) > 0 ? Linear(w16, b) : Linear(weight_matrix(params, layout, weight), b, dtype);
  if (lora.on()) out.add_lora(lora_term_of(params, layout, lora));
  return out;
}

LinearGrads linear_grads_of(GradSink& grads, const ParamLayout& layout, int weight, int bias, const LoraParams& lora) {
  LinearGrads g{{}, bias >= 0 ? grads.grad(bias) : Unmanaged1<float>(), {}};
  g.weight = grad_matrix_to_write(grads, layout, weight, &g.overwrite_weight);
  if (lora.on()) g.lora[0] = lora_grads_of(grads, layout, lora);
  return g;
}

}  // namespace shardft
