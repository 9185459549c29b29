// Models take their shapes from the data: a generated data set of 8x8
// images in 4 classes (the bright quadrant is the class) goes through IDX
// files on disk, ReadIdxDir and MakeModel as ps_worker does, and softmax
// regression and an MLP trained on it in process classify the test set.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "tests/test_util/temp_dir.h"
#include "worker/train/dataset.h"
#include "worker/train/idx_reader.h"
#include "worker/train/idx_writer.h"
#include "worker/train/model.h"
#include "worker/train/synthetic_data.h"

namespace ps {
namespace {

// Writes a train (1000) and test (200) set of 8x8 quadrant images to a
// directory under TEST_TMPDIR, with the file names ps_worker expects.
std::string WriteQuadrantDir() {
  const std::string dir = MakeTestDir("quadrants8x8");
  EXPECT_TRUE(WriteIdxDataset(MakeQuadrantImages(1000, 8, 8, /*seed=*/1), 8, 8,
                              IdxPathsIn(dir, /*train=*/true))
                  .ok());
  EXPECT_TRUE(WriteIdxDataset(MakeQuadrantImages(200, 8, 8, /*seed=*/2), 8, 8,
                              IdxPathsIn(dir, /*train=*/false))
                  .ok());
  return dir;
}

// Plain minibatch SGD over `train` for `epochs`; returns the parameters.
std::vector<float> TrainSgd(const Model& m, const Dataset& train, int epochs, int batch, float lr) {
  std::vector<float> params = InitialParams(m, /*seed=*/1);
  std::vector<float> grad(m.num_params());
  for (int epoch = 0; epoch < epochs; ++epoch) {
    for (int64_t first = 0; first + batch <= train.num_examples; first += batch) {
      m.LossAndGradient(params, train.row(first), &train.labels[first], batch,
                        absl::MakeSpan(grad));
      for (size_t i = 0; i < params.size(); ++i) params[i] -= lr * grad[i];
    }
  }
  return params;
}

class ImageTrainingTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ImageTrainingTest, LearnsQuadrantsFrom8x8IdxFiles) {
  absl::StatusOr<TrainTestData> data = ReadIdxDir(WriteQuadrantDir());
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(data->rows, 8);
  EXPECT_EQ(data->cols, 8);
  ASSERT_EQ(data->train.dim, 64);
  ASSERT_EQ(data->train.num_classes, 4);

  absl::StatusOr<std::unique_ptr<Model>> model =
      MakeModel(GetParam(), data->train.dim, {16}, data->train.num_classes);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ((*model)->input_dim(), 64);
  EXPECT_EQ((*model)->num_classes(), 4);

  const std::vector<float> zeros((*model)->num_params(), 0.0f);  // always predicts class 0
  EXPECT_LT(Accuracy(**model, zeros, data->test), 0.5);
  const std::vector<float> params = TrainSgd(**model, data->train, /*epochs=*/5, /*batch=*/16,
                                             /*lr=*/0.2f);
  const double accuracy = Accuracy(**model, params, data->test);
  EXPECT_GE(accuracy, 0.97) << GetParam() << " test accuracy " << accuracy;
}

INSTANTIATE_TEST_SUITE_P(Models, ImageTrainingTest, ::testing::Values("softmax", "mlp"));

}  // namespace
}  // namespace ps
