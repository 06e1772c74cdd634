// CostAccount (model/) -> docsparse.v1.CostReport (API).
#ifndef DOCSPARSE_SERVER_COST_REPORT_H_
#define DOCSPARSE_SERVER_COST_REPORT_H_

#include "docsparse/v1/docsparse.pb.h"
#include "model/attention/attention.h"
#include "model/attention/cost_model.h"

namespace docsparse {

v1::AttentionKind ToProto(AttentionKind kind);

// Fills the token, density, edge and FLOP fields of `report`; timings,
// budget and batch fields are the caller's.
void FillCostReport(const CostAccount& account, AttentionKind kind, v1::CostReport* report);

}  // namespace docsparse

#endif  // DOCSPARSE_SERVER_COST_REPORT_H_
