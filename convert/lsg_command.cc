// `docsparse-convert lsg`: flags -> LsgOptions -> ConvertLsgFolder, with a
// progress line on stderr (weights are the slow part: a base model is 500 MB).
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>

#include "absl/strings/str_format.h"
#include "convert/commands.h"
#include "convert/flag_parser.h"
#include "convert/lsg_conversion.h"

namespace docsparse::convert {
namespace {

constexpr char kUsage[] =
    "docsparse-convert lsg --input DIR --output DIR --max-length N [flags]\n\n"
    "Extends a BERT, RoBERTa, DistilBERT or BART checkpoint (config.json, model.safetensors\n"
    "or a sharded index, tokenizer files) to LSG attention as the reference converter\n"
    "(github.com/ccdv-ai/convert_checkpoint_to_lsg) does: position tables tiled to N,\n"
    "512 global embeddings from the CLS/BOS and MASK embeddings plus strided positions,\n"
    "LSG fields in config.json. Unset LSG fields keep an LSG input's values, else the\n"
    "reference defaults shown below.";

// Rewrites one stderr line (a terminal) or prints every 10% (a log file).
class ProgressPrinter {
 public:
  ProgressPrinter() : tty_(::isatty(STDERR_FILENO) == 1) {}

  void operator()(const WriteProgress& p) {
    const int percent =
        p.bytes_total == 0 ? 100 : static_cast<int>(100 * p.bytes_done / p.bytes_total);
    const bool done = p.tensors_done == p.tensors_total && p.bytes_done == p.bytes_total;
    const auto now = std::chrono::steady_clock::now();
    if (tty_) {
      if (!done && now - last_ < std::chrono::milliseconds(100)) return;
    } else if (!done && percent / 10 == last_decile_) {
      return;
    }
    last_ = now;
    last_decile_ = percent / 10;
    std::fprintf(stderr, "%swriting model.safetensors: %zu/%zu tensors, %.1f/%.1f MB (%d%%)%s",
                 tty_ ? "\r" : "", p.tensors_done, p.tensors_total, p.bytes_done / 1e6,
                 p.bytes_total / 1e6, percent, tty_ && !done ? "" : "\n");
    std::fflush(stderr);
  }

 private:
  bool tty_;
  std::chrono::steady_clock::time_point last_;
  int last_decile_ = -1;
};

}  // namespace

int RunLsgCommand(int argc, char** argv) {
  std::string input, output, sparsity_type = "norm", architecture, name_or_path;
  int64_t max_length = 0, block_size = 128, sparse_block_size = 128, sparsity_factor = 2,
          num_global_tokens = 1, lsh_num_pre_rounds = 1, stride = 64;
  bool adaptive = true, mask_first_token = false, pool_with_global = true,
       pass_global_tokens_to_decoder = true, use_token_ids = true, keep_first = false,
       resize_lsg = false, quiet = false;

  FlagParser flags(kUsage);
  flags.AddString("input", &input, "model folder to convert", /*required=*/true);
  flags.AddString("output", &output, "folder to write the LSG model to", /*required=*/true);
  flags.AddInt("max-length", &max_length, "positions after conversion", /*required=*/true);
  flags.AddInt("block-size", &block_size, "LSG local block size");
  flags.AddInt("sparse-block-size", &sparse_block_size, "LSG sparse block size");
  flags.AddInt("sparsity-factor", &sparsity_factor, "LSG sparsity factor");
  flags.AddString("sparsity-type", &sparsity_type,
                  "none|norm|pooling|lsh|stride|block_stride|bos_pooling");
  flags.AddInt("num-global-tokens", &num_global_tokens, "global tokens used, 1..512");
  flags.AddBool("adaptive", &adaptive, "LSG adaptive block sizes for short inputs");
  flags.AddBool("mask-first-token", &mask_first_token, "LSG mask_first_token");
  flags.AddBool("pool-with-global", &pool_with_global, "LSG pool_with_global");
  flags.AddInt("lsh-num-pre-rounds", &lsh_num_pre_rounds, "LSG lsh_num_pre_rounds");
  flags.AddBool("pass-global-tokens-to-decoder", &pass_global_tokens_to_decoder,
                "BART: LSG pass_global_tokens_to_decoder");
  flags.AddString("architecture", &architecture,
                  "class to convert as, e.g. BertForMaskedLM (default: config.json's)");
  flags.AddInt("global-positional-stride", &stride, "stride of the global tokens' positions");
  flags.AddBool("use-token-ids", &use_token_ids, "BERT: add token type 0 to global embeddings");
  flags.AddBool("keep-first-global-token", &keep_first,
                "LSG input: keep its first global embedding");
  flags.AddBool("resize-lsg", &resize_lsg, "LSG input: only re-tile the positions");
  flags.AddString("name-or-path", &name_or_path,
                  "config.json _name_or_path (default: --output, as the reference)");
  flags.AddBool("quiet", &quiet, "no progress line");

  const absl::Status parsed = flags.Parse(argc, argv);
  if (flags.help_requested()) {
    std::fputs(flags.Help().c_str(), stdout);
    return 0;
  }
  if (!parsed.ok()) {
    std::fprintf(stderr, "docsparse-convert lsg: %s\n", std::string(parsed.message()).c_str());
    return 2;
  }

  LsgOptions options;
  options.max_length = max_length;
  if (flags.WasSet("block-size")) options.block_size = block_size;
  if (flags.WasSet("sparse-block-size")) options.sparse_block_size = sparse_block_size;
  if (flags.WasSet("sparsity-factor")) options.sparsity_factor = sparsity_factor;
  if (flags.WasSet("sparsity-type")) options.sparsity_type = sparsity_type;
  if (flags.WasSet("num-global-tokens")) options.num_global_tokens = num_global_tokens;
  if (flags.WasSet("adaptive")) options.adaptive = adaptive;
  if (flags.WasSet("mask-first-token")) options.mask_first_token = mask_first_token;
  if (flags.WasSet("pool-with-global")) options.pool_with_global = pool_with_global;
  if (flags.WasSet("lsh-num-pre-rounds")) options.lsh_num_pre_rounds = lsh_num_pre_rounds;
  if (flags.WasSet("pass-global-tokens-to-decoder")) {
    options.pass_global_tokens_to_decoder = pass_global_tokens_to_decoder;
  }
  options.architecture = architecture;
  options.global_positional_stride = stride;
  options.use_token_ids = use_token_ids;
  options.keep_first_global_token = keep_first;
  options.resize_lsg = resize_lsg;
  options.name_or_path = flags.WasSet("name-or-path") ? name_or_path : output;

  ProgressPrinter printer;
  WriteProgressCallback progress;
  if (!quiet) progress = [&printer](const WriteProgress& p) { printer(p); };
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<LsgFolderSummary> summary = ConvertLsgFolder(input, output, options, progress);
  if (!summary.ok()) {
    std::fprintf(stderr, "docsparse-convert lsg: %s\n",
                 std::string(summary.status().message()).c_str());
    return 1;
  }
  for (const std::string& note : summary->conversion.notes) {
    std::fprintf(stderr, "docsparse-convert lsg: note: %s\n", note.c_str());
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("docsparse-convert lsg: wrote %s (%s, %zu tensors, %.1f MB, %d positions) in %.1fs\n",
              output.c_str(), summary->conversion.lsg_architecture.c_str(),
              summary->conversion.tensors.size(), summary->weight_bytes / 1e6,
              static_cast<int>(max_length), seconds);
  return 0;
}

}  // namespace docsparse::convert
