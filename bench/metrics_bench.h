// `docsparse-bench metrics`: what recording one request in the server's
// metrics costs on the request path — ObserveRequest with a full cost report,
// a batch observation and the in-flight gauge up and down, as the server
// records every answered request — in nanoseconds per request, with 1 and
// --metrics_threads threads recording into the same model's series at once
// (the contended case of a busy server).
#ifndef DOCSPARSE_BENCH_METRICS_BENCH_H_
#define DOCSPARSE_BENCH_METRICS_BENCH_H_

namespace docsparse::bench {

int RunMetricsBench();

}  // namespace docsparse::bench

#endif  // DOCSPARSE_BENCH_METRICS_BENCH_H_
