#pragma once
// A linear layer y = x W^T (+ b), W [out, in] row-major as HF stores it: every matmul of the decoder
// with a weight goes through it, and so does the compute dtype.
//
// bf16 compute: the weights arrive rounded (ParamSource), as bf16 storage where the source keeps them so
// (the sharding engine: half the bytes) or as bf16 values in fp32 buffers. A layer's input is rounded
// once and kept as the GEMMs read it: the blocks keep their layers' inputs for backward in a
// LinearInput, which in bf16 holds them as bf16 (half the bytes; backward's dW = dy^T x sees exactly
// the x forward multiplied), and a plain fp32 input (the LM head's) is rounded in place. Every GEMM
// accumulates in fp32 (kernels/gemm.hpp). The other activations backward reads again (attention's q, k,
// v, SwiGLU's gate/up, the residual stream between blocks and layers) are rounded once where they are
// made and forward goes on with the rounded values, as under PyTorch's bf16 autocast: KeptActivation.
// This is the only place the model rounds to bf16.
//
// fp16 compute is emulated the same way in fp32 buffers (kernels/fp16.hpp): weights arrive rounded to fp16,
// layer inputs and kept activations are rounded to fp16 in place, and so is every activation gradient a
// layer hands back (backward_input's dx), as fp16 autocast's backward makes them: that is where a gradient
// overflows (above 65504) or underflows, which the trainer's loss scale (train/loss_scaler.hpp) is for.
#include <initializer_list>

#include "kernels/dropout_mask.hpp"
#include "kernels/gemm.hpp"
#include "kernels/rmsnorm.hpp"
#include "kernels/types.hpp"
#include "model/compute_dtype.hpp"
#include "model/growing_buffer.hpp"
#include "model/param_layout.hpp"
#include "model/param_source.hpp"

namespace shardft {


// The residual stream [tokens, hidden] as the blocks read and update it: fp32 (rounded in place by the norm
// that reads it, where the compute dtype rounds), or in a bf16 step that keeps every layer bf16 itself:
// the residual GEMMs add their branch into it in fp32 and round the sum once (gemm_mixed_bf16_out, beta
// 1), the values the norm's rounding of an fp32 stream gives, in half the bytes.
struct Residual {
  Residual() = default;
  Residual(Unmanaged2<float> v) : f32(v) {}                   // NOLINT: implicit, like the view
  Residual(Unmanaged2<bf16> v) : b16(v), is_bf16(true) {}    // NOLINT
  std::int64_t rows() const { return static_cast<std::int64_t>(is_bf16 ? b16.extent(0) : f32.extent(0)); }
  std::int64_t cols() const { return static_cast<std::int64_t>(is_bf16 ? b16.extent(1) : f32.extent(1)); }
  const void* data() const { return is_bf16 ? static_cast<const void*>(b16.data()) : f32.data(); }
  bool empty() const { return rows() == 0; }

  Unmanaged2<float> f32;
  Unmanaged2<bf16> b16;
  bool is_bf16 = false;
};

// LoRA's term (PEFT's lora_A / lora_B) on the output columns [col0, col0 + out) of a linear layer:
//   y[:, cols] += s * (x A^T) B^T,  A [r, in], B [out, r], s = lora_alpha / r (or / sqrt(r), rsLoRA)
// Backward adds dB += s dy^T u and dA += du^T x, and dx += du A, where du = s dy B and u = x A^T is
// forward's, kept (LoraKept: r columns), or recomputed. A fused layer ([gate | up]) has one term per half.
// With dropout (training only), the term reads d(x) = x * mask / (1 - p) instead of x (PEFT's
// lora_B(lora_A(dropout(x)))): u = d(x) A^T, dA += du^T d(x), and LoRA's share of dx is (du A) * mask /
// (1 - p). The mask is a function of its coordinates (kernels/dropout_mask.hpp), so backward redraws it.
// Stacked projections ([q | k | v]) have one term per part that has one.
//
// bf16 compute, where PEFT under autocast adds lora_B's bf16 output to the base layer's bf16 output: the
// base product is rounded to bf16 first (its GEMM writes bf16, or y is rounded in place), then the term's
// s u B^T is added in fp32 and the sum rounded once (a GEMM writing bf16 with beta 1, or a rounding
// later); a residual layer's base product is added into the stream and rounded, then its term. The
// input gradient likewise: dy W rounded, then du A (through dropout's mask) added and the sum rounded;
// under dropout du A is rounded first, as lora_A's backward under autocast hands it to dropout's.
struct LoraTerm {
  GemmOperand a{Unmanaged2<const float>()}, b{Unmanaged2<const float>()};
  float scale = 0.f;
  std::int64_t col0 = 0;
  DropoutMask dropout;  // off unless set_lora_dropout
};
struct LoraGrads {
  Unmanaged2<float> a, b;  // [r, in], [out, r]
  // a's or b's buffer holds nothing of this sum yet (GradSink::grad_to_write): the GEMM replaces it (beta 0)
  bool overwrite_a = false, overwrite_b = false;
};
constexpr int kMaxLoraTerms = 3;

// Each LoRA term's u = x_i A^T as a layer's forward made it, kept for that forward's backward (dB = s dy^T u),
// which would otherwise multiply x (through dropout's mask) by A again: one GEMM fewer per term, for N x r
// values each (about 1 MB per layer of the 1B shape at r 16, all terms). A u is read at most once, and
// only for the input forward read, so a backward that follows another layer's forward (checkpointing's
// rebuild of a block whose forward stops early) recomputes it instead. bf16 in bf16 compute, else fp32.
class LoraKept {
 public:
  explicit LoraKept(const char* name)
      : b16_{GrowingBufferBf16(name), GrowingBufferBf16(name), GrowingBufferBf16(name)},
        f32_{GrowingBuffer(name), GrowingBuffer(name), GrowingBuffer(name)} {}

 private:
  friend class Linear;
  GrowingBufferBf16 b16_[kMaxLoraTerms];
  GrowingBuffer f32_[kMaxLoraTerms];
  const void* input_[kMaxLoraTerms] = {};  // the x whose u the buffer holds; null: none (or read already)
};

// An activation gradient as a layer's backward GEMMs read it. bf16 compute: rounded to bf16 once, where
// autocast's activation gradients are bf16 tensors, so dgrad and wgrad are bf16 x bf16 GEMMs on tensor
// cores (fp32 accumulate) and nothing is widened on a GPU; the fp32 values stay for the bias's sum and
// the LoRA terms. Other dtypes: the fp32 buffer itself.
struct LoraTermGrad {
  GemmOperand dy{Unmanaged2<const float>()};  // dy's columns of the term (dy itself where it covers them all)
  GemmOperand du{Unmanaged2<const float>()};  // s dy_i B, the gradient at lora_A's output
};
struct LinearGrad {
  LinearGrad() = default;
  LinearGrad(Unmanaged2<const float> values, const GemmOperand& operand) : f32(values), gemm(operand) {}

  Unmanaged2<const float> f32;
  GemmOperand gemm{Unmanaged2<const float>()};
  // The layer's LoRA terms' operands, made once by Linear::grad_operand for both halves of backward
  // (dW's and dx's GEMMs read the same du). Where an operand was made otherwise (lora_terms 0) each half
  // makes its own.
  LoraTermGrad lora[kMaxLoraTerms];
  int lora_terms = 0;
};

// Where a linear layer's gradients are added. An empty weight or bias: frozen, its gradient is not
// computed (LoRA's base weights).
struct LinearGrads {
  Unmanaged2<float> weight;  // [out, in]
  Unmanaged1<float> bias;    // [out]; empty when the layer has no bias
  LoraGrads lora[kMaxLoraTerms];  // one per LoRA term, in the order they were added
  // weight's buffer holds nothing of this sum yet (GradSink::grad_to_write): dW = dy^T x replaces it
  bool overwrite_weight = false;
};

// Where the gradients of Linear::stack's parts go, as the stacked layer's: their weights' gradients back to
// back as one [sum of outs, in] matrix, or an empty one where every part is frozen, and each part's LoRA
// gradients, in order, as the stacked layer's terms'. Returns false where some parts are frozen and others
// not, a part has a bias, a gradient does not follow the one before in memory, or the parts differ in
// overwrite_weight: `stacked` then holds the LoRA gradients alone, for a caller that adds up the weights'
// itself. Throws std::invalid_argument for more LoRA gradients than a layer has terms.
bool stack_linear_grads(std::initializer_list<const LinearGrads*> parts, LinearGrads& stacked);

class Linear {
 public:
  Linear() = default;
  // bias empty: no bias. Throws std::invalid_argument when the bias does not have `out` entries.
  Linear(Unmanaged2<const float> weight, Unmanaged1<const float> bias, ComputeDtype dtype);
  // bf16 weights as the source stores them (bf16 compute): the GEMMs read them without an fp32 copy.
  Linear(Unmanaged2<const bf16> weight, Unmanaged1<const float> bias);

  // y = x W^T + b on an fp32 input, first rounded in place in bf16 compute (x as the GEMM sees it)
  void forward(Unmanaged2<float> x, Unmanaged2<float> y) const;
  // y = x W^T + b on an input as LinearInput::keep made it (already in compute precision). keep_u: where
  // the LoRA terms' u are kept for backward_weight (else scratch), in each forward below too.
  void forward(const GemmOperand& x, Unmanaged2<float> y, LoraKept* keep_u = nullptr) const;
  // y += x W^T + b: a residual branch added into the stream. A bf16 stream: the sum in fp32, rounded once
  // (one GEMM with beta 1 for a layer without bias, then its LoRA terms as above; a bias adds in fp32
  // scratch first).
  void forward_add(const GemmOperand& x, Unmanaged2<float> y, LoraKept* keep_u = nullptr) const;
  void forward_add(const GemmOperand& x, const Residual& y, LoraKept* keep_u = nullptr) const;
  // y = x W^T written in bf16 (each element the fp32 accumulator rounded once: what forward() and a
  // rounding keep() give), LoRA terms added as above, for a layer without bias; throws otherwise.
  void forward_bf16(const GemmOperand& x, Unmanaged2<bf16> y, LoraKept* keep_u = nullptr) const;
  bool has_bias() const { return bias_.extent(0) > 0; }

  // dW += dy^T x and db += sum_n dy, then dx = dy W + dx_beta dx. Weights first, so dx may be x's
  // own buffer. x as forward multiplied it.
  void backward(const GemmOperand& x, Unmanaged2<const float> dy, Unmanaged2<float> dx, float dx_beta,
                const LinearGrads& grads) const;
  // dy as this layer's GEMMs read it (LinearGrad): in bf16 compute rounded into the bf16 scratch
  // `scratch_name`, with its LoRA terms' operands in scratch named after it; valid until that name is
  // asked for again.
  LinearGrad grad_operand(Unmanaged2<const float> dy, const char* scratch_name = "linear_dy_bf16") const;
  // The same from dy and its bf16 rounding made by dy's producer (the residual stream's gradient, which
  // RMSNorm's backward rounds as it writes it); an empty `rounded` is made here.
  LinearGrad grad_operand(Unmanaged2<const float> dy, Unmanaged2<const bf16> rounded,
                          const char* scratch_name) const;
  // The two halves of backward: dW = dw_beta dW + dy^T x (dW = dy^T x where grads.overwrite_weight; and
  // db += sum_n dy); dx = dy W + dx_beta dx. kept_u: the LoraKept forward kept u in, read (once) where it
  // holds u for this x.
  void backward_weight(const GemmOperand& x, const LinearGrad& dy, const LinearGrads& grads,
                       float dw_beta = 1.f, LoraKept* kept_u = nullptr) const;
  void backward_input(const LinearGrad& dy, Unmanaged2<float> dx, float dx_beta) const;
  // dx = dy W written in bf16 (each element the fp32 accumulator rounded once; LoRA terms added as
  // above), for a layer without bias whose input gradient is read as bf16 next; throws otherwise.
  void backward_input_bf16(const LinearGrad& dy, Unmanaged2<bf16> dx) const;

  // Layers without bias that read one input and whose weights lie back to back in memory, in this order (a
  // Llama layer's q, k and v projections), as one layer [W_0; W_1; ...]: one GEMM for all of them, each
  // part's output a block of columns of its output, and each part's LoRA terms terms of the stacked layer
  // on its columns (their dropout masks included). Returns false, leaving `stacked` alone, where a part
  // has a bias, the dtypes, storage or input widths differ, or a weight does not follow the one before.
  static bool stack(std::initializer_list<const Linear*> parts, Linear& stacked);

  // Adds a LoRA term (at most kMaxLoraTerms); throws std::invalid_argument when its shapes do not fit.
  void add_lora(const LoraTerm& term);
  // g with the LoRA terms' operands made once for both halves of backward, in scratch named after
  // `scratch` (grad_operand does this; for an operand made elsewhere).
  LinearGrad with_lora_operands(LinearGrad g, const char* scratch) const;
  int num_lora() const { return num_lora_; }
  const LoraTerm& lora_term(int i) const { return lora_[i]; }
  // Dropout on the input of LoRA term i (the base W x reads x as it is).
  void set_lora_dropout(int i, const DropoutMask& mask);

  ComputeDtype dtype() const { return dtype_; }
  std::int64_t out_features() const { return static_cast<std::int64_t>(weight_.extent(0)); }
  std::int64_t in_features() const { return static_cast<std::int64_t>(weight_.extent(1)); }

 private:
  // y += LoRA's terms (y's values the base product, rounded in bf16 compute): fp32 or bf16 y
  template <class T>
  void lora_forward(const GemmOperand& x, Unmanaged2<T> y, LoraKept* keep_u) const;
  // The input term i reads: x, or with dropout d(x) in scratch, rounded to the compute dtype
  GemmOperand lora_input(int i, const GemmOperand& x) const;
  // Term i's operands of g: dy's columns as the GEMMs read them (g.gemm: bf16 in bf16 compute, the
  // gradient at lora_B's output as autocast hands it on), in place (GemmOperand::columns where the term
  // covers some of the columns); and du = s dy_i B in scratch `scratch + "_lora_du"` with the term's index:
  // in bf16 compute written in bf16 (autocast's gradient at lora_A's output, so dA = du^T x and du A are
  // bf16 x bf16 products, x not widened), else fp32.
  LoraTermGrad lora_term_grad(int i, const LinearGrad& g, const char* scratch) const;
  // g's own (made by grad_operand) or made now
  LoraTermGrad lora_term_grad(int i, const LinearGrad& g) const;
  // u = x_i A^T (x_i: lora_input's of x), as lora_B reads it, in keep_u's buffer (noted as x's) or in
  // scratch: in bf16 compute written in bf16 (each element the fp32 accumulator rounded once, the values
  // rounding it in place gave, and lora_B's product then bf16 x bf16); else fp32, rounded to the compute
  // dtype in place.
  GemmOperand lora_u(int i, const GemmOperand& x, const GemmOperand& xi, LoraKept* keep_u = nullptr) const;
  // u as backward reads it: kept_u's, once, where it holds x's; else lora_u's recomputation
  GemmOperand lora_u_for_backward(int i, const GemmOperand& x, const GemmOperand& xi, LoraKept* kept_u) const;
  // dx += LoRA's share of the input gradient (through each term's dropout mask), on fp32 or bf16 dx
  template <class T>
  void lora_backward_input(const LinearGrad& g, Unmanaged2<T> dx) const;

  GemmOperand weight_{Unmanaged2<const float>()};
  Unmanaged1<const float> bias_;
  ComputeDtype dtype_ = ComputeDtype::fp32;
  LoraTerm lora_[kMaxLoraTerms];
  int num_lora_ = 0;
};

// A linear layer's input as forward keeps it for backward, in compute precision: an fp32 buffer (fp32
// compute), or a bf16 one (bf16 compute: half the bytes, exactly the rounded values the GEMM reads).
// Whatever produces the input (a norm, attention, SwiGLU) writes it in fp32 into staging(); keep() turns
// that into the GEMM input. In bf16 the staging is `scratch`, shared by every layer and needed only
// until keep(). Each buffer is asked for one shape per step (model/growing_buffer.hpp).
struct StreamKeep;

class LinearInput {
 public:
  explicit LinearInput(const char* name) : f32_(name), bf16_(name) {}
  Unmanaged2<float> staging(std::int64_t rows, std::int64_t cols, ComputeDtype dtype, GrowingBuffer& scratch);
  // The staged input as the GEMMs read it: itself (fp32), or rounded into the kept bf16 buffer.
  GemmOperand keep(Unmanaged2<float> staged, ComputeDtype dtype);
  // RMSNorm's output y = w x rstd (kernels/rmsnorm.hpp) as the GEMM input: what staging + keep() make,
  // but in bf16 compute the norm writes the kept bf16 buffer itself (no fp32 staging, no rounding pass).
  GemmOperand keep_rmsnorm(Unmanaged2<const float> x, const NormWeight& w, float eps, Unmanaged1<float> rstd,
                           ComputeDtype dtype, GrowingBuffer& scratch);
  // The same from the residual stream x that `keep` says to keep first (KeptActivation::keep): a bf16
  // stream (a bf16 step that keeps every layer) is read as it is and the norm writes its kept copy in the
  // same pass (kernels/rmsnorm.hpp rmsnorm_forward_keeping); an fp32 one is kept by keep(), then normed.
  GemmOperand keep_rmsnorm(const StreamKeep& keep, const Residual& x, const NormWeight& w, float eps,
                           Unmanaged1<float> rstd, ComputeDtype dtype, GrowingBuffer& scratch);
  // The kept input again (backward): rows x cols as forward kept it.
  GemmOperand kept(std::int64_t rows, std::int64_t cols, ComputeDtype dtype);
  // bf16 compute: the kept bf16 buffer itself, for a producer that writes its output in bf16 (the fused
  // attention's o); what it writes is then the kept input.
  Unmanaged2<bf16> bf16_output(std::int64_t rows, std::int64_t cols) { return bf16_.mat(rows, cols); }
  // Its fp32 values, for a kernel that is not a GEMM: the kept buffer (fp32), or widened into scratch.
  Unmanaged2<const float> values(std::int64_t rows, std::int64_t cols, ComputeDtype dtype, GrowingBuffer& scratch);
  // An fp32 buffer of its shape that backward may overwrite once the input has been read for the last
  // time: the kept buffer itself (fp32), or scratch.
  Unmanaged2<float> reusable(std::int64_t rows, std::int64_t cols, ComputeDtype dtype, GrowingBuffer& scratch);

 private:
  GrowingBuffer f32_;
  GrowingBufferBf16 bf16_;
};

// How forward holds an activation that backward reads again (KeptActivation).
enum class Kept {
  fp32,         // fp32 compute: as computed, in its own buffer
  fp16_values,  // fp16 compute: rounded to fp16 in place in its own fp32 buffer
  bf16_values,  // bf16 compute, one layer's buffers that every layer reuses (forward-only runs,
                // checkpointing's recompute): rounded in place in its own fp32 buffer, read with no copy
  bf16,         // bf16 compute, every layer's kept until backward: held as bf16, half the bytes; its fp32
                // values live only in scratch shared by the layers
};
Kept kept_as(ComputeDtype dtype, bool every_layer);

// RMSNorm's backward (kernels/rmsnorm.hpp) on its input x as it was kept: fp32, or bf16 in a bf16 step
// (GemmOperand is the tagged fp32-or-bf16 view), read without widening it into scratch; dy, the gradient
// at its output, likewise (NormOutputGrad). dw is written where its buffer holds nothing of this sum yet
// (GradWrite::overwrite), else added into.
void rmsnorm_backward_kept(const GemmOperand& x, const NormWeight& w, Unmanaged1<const float> rstd,
                           const GemmOperand& dy, Unmanaged2<float> dx, const GradWrite& dw,
                           Unmanaged2<bf16> dx_rounded = {});

// Backward's buffers for the gradient at a norm's output [tokens, hidden] (d loss / d h, which the dgrad
// GEMMs of the layers reading h write and the norm's backward reads). A buffer holds memory only once a
// view of it is asked for.
struct NormOutputGrad {
  GrowingBuffer f32{"dh"};
  GrowingBufferBf16 b16{"dh_bf16"};
};
// Whether `layer`'s input gradient is written in bf16: a layer without bias in a bf16 step, whose dgrad
// GEMM rounds it (LoRA terms added as above), as autocast's linear backward hands a bf16 gradient to the
// fp32 norm before it. Layers with a bias, and fp32 and fp16 steps, write fp32.
bool dgrad_writes_bf16(const Linear& layer);
// dh = dy W (layer.backward_input with beta 0, or backward_input_bf16 where dgrad_writes_bf16) in one of
// dh's buffers, returned as the norm's backward reads it.
GemmOperand norm_output_grad(const Linear& layer, const LinearGrad& dy, NormOutputGrad& dh);

// An activation that is not a GEMM's input (those are LinearInputs) kept for backward as `Kept` says. Its
// producer writes it in fp32 into staging(); keep() rounds it there (bf16 compute) and keeps it, and
// forward goes on reading the staging, so forward and backward use the same numbers. Each buffer is asked
// for one shape per step (model/growing_buffer.hpp).
class KeptActivation {
 public:
  explicit KeptActivation(const char* name) : f32_(name), bf16_(name) {}
  // Its own fp32 buffer, or (Kept::bf16) `scratch` from element `offset` on.
  Unmanaged2<float> staging(std::int64_t rows, std::int64_t cols, Kept how, GrowingBuffer& scratch,
                            std::int64_t offset = 0);
  void keep(Unmanaged2<float> staged, Kept how);
  // Kept::bf16 only: the kept bf16 copy itself (what keep() made), and the same buffer for a producer
  // that writes the activation in bf16 itself (then there is no staging and no keep()).
  Unmanaged2<const bf16> kept_bf16(std::int64_t rows, std::int64_t cols) { return bf16_.mat(rows, cols); }
  Unmanaged2<bf16> bf16_output(std::int64_t rows, std::int64_t cols) { return bf16_.mat(rows, cols); }
  // As kept, for a kernel that reads fp32 or bf16 (RMSNorm's backward): the bf16 copy (Kept::bf16), else
  // its own buffer.
  GemmOperand kept(std::int64_t rows, std::int64_t cols, Kept how) {
    if (how == Kept::bf16) return kept_bf16(rows, cols);
    return Unmanaged2<const float>(f32_.mat(rows, cols));
  }
  // Its fp32 values again (backward): its own buffer, or widened into scratch as staging() placed it.
  // Backward may overwrite them once it has read them for the last time.
  Unmanaged2<float> values(std::int64_t rows, std::int64_t cols, Kept how, GrowingBuffer& scratch,
                           std::int64_t offset = 0);

 private:
  GrowingBuffer f32_;
  GrowingBufferBf16 bf16_;
};

// out = x where out is another buffer (both fp32 or both bf16); nothing where it is x's own.
void copy_stream(const Residual& x, const Residual& out);

// The residual stream a block reads and the activation that keeps it for backward, when the block is to
// keep it before reading it (its norm then does both in one pass, LinearInput::keep_rmsnorm). `stream` is
// the block's input itself; an empty `kept`: the caller keeps it, or nothing does.
struct StreamKeep {
  KeptActivation* kept = nullptr;
  Residual stream;
  Kept how = Kept::fp32;
};

// An activation forward goes on with but does not keep, rounded in place as KeptActivation::keep would.
void round_activation(Unmanaged2<float> x, ComputeDtype dtype);

// fp32 scratch shared by every layer, used only in bf16 compute: GEMM inputs before a LinearInput keeps
// them and backward's fp32 copies of them (gemm_input); KeptActivations held as bf16, while forward makes
// them and when backward widens them (kept).
struct ActivationScratch {
  GrowingBuffer gemm_input{"gemm_input_staging"}, kept{"kept_activation_staging"};
};

// A norm weight of an acquired block as the source holds it: its bf16 compute copy where the source keeps
// one (read widened by the kernels, no fp32 copy), else fp32.
NormWeight norm_weight_of(ParamSource& params, int param);

// The linear layer of parameter `weight` (and `bias`, -1: none) of an acquired block, with its LoRA term
// when `lora` is on, and where its gradients go.
Linear linear_of(ParamSource& params, const ParamLayout& layout, int weight, int bias, ComputeDtype dtype,
                 const LoraParams& lora = {});
LinearGrads linear_grads_of(GradSink& grads, const ParamLayout& layout, int weight, int bias,
                            const LoraParams& lora = {});
// LoRA's term of parameters `lora` on output columns from col0 on, and where its gradients go.
LoraTerm lora_term_of(ParamSource& params, const ParamLayout& layout, const LoraParams& lora, std::int64_t col0 = 0);
LoraGrads lora_grads_of(GradSink& grads, const ParamLayout& layout, const LoraParams& lora);

}  // namespace shardft
