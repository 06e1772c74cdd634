// The CUDA edge-list executor on LibTorch tensors: the one torch-facing entry
// of kernels/edge_attention_cuda.h. It checks its inputs, takes the tensors'
// device and current stream, copies one head's list (host memory, as the edge
// planners make it) to the device without waiting on the stream, and checks
// the launch. Built with a CUDA LibTorch (scripts/build --cuda); in the
// default build it answers FAILED_PRECONDITION.
#ifndef DOCSPARSE_MODEL_ATTENTION_EDGE_ATTENTION_DEVICE_H_
#define DOCSPARSE_MODEL_ATTENTION_EDGE_ATTENTION_DEVICE_H_

#include <ATen/ATen.h>

#include "absl/status/status.h"
#include "model/attention/edge_plan.h"

namespace docsparse {

// out = softmax over each query's listed keys of (q·kᵀ·scale + the list's
// logit bias)·v for one head: q, k, v and out [len, head_dim], contiguous, on
// one CUDA device, one dtype (bf16, fp16 or fp32); `edges` has at most len
// rows, and queries beyond them, or with no key, get zeros. One head at a
// time because a layer's lists reach gigabytes at 16k tokens; the copy's
// pinned buffer is held by the caching host allocator until it has run.
absl::Status EdgeAttentionHeadOnDevice(const at::Tensor& q, const at::Tensor& k,
                                       const at::Tensor& v, const HeadEdgeList& edges, float scale,
                                       at::Tensor& out);

// The same over a list already on q's device (DeviceHeadEdgeList), read in
// place. Its shapes and device are checked; its keys, which only the device
// holds, are trusted to lie in [0, k's length).
absl::Status EdgeAttentionHeadOnDevice(const at::Tensor& q, const at::Tensor& k,
                                       const at::Tensor& v, const DeviceHeadEdgeList& edges,
                                       float scale, at::Tensor& out);

}  // namespace docsparse

#endif  // DOCSPARSE_MODEL_ATTENTION_EDGE_ATTENTION_DEVICE_H_
