#include "train/loss_scaler.hpp"

#include <algorithm>
#include <cmath>

#include "io/safetensors.hpp"  // FormatError

namespace shardft {

LossScaler::LossScaler(const LossScalerConfig& cfg)
    : enabled_(true), cfg_(cfg), scale_(cfg.initial_scale), hysteresis_left_(cfg.hysteresis) {}

LossScaler::Outcome LossScaler::update(bool overflow) {
  if (!enabled_) return Outcome::apply;
  Outcome out = Outcome::apply;
  if (overflow) {
    out = Outcome::skip;
    ++skipped_;
    if (cfg_.dynamic) {
      if (cfg_.hysteresis == 1 || hysteresis_left_ == 1) {
        if (scale_ == cfg_.min_scale) out = Outcome::exhausted;
        scale_ = std::max(scale_ / 2, cfg_.min_scale);
      } else {
        --hysteresis_left_;
      }
      last_overflow_iter_ = iter_;
    }
  } else if (cfg_.dynamic) {
    if (cfg_.consecutive_hysteresis) hysteresis_left_ = cfg_.hysteresis;
    if ((iter_ - last_overflow_iter_) % cfg_.window == 0) {
      if (!cfg_.consecutive_hysteresis) hysteresis_left_ = cfg_.hysteresis;
      scale_ *= 2;
    }
  }
  ++iter_;
  return out;
}

nlohmann::json LossScaler::state() const {
  return {{"scale", scale_},
          {"iter", iter_},
          {"last_overflow_iter", last_overflow_iter_},
          {"hysteresis_left", hysteresis_left_},
          {"skipped_steps", skipped_}};
}

void LossScaler::restore(const nlohmann::json& s, const std::string& where) {
  try {
    scale_ = s.at("scale").get<double>();
    iter_ = s.at("iter").get<long>();
    last_overflow_iter_ = s.at("last_overflow_iter").get<long>();
    hysteresis_left_ = s.at("hysteresis_left").get<int>();
    skipped_ = s.at("skipped_steps").get<long>();
  } catch (const nlohmann::json::exception& e) {
    throw FormatError(where + ": the fp16 loss scaler state is incomplete (" + e.what() + ")");
  }
  if (!(scale_ > 0) || !std::isfinite(scale_)) throw FormatError(where + ": the fp16 loss scale is not a positive number");
}

}  // namespace shardft
