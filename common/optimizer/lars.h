// Layer-wise adaptive rate scaling (LARS; You, Gitman and Ginsburg, "Large
// Batch Training of Convolutional Networks", 2017) for tables with lars_eta
// (proto::TableDef): each table is a layer, and a push's gradient (after
// clipping and weight decay) is scaled by the layer's trust ratio
//   lars_eta * ||w|| / (||g|| + lars_beta * ||w||).
// The norms span every server's slice of the table, so the worker, which
// pulled all of w and computed all of g, takes them (LayerNormsOf) and sends
// them with every part of the push (proto::PushRequest.layer_norms); each
// server computes the same ratio from them (LarsTrust).
#ifndef PS_COMMON_OPTIMIZER_LARS_H_
#define PS_COMMON_OPTIMIZER_LARS_H_

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "proto/ps.pb.h"

namespace ps {

// The L2 norms of a layer's parameters and gradient (summed in double).
proto::LayerNorms LayerNormsOf(absl::Span<const float> weights, absl::Span<const float> gradient);

// The trust ratio a push to table `def` is scaled by: 1 when LARS is off
// (lars_eta 0) or either norm is 0 (a layer at zero, such as a fresh bias,
// or a zero gradient), else the ratio above. Errors, for a LARS table only:
// INVALID_ARGUMENT naming the table when the push has no layer_norms
// (`norms` null) or a norm is negative or not finite.
absl::StatusOr<float> LarsTrust(const proto::TableDef& def, const proto::LayerNorms* norms);

}  // namespace ps

#endif  // PS_COMMON_OPTIMIZER_LARS_H_
