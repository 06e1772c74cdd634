// CostAccount (model/) -> docsparse.v1.CostReport (API).
#ifndef DOCSPARSE_SERVER_COST_REPORT_H_
#define DOCSPARSE_SERVER_COST_REPORT_H_

#include <string>
#include <utility>
#include <vector>

#include "docsparse/v1/docsparse.pb.h"
#include "model/attention/attention.h"
#include "model/attention/cost_model.h"

namespace docsparse {

v1::AttentionKind ToProto(AttentionKind kind);

// Fills the token, density, edge and FLOP fields of `report`; timings,
// budget and batch fields are the caller's. `sampled`: the planner samples,
// and each head's expected density is reported beside the realised one.
void FillCostReport(const CostAccount& account, AttentionKind kind, bool sampled,
                    v1::CostReport* report);

// The headline figures of a cost report as x-docsparse-* pairs: gRPC
// trailing metadata and HTTP headers.
std::vector<std::pair<std::string, std::string>> CostMetadata(const v1::CostReport& cost);

// The reports of a request's documents as one, for the headers of an HTTP
// request with several inputs: tokens, windows, edges and FLOPs summed,
// density the mean over the documents, budget met when met for all,
// batch size and timings the largest.
v1::CostReport CombineCostReports(const std::vector<const v1::CostReport*>& reports);

}  // namespace docsparse

#endif  // DOCSPARSE_SERVER_COST_REPORT_H_
