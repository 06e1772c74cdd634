// What a request will make the server compute, priced before it is queued
// (docs/RELIABILITY.md): the tokens it sends through the encoder, by part
// (document windows, label prompts, summary sentences), and the forward-pass
// FLOPs of the cost model (linear layers, the planned attention and, for
// abstractive summaries, the decoder at its full length and beam count).
// Admission refuses a request whose price is over the server's per-request
// caps, whatever its size on the wire: a few bytes of labels can cost a
// minute of compute.
#ifndef DOCSPARSE_SERVER_REQUEST_PRICE_H_
#define DOCSPARSE_SERVER_REQUEST_PRICE_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "model/attention/attention.h"
#include "model/checkpoint/generation_config.h"
#include "server/model_registry.h"

namespace docsparse {

// Hard limits of this server, whatever the model allows.
struct ServerLimits {
  int64_t max_document_bytes = 8 << 20;
  int64_t max_document_tokens = 1 << 17;
  // Per request, everything it makes the server compute (the flags
  // --max_request_tokens and --max_request_gflops; docs/RELIABILITY.md says
  // why these defaults).
  int64_t max_request_tokens = 1 << 17;
  double max_request_gflops = 2048;
  // Abstractive summaries: tokens one may generate and beams it may search
  // with, whatever its price (--max_generated_tokens, --max_beams).
  int max_generated_tokens = 1024;
  int max_beams = 16;
};

struct RequestPrice {
  // Encoder tokens by part: "document", "label", "sentence".
  std::map<std::string, int64_t> tokens;
  double flops = 0;

  int64_t total_tokens() const;
  RequestPrice& operator+=(const RequestPrice& other);
};

// The encoder's price of `sequences` run with `attention` on `model`: their
// tokens counted as `part`, and their linear and planned attention FLOPs.
RequestPrice PriceEncoding(const ServedModel& model, const ItemAttentionOptions& attention,
                           const std::vector<std::vector<int32_t>>& sequences,
                           const std::string& part);

// An upper estimate of the decoder's FLOPs for generating from
// `encoder_rows` encoder outputs with `generation` (every beam to the
// maximum length): per step and beam, the self- and cross-attention
// projections, attention over the cache and the encoder rows, the
// feed-forward and the LM head; plus projecting the encoder rows into each
// layer's cross-attention keys and values once.
double DecoderFlops(const ServedModel& model, const GenerationConfig& generation,
                    int64_t encoder_rows);

// OK, or RESOURCE_EXHAUSTED naming the request's price, its parts and the
// limit it is over.
absl::Status AdmitRequest(const RequestPrice& price, const ServerLimits& limits);

// RESOURCE_EXHAUSTED, naming the field and the flag, when `generation` (the
// model's defaults with the request's overrides) would generate more tokens
// or search more beams than `limits` allow.
absl::Status CheckGenerationCaps(const GenerationConfig& generation, const ServerLimits& limits);

}  // namespace docsparse

#endif  // DOCSPARSE_SERVER_REQUEST_PRICE_H_
