#include "train/evaluate.hpp"

#include <algorithm>

#include "infer/generate.hpp"
#include "train/trainer.hpp"

namespace shardft {

std::vector<std::vector<std::int32_t>> greedy_generate(Decoder& model, ParamSource& params,
                                                       const std::vector<std::vector<std::int32_t>>& prompts,
                                                       int max_new_tokens, int max_seq_length,
                                                       const std::vector<std::int32_t>& stop_ids,
                                                       std::int32_t pad_id) {
  std::vector<std::vector<std::int32_t>> out;
  for (Generation& g : generate(model, params, prompts, max_new_tokens, max_seq_length, stop_ids, pad_id, SamplingOptions{})) {
    out.push_back(std::move(g.tokens));
  }
  return out;
}

EvalResult evaluate(Decoder& model, ParamSource& params, const std::vector<Conversation>& eval_set, int batch_size,
                    int max_seq_length, int max_new_tokens, const ChatEncoder& encoder,
                    const std::vector<LossOn>& loss_on) {
  EvalResult res;
  std::vector<TokenizedSample> samples;
  for (std::size_t i = 0; i < eval_set.size(); ++i) {
    samples.push_back(encoder.encode(eval_set[i], max_seq_length, i < loss_on.size() ? loss_on[i] : LossOn::assistant));
  }
  res.generations.assign(eval_set.size(), "");
  double loss_sum = 0;
  std::int64_t targets = 0, correct = 0;
  for (std::size_t start = 0; start < samples.size(); start += batch_size) {
    const std::size_t end = std::min(samples.size(), start + batch_size);
    std::vector<std::int64_t> idx, generating;
    std::vector<std::vector<std::int32_t>> prompts;
    std::vector<std::string> refs;
    for (std::size_t i = start; i < end; ++i) {
      idx.push_back(static_cast<std::int64_t>(i));
      // Plain-text samples (and conversations that end with the user) have no answer to score.
      if (!ChatEncoder::can_generate(eval_set[i])) continue;
      GenerationPrompt gp = encoder.generation_prompt(eval_set[i]);
      generating.push_back(static_cast<std::int64_t>(i));
      prompts.push_back(std::move(gp.prompt_ids));
      refs.push_back(std::move(gp.reference));
    }
    const LossSums ls =
        model.forward_loss(to_model_inputs(collate(samples, idx, 1, encoder.pad_id()), model.config().vocab_size),
                           params);
    loss_sum += ls.loss_sum;
    targets += ls.num_targets;
    if (prompts.empty()) continue;
    const auto gens = greedy_generate(model, params, prompts, max_new_tokens, max_seq_length, encoder.stop_ids(),
                                      encoder.pad_id());
    for (std::size_t r = 0; r < gens.size(); ++r) {
      std::string text = encoder.tokenizer().decode(gens[r]);
      correct += text == refs[r];
      res.generations[static_cast<std::size_t>(generating[r])] = std::move(text);
    }
    res.generated_samples += static_cast<std::int64_t>(gens.size());
  }
  res.samples = static_cast<std::int64_t>(samples.size());
  res.eval_loss = targets > 0 ? loss_sum / static_cast<double>(targets) : 0.0;
  res.exact_match =
      res.generated_samples > 0 ? static_cast<double>(correct) / static_cast<double>(res.generated_samples) : 0.0;
  return res;
}

LossEval evaluate_loss(Decoder& model, ParamSource& params, const std::vector<TokenizedSample>& samples,
                       int batch_size, std::int32_t pad_id, Communicator& world) {
  const auto n = static_cast<std::int64_t>(samples.size());
  const std::int64_t batches = (n + batch_size - 1) / batch_size;
  const std::int64_t rounds = (batches + world.size() - 1) / world.size();
  double sums[2] = {0.0, 0.0};  // loss, targets: one all-reduce
  for (std::int64_t round = 0; round < rounds; ++round) {
    const std::int64_t b = round * world.size() + world.rank();
    const bool own = b < batches;
    const std::int64_t first = own ? b * batch_size : 0;
    std::vector<std::int64_t> idx;
    for (std::int64_t i = first; i < std::min(n, first + batch_size); ++i) idx.push_back(i);
    const LossSums ls =
        model.forward_loss(to_model_inputs(collate(samples, idx, 1, pad_id), model.config().vocab_size), params);
    if (!own) continue;
    sums[0] += ls.loss_sum;
    sums[1] += static_cast<double>(ls.num_targets);
  }
  world.all_reduce(sums, sums, 2, DType::f64, ReduceOp::sum);
  LossEval res;
  res.samples = n;
  res.targets = static_cast<std::int64_t>(sums[1]);
  res.eval_loss = sums[1] > 0 ? sums[0] / sums[1] : 0.0;
  return res;
}

}  // namespace shardft
