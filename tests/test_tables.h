// Table definitions shared by the exact-sum tests. Header-only, test-only.
#ifndef PS_TESTS_TEST_TABLES_H_
#define PS_TESTS_TEST_TABLES_H_

#include <cstdint>
#include <string>

#include "proto/ps.pb.h"

namespace ps {

// Zeros, SGD with learning rate 1: pushing a gradient of -1 adds exactly 1,
// so after W workers x K pushes every key holds exactly W * K.
inline proto::TableDef SumTable(const std::string& name, uint64_t keys, uint32_t width) {
  proto::TableDef def;
  def.set_name(name);
  def.set_num_keys(keys);
  def.set_width(width);
  def.set_initializer(proto::INIT_ZEROS);
  def.set_optimizer(proto::OPT_SGD);
  def.set_learning_rate(1.0f);
  return def;
}

// The same as a sparse table (any uint64 key, rows created by pushes).
inline proto::TableDef SparseSumTable(const std::string& name, uint32_t width,
                                      uint32_t num_buckets = 16) {
  proto::TableDef def = SumTable(name, 0, width);
  def.set_kind(proto::TABLE_SPARSE);
  def.set_num_buckets(num_buckets);
  return def;
}

}  // namespace ps

#endif  // PS_TESTS_TEST_TABLES_H_
