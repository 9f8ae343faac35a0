// metadata.json's seal and field checks, and the cross-check of a rank file against it
// (io/checkpoint_meta.hpp), without training: a tiny checkpoint written by hand.
#include <gtest/gtest.h>
#include <hdf5.h>

#include <string>
#include <vector>

#include "../common/scratch_dir_test.hpp"
#include "io/checkpoint_meta.hpp"
#include "io/hdf5_shard.hpp"

namespace shardft {
namespace {

nlohmann::json sample_meta(const char* format = kCheckpointFormat) {
  nlohmann::json params = nlohmann::json::array();
  params.push_back({{"name", "a"}, {"shape", {2, 3}}, {"layout_offset", 0}});
  params.push_back({{"name", "b"}, {"shape", {4}}, {"layout_offset", 6}});
  nlohmann::json meta = {{"format", format},
          {"step", 30},
          {"train_loss_sum", 12.345678901234},
          {"world_size", 1},
          {"zero_stage", 1},
          {"shard_group_size", 1},
          {"total_numel", 10},
          {"model", {{"hidden_size", 8}}},
          {"params", params},
          {"files", {{{"file", "rank-00000.h5"}, {"rank", 0}, {"slices", {0, 0, 10}},
                      {"digest", "xxh3_64:0000000000000000"}}}}};
  if (std::string(format) != kCheckpointFormat) meta["files"][0].erase("digest");  // format 3 added it
  return meta;
}

std::string sealed_text(nlohmann::json meta, int indent = 1) {
  seal_metadata(meta);
  return meta.dump(indent);
}

std::string replace_once(std::string s, const std::string& from, const std::string& to) {
  const auto at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return at == std::string::npos ? s : s.replace(at, from.size(), to);
}

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const FormatError& e) {
    return e.what();
  }
  return "";
}

TEST(CheckpointSeal, SealedMetadataParsesWhateverTheIndentation) {
  const std::string text = sealed_text(sample_meta());
  const CheckpointMeta m = parse_checkpoint_meta(text, "ck");
  EXPECT_TRUE(m.sealed);
  EXPECT_TRUE(m.warning.empty());
  EXPECT_EQ(m.path, "ck/metadata.json");
  EXPECT_EQ(m.json.at("step"), 30);
  // The digest is over the canonical content: re-indenting the file is not damage.
  EXPECT_TRUE(parse_checkpoint_meta(nlohmann::json::parse(text).dump(4), "ck").sealed);
  EXPECT_EQ(metadata_digest(nlohmann::json::parse(text)), nlohmann::json::parse(text).at("seal"));
}

TEST(CheckpointSeal, AnEditedStepIsDetected) {
  const std::string text = replace_once(sealed_text(sample_meta()), "\"step\": 30", "\"step\": 20");
  const std::string err = error_of([&] { parse_checkpoint_meta(text, "ck"); });
  EXPECT_NE(err.find("ck/metadata.json: seal mismatch"), std::string::npos) << err;
}

TEST(CheckpointSeal, EveryFieldIsCovered) {
  const std::string text = sealed_text(sample_meta());
  for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
           {"\"world_size\": 1", "\"world_size\": 2"},
           {"\"layout_offset\": 6", "\"layout_offset\": 7"},
           {"12.345678901234", "12.345678901235"},
           {"\"hidden_size\": 8", "\"hidden_size\": 9"}}) {
    EXPECT_NE(error_of([&] { parse_checkpoint_meta(replace_once(text, from, to), "ck"); }).find("seal mismatch"),
              std::string::npos)
        << from;
  }
}

TEST(CheckpointSeal, MissingSealUnknownFormatAndBadJsonAreRefused) {
  EXPECT_NE(error_of([&] { parse_checkpoint_meta(sample_meta().dump(), "ck"); }).find("\"seal\" is missing"),
            std::string::npos);
  EXPECT_NE(error_of([&] { parse_checkpoint_meta(sealed_text(sample_meta("shardft-checkpoint-9")), "ck"); })
                .find("\"format\" is 'shardft-checkpoint-9'"),
            std::string::npos);
  EXPECT_NE(error_of([&] { parse_checkpoint_meta("{\"format\": ", "ck"); }).find("not valid JSON"), std::string::npos);
}

TEST(CheckpointSeal, FormatOneIsReadWithAWarning) {
  const CheckpointMeta m = parse_checkpoint_meta(sample_meta(kCheckpointFormatV1).dump(1), "ck");
  EXPECT_FALSE(m.sealed);
  EXPECT_NE(m.warning.find("written before metadata was sealed"), std::string::npos) << m.warning;
}

TEST(CheckpointSeal, FieldsOfTheWrongTypeAreNamed) {
  auto with = [](const char* key, nlohmann::json value) {
    nlohmann::json m = sample_meta(kCheckpointFormatV1);  // no seal: the field checks must catch these
    m[key] = std::move(value);
    return error_of([&] { parse_checkpoint_meta(m.dump(), "ck"); });
  };
  EXPECT_NE(with("step", "30").find("\"step\": expected an integer"), std::string::npos);
  EXPECT_NE(with("world_size", 0).find("\"world_size\": expected an integer >= 1"), std::string::npos);
  EXPECT_NE(with("files", nlohmann::json::array()).find("\"files\": expected a non-empty array"), std::string::npos);
  nlohmann::json escape = sample_meta(kCheckpointFormatV1);
  escape["files"][0]["file"] = "../../etc/x.h5";
  EXPECT_NE(error_of([&] { parse_checkpoint_meta(escape.dump(), "ck"); }).find("files[0].file"), std::string::npos);
  nlohmann::json triples = sample_meta(kCheckpointFormatV1);
  triples["files"][0]["slices"] = {0, 0};
  EXPECT_NE(error_of([&] { parse_checkpoint_meta(triples.dump(), "ck"); }).find("files[0].slices"), std::string::npos);
  nlohmann::json shape = sample_meta(kCheckpointFormatV1);
  shape["params"][1]["shape"] = "4";
  EXPECT_NE(error_of([&] { parse_checkpoint_meta(shape.dump(), "ck"); }).find("params[1].shape"), std::string::npos);
}

TEST(CheckpointSeal, LayoutFingerprintFollowsTheTable) {
  const nlohmann::json m = sample_meta();
  const std::string fp = layout_fingerprint(m.at("params"), 10);
  EXPECT_EQ(fp, layout_fingerprint(m.at("params"), 10));
  nlohmann::json other = m.at("params");
  other[1]["shape"] = {5};
  EXPECT_NE(fp, layout_fingerprint(other, 10));
  EXPECT_NE(fp, layout_fingerprint(m.at("params"), 11));
}

class RankFileCheck : public testing_util::ScratchDirTest {
 protected:
  // Writes rank-00000.h5 with the attributes save_checkpoint gives it, and returns the sealed metadata.
  // Format 3 records the whole file's digest; format 2 does not (its datasets' checksums are checked).
  CheckpointMeta write_checkpoint(long step_in_file, long step_in_meta, const std::vector<float>& exp_avg,
                                  const char* format = kCheckpointFormat) {
    nlohmann::json meta = sample_meta(format);
    meta["step"] = step_in_meta;
    const std::string layout = layout_fingerprint(meta.at("params"), 10);
    Hdf5ShardWriter w((dir_ / "rank-00000.h5").string());
    const Attributes common = {{"format", format}, {"layout", layout}, {"world_size", "1"},
                               {"step", std::to_string(step_in_file)}};
    const std::vector<float> ones(10, 1.f);
    w.write_f32("master", ones.data(), ones.size(), common);
    w.write_f32("exp_avg", exp_avg.data(), exp_avg.size(), common);
    w.write_f32("exp_avg_sq", ones.data(), ones.size(), common);
    const std::vector<std::int64_t> table = {0, 0, 10};
    w.write_i64("slices", table.data(), table.size(), common);
    w.close();
    if (std::string(format) == kCheckpointFormat) {
      meta["files"][0]["digest"] = file_digest((dir_ / "rank-00000.h5").string());
    } else {
      meta["files"][0].erase("digest");
    }
    return parse_checkpoint_meta(sealed_text(meta), dir_.string());
  }
  void expect_flipped_bit_caught(const char* format);
};

TEST_F(RankFileCheck, AGoodFilePasses) {
  const CheckpointMeta m = write_checkpoint(30, 30, std::vector<float>(10, 0.5f));
  EXPECT_EQ(error_of([&] { verify_rank_file(m, 0); }), "");
}

TEST_F(RankFileCheck, AStepThatDisagreesWithTheRankFileIsNamed) {
  // A resealed edit of metadata.json: the seal holds, the rank files say otherwise.
  const CheckpointMeta m = write_checkpoint(30, 20, std::vector<float>(10, 0.5f));
  const std::string err = error_of([&] { verify_rank_file(m, 0); });
  EXPECT_NE(err.find("rank-00000.h5: dataset 'master': attribute step is 30"), std::string::npos) << err;
}

TEST_F(RankFileCheck, SealedRankFilesUnderMetadataEditedToLookOlderAreCaught) {
  write_checkpoint(30, 30, std::vector<float>(10, 0.5f));
  // No seal to check in format 1, but the rank files say they belong to a sealed checkpoint.
  const CheckpointMeta old = parse_checkpoint_meta(sample_meta(kCheckpointFormatV1).dump(), dir_.string());
  const std::string err = error_of([&] { verify_rank_file(old, 0); });
  EXPECT_NE(err.find(std::string("dataset 'master': attribute format is ") + kCheckpointFormat), std::string::npos)
      << err;
}

TEST_F(RankFileCheck, AFlippedBitInExpAvgIsNamedWithItsDataset) {
  for (const char* format : {kCheckpointFormat, kCheckpointFormatV2}) {
    SCOPED_TRACE(format);
    expect_flipped_bit_caught(format);
  }
}

void RankFileCheck::expect_flipped_bit_caught(const char* format) {
  const CheckpointMeta m = write_checkpoint(30, 30, std::vector<float>(10, 0.5f), format);
  // Flip one bit of element 3 in place, as bit rot would, behind HDF5's back.
  const std::string path = (dir_ / "rank-00000.h5").string();
  const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  const hid_t d = H5Dopen2(f, "exp_avg", H5P_DEFAULT);
  const haddr_t at = H5Dget_offset(d);
  H5Dclose(d);
  H5Fclose(f);
  ASSERT_NE(at, HADDR_UNDEF);
  std::FILE* raw = std::fopen(path.c_str(), "r+b");
  ASSERT_NE(raw, nullptr);
  std::fseek(raw, static_cast<long>(at) + 3 * 4 + 1, SEEK_SET);
  const int byte = std::fgetc(raw);
  std::fseek(raw, static_cast<long>(at) + 3 * 4 + 1, SEEK_SET);
  std::fputc(byte ^ 0x10, raw);
  std::fclose(raw);
  const std::string err = error_of([&] { verify_rank_file(m, 0); });
  // Format 3 finds it in the whole file, before HDF5 reads it; format 2 in the dataset's own checksum.
  const bool v3 = std::string(format) == kCheckpointFormat;
  EXPECT_NE(err.find(v3 ? "rank-00000.h5: checksum mismatch (file xxh3_64:" : "rank-00000.h5: dataset 'exp_avg': checksum mismatch"),
            std::string::npos)
      << err;
}

TEST_F(RankFileCheck, ChunkedVerificationEqualsTheWholeChecksum) {
  std::vector<float> v(1000);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i) * 0.25f;
  Hdf5ShardWriter w((dir_ / "big.h5").string());
  w.write_f32("x", v.data(), v.size(), {});
  w.close();
  const Hdf5ShardReader r((dir_ / "big.h5").string());
  for (std::size_t chunk : {4u, 12u, 4000u, 1u << 20}) EXPECT_EQ(error_of([&] { r.verify("x", chunk); }), "") << chunk;
  EXPECT_EQ(checksum64(v.data() + 100, 3600, checksum64(v.data(), 400)), checksum64(v.data(), 4000));
}

}  // namespace
}  // namespace shardft
