#include "tests/test_util/table_defs.h"

#include <string>

namespace ps {

proto::TableDef DenseTableDef(absl::string_view name, uint64_t num_keys, uint32_t width) {
  proto::TableDef def;
  def.set_name(std::string(name));
  def.set_kind(proto::TABLE_DENSE);
  def.set_num_keys(num_keys);
  def.set_width(width);
  return def;
}

proto::TableDef SparseTableDef(absl::string_view name, uint32_t width, uint32_t num_buckets) {
  proto::TableDef def;
  def.set_name(std::string(name));
  def.set_kind(proto::TABLE_SPARSE);
  def.set_width(width);
  def.set_num_buckets(num_buckets);
  return def;
}

proto::TableDef SumTable(absl::string_view name, uint64_t num_keys, uint32_t width) {
  return WithSgd(DenseTableDef(name, num_keys, width), 1.0f);
}

proto::TableDef SparseSumTable(absl::string_view name, uint32_t width, uint32_t num_buckets) {
  return WithSgd(SparseTableDef(name, width, num_buckets), 1.0f);
}

proto::TableDef WithUniformInit(proto::TableDef def, float low, float high, uint64_t seed) {
  def.set_initializer(proto::INIT_UNIFORM);
  def.set_init_low(low);
  def.set_init_high(high);
  def.set_seed(seed);
  return def;
}

proto::TableDef WithNormalInit(proto::TableDef def, float mean, float stddev) {
  def.set_initializer(proto::INIT_NORMAL);
  def.set_init_mean(mean);
  def.set_init_stddev(stddev);
  return def;
}

proto::TableDef WithSgd(proto::TableDef def, float learning_rate) {
  def.set_optimizer(proto::OPT_SGD);
  def.set_learning_rate(learning_rate);
  return def;
}

proto::TableDef WithAdagrad(proto::TableDef def, float learning_rate, float initial_accumulator) {
  def.set_optimizer(proto::OPT_ADAGRAD);
  def.set_learning_rate(learning_rate);
  def.set_initial_accumulator(initial_accumulator);
  return def;
}

proto::TableDef WithAdam(proto::TableDef def, float learning_rate, float beta1, float beta2,
                         float epsilon) {
  def.set_optimizer(proto::OPT_ADAM);
  def.set_learning_rate(learning_rate);
  def.set_beta1(beta1);
  def.set_beta2(beta2);
  def.set_epsilon(epsilon);
  return def;
}

proto::CreateTableRequest CreateTableRequestFor(const proto::TableDef& def) {
  proto::CreateTableRequest request;
  *request.mutable_table() = def;
  return request;
}

}  // namespace ps
