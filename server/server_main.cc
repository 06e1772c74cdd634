// docsparse-server: loads the model repository, serves DocumentService,
// KServe v2, grpc.health.v1 and reflection (v1 and v1alpha) over gRPC, and /metrics, /healthz,
// /readyz over HTTP. SIGINT/SIGTERM: health NOT_SERVING, finish in-flight work within the grace
// period, exit 0.
#include <ATen/Parallel.h>
#include <google/protobuf/stubs/logging.h>
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <omp.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/cleanup/cleanup.h"
#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/cpu_runtime.h"
#include "common/mutex.h"
#include "grpc/health/v1/health.pb.h"
#include "kernels/cpu_features.h"
#include "model/attention/compute_device.h"
#include "model/checkpoint/huge_page_allocator.h"
#include "server/compute_threads.h"
#include "server/document_service.h"
#include "server/document_tasks.h"
#include "server/http_api.h"
#include "server/http_endpoint.h"
#include "server/kserve_service.h"
#include "server/metrics.h"
#include "server/model_batchers.h"
#include "server/model_registry.h"
#include "server/reflection_v1_service.h"
#include "server/request_runner.h"
#include "server/tls_files.h"
#include "server/token_auth.h"

ABSL_FLAG(std::string, host, "0.0.0.0", "Address to bind the gRPC and HTTP ports to.");
ABSL_FLAG(int, port, 50051, "gRPC port (0 picks a free one).");
ABSL_FLAG(int, metrics_port, 9090, "HTTP port for /metrics, /healthz, /readyz (0: free one).");
ABSL_FLAG(std::string, model_repository, "models", "Folder of model folders.");
ABSL_FLAG(int, threads, 0,
          "LibTorch intra-op threads, divided among the --instances (0: all cores).");
ABSL_FLAG(int, instances, 0,
          "Model instances: batches that compute at once, each on a thread of its own (on a "
          "GPU with a CUDA stream of its own), sharing --threads. 0: 2 on a GPU (one batch's "
          "kernels run while another's host work is done); on the CPU 2 (two batches side "
          "by side compute more than one on every core) with --widen_lone_batches and two "
          "threads or more, else 1.");
ABSL_FLAG(bool, widen_lone_batches, true,
          "On the CPU with more than one instance: a batch that computes alone (no other "
          "instance busy, none queued) gets every thread, not its instance's share, and "
          "gives the borrowed ones back at its next layer once another batch waits: a lone "
          "request is as fast as on one instance.");
ABSL_FLAG(std::string, precision, "",
          "Precision of every encoder model: auto (bf16 where the CPU has AMX "
          "or AVX512-BF16, else fp32), fp32, bf16, int8 (int8 linear layers, the rest bf16 "
          "where the CPU has it; CPU only) or fp16 (a CUDA device only). Empty: each model's "
          "docsparse.json \"precision\" (default auto).");
ABSL_FLAG(std::string, device, "cpu",
          "Where the models run: cpu, cuda (device 0) or cuda:N (a build on a CUDA LibTorch: "
          "scripts/build --cuda). On a GPU, precision auto is bf16 and summarizers run there "
          "too.");
ABSL_FLAG(int, max_queue, 256,
          "Requests waiting per model before RESOURCE_EXHAUSTED (also capped by the model's "
          "batching.max_queue_size).");
ABSL_FLAG(int, max_batch_size, 0,
          "Overrides every model's batching.max_batch_size (0: keep; 1: no batching).");
ABSL_FLAG(int, max_concurrent_streams, 64,
          "Streamed summaries running at once: gRPC SummarizeStream calls and HTTP /summarize "
          "streams together.");
ABSL_FLAG(int64_t, max_document_bytes, 8 << 20, "Largest document accepted, in bytes.");
ABSL_FLAG(int64_t, max_document_tokens, 1 << 17, "Largest document accepted, in tokens.");
ABSL_FLAG(int64_t, max_request_tokens, 1 << 17,
          "Most tokens one request may make the server encode, everything priced before it is "
          "queued: document windows, label prompts, summary sentences, every document of a "
          "KServe call. Above it: RESOURCE_EXHAUSTED naming the price (docs/RELIABILITY.md).");
ABSL_FLAG(double, max_request_gflops, 2048,
          "Most forward-pass GFLOPs one request may cost, priced by the cost model before it "
          "is queued (encoder, attention plan and, for summaries, the decoder at full length "
          "and beams). Above it: RESOURCE_EXHAUSTED naming the price.");
ABSL_FLAG(int, max_generated_tokens, 1024,
          "Tokens one abstractive summary may generate (its max_length / max_new_tokens, or the "
          "model's); more is RESOURCE_EXHAUSTED.");
ABSL_FLAG(int, max_beams, 16, "Beams one abstractive summary may search with.");
ABSL_FLAG(int64_t, label_cache_bytes, 64 << 20,
          "Bytes of zero-shot label embeddings each model keeps (least recently used "
          "evicted first).");
ABSL_FLAG(double, shutdown_grace_seconds, 30, "Time in-flight requests get on shutdown.");
ABSL_FLAG(double, http_timeout_seconds, 300,
          "Deadline of an HTTP API request (x-docsparse-timeout-ms asks for less): the bound on "
          "its work, since an HTTP client that leaves is not noticed before its answer.");
ABSL_FLAG(int, http_threads, 32,
          "HTTP handler threads: HTTP requests in progress at once (each waits on its thread).");
ABSL_FLAG(int, max_client_batch_size, 32, "Documents in one HTTP API request (TEI's flag).");
ABSL_FLAG(std::string, auth_token_file, "",
          "Bearer tokens that may call the server, one a line, each optionally followed by the "
          "models it may use (server/token_auth.h). Empty: no authentication.");
ABSL_FLAG(bool, auth_protect_health_and_metrics, false,
          "With --auth_token_file: /metrics, /healthz, /readyz and /health want a token too "
          "(gRPC health and reflection stay open).");
ABSL_FLAG(int64_t, max_http_body_bytes, 0,
          "Largest HTTP request body (0: 4x --max_document_bytes); larger ones get 413.");
ABSL_FLAG(std::string, tls_cert_file, "",
          "PEM certificate (then its chain) for TLS on the gRPC and HTTP ports; with "
          "--tls_key_file. Empty: plain text.");
ABSL_FLAG(std::string, tls_key_file, "", "PEM private key of --tls_cert_file.");
ABSL_FLAG(std::string, tls_client_ca_file, "",
          "PEM CA certificates: clients must present a certificate they signed (mutual TLS).");
ABSL_FLAG(int, tls_reload_seconds, 60,
          "How often the TLS files are looked at again; changed files serve new handshakes.");
ABSL_FLAG(bool, http_tls, true,
          "With --tls_cert_file: the HTTP port speaks HTTPS too. false keeps it plain (for "
          "probes and scrapes that cannot present a client certificate).");

namespace docsparse {
namespace {

// The TLS flags, checked as a combination (the files are read by
// TlsReloader::Start); nullopt: plain text.
absl::StatusOr<std::optional<TlsFiles>> TlsFilesFromFlags() {
  TlsFiles files;
  files.cert_file = absl::GetFlag(FLAGS_tls_cert_file);
  files.key_file = absl::GetFlag(FLAGS_tls_key_file);
  files.client_ca_file = absl::GetFlag(FLAGS_tls_client_ca_file);
  files.reload_seconds = absl::GetFlag(FLAGS_tls_reload_seconds);
  if (files.cert_file.empty() && files.key_file.empty()) {
    if (files.mutual()) {
      return absl::InvalidArgumentError(
          "--tls_client_ca_file: needs --tls_cert_file and "
          "--tls_key_file (mutual TLS is TLS first)");
    }
    return std::nullopt;
  }
  if (files.cert_file.empty() || files.key_file.empty()) {
    return absl::InvalidArgumentError(files.cert_file.empty()
                                          ? "--tls_cert_file: not set, but --tls_key_file is"
                                          : "--tls_key_file: not set, but --tls_cert_file is");
  }
  if (files.reload_seconds < 1) {
    return absl::InvalidArgumentError(absl::StrCat("--tls_reload_seconds: ", files.reload_seconds,
                                                   " is not a positive number of seconds"));
  }
  return files;
}

constexpr char kServiceName[] = "docsparse.v1.DocumentService";

// Self-pipe: the handler may run on any thread (libraries start threads
// before main), so it only writes the signal number; a normal thread reads it.
int g_signal_pipe[2] = {-1, -1};

void OnStopSignal(int signal_number) {
  const char byte = static_cast<char>(signal_number);
  [[maybe_unused]] const ssize_t written = write(g_signal_pipe[1], &byte, 1);
}

void InstallStopHandlers() {
  if (pipe(g_signal_pipe) != 0) return;
  struct sigaction action {};
  action.sa_handler = OnStopSignal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
  // A client that hangs up mid-answer must cost that answer only: OpenSSL
  // writes TLS records with write(), which raises SIGPIPE on a closed socket.
  signal(SIGPIPE, SIG_IGN);
}

// Blocks until SIGINT or SIGTERM; returns its number.
int WaitForStopSignal() {
  char byte = 0;
  while (read(g_signal_pipe[0], &byte, 1) < 0 && errno == EINTR) {
  }
  return byte;
}

// protobuf logs an ERROR line for every string field with invalid UTF-8 it
// is asked to parse; such a request is answered INVALID_ARGUMENT, and a
// client must not be able to fill the server's log with them.
void QuietProtobufParseErrors() {
  google::protobuf::SetLogHandler([](google::protobuf::LogLevel level, const char* filename,
                                     int line, const std::string& message) {
    if (message.find("contains invalid UTF-8 data when parsing") != std::string::npos) return;
    static const char* const kLevels[] = {"INFO", "WARNING", "ERROR", "FATAL"};
    std::cerr << "[libprotobuf " << kLevels[std::clamp(static_cast<int>(level), 0, 3)] << " "
              << filename << ":" << line << "] " << message << std::endl;
  });
}

int Serve() {
  InstallStopHandlers();
  QuietProtobufParseErrors();

  KeepFreedMemoryForReuse();  // before any thread that allocates starts
  UseHugePagesForLargeCpuTensors();
  absl::StatusOr<at::Device> device = ParseComputeDevice(absl::GetFlag(FLAGS_device));
  if (!device.ok()) {
    std::cerr << "docsparse-server: --device: " << device.status().message() << "\n";
    return 2;
  }
  const absl::StatusOr<ComputeLayout> layout =
      LayOutCompute(absl::GetFlag(FLAGS_instances), absl::GetFlag(FLAGS_threads), device->is_cuda(),
                    static_cast<int>(std::thread::hardware_concurrency()),
                    absl::GetFlag(FLAGS_widen_lone_batches));
  if (!layout.ok()) {
    std::cerr << "docsparse-server: " << layout.status().message() << "\n";
    return 2;
  }
  // Every model computation runs on these threads, loading and warm-up
  // included (compute_threads.h says why). Debian's LibTorch starts with one
  // intra-op thread; set each instance's count explicitly, on its thread,
  // and have LibTorch take it then: its first use on a thread would
  // otherwise reset the thread's count to the process-wide one, a widened
  // batch's too. A widened batch sets only its own thread's OpenMP count
  // (omp_set_num_threads; at::set_num_threads would change the others'
  // next first use). On a GPU each thread's CUDA work goes to a stream of
  // its own (not the legacy default stream, which would serialise with any
  // other), for the thread's life.
  Mutex setup_mu;  // at::set_num_threads also resets process-wide state
  LoneTaskWidening widening;
  widening.shared = layout->threads_per_instance;
  widening.lone = layout->lone_batch_threads;
  widening.set_threads = [](int threads) { omp_set_num_threads(threads); };
  ComputeThreads compute(
      layout->instances,
      [threads = layout->threads_per_instance, device = *device, &setup_mu] {
        {
          MutexLock lock(&setup_mu);
          at::set_num_threads(threads);
          at::get_num_threads();
        }
        if (device.is_cuda()) static thread_local DeviceStreamScope stream(device);
      },
      widening);
  Mutex threads_mu;
  int instance_threads = 0;
  compute.RunOnEach([&] {
    MutexLock lock(&threads_mu);
    instance_threads = at::get_num_threads();
  });
  int lone_threads = 0;
  compute.Run([&lone_threads] { lone_threads = at::get_num_threads(); });
  std::cerr << "docsparse-server: " << compute.size()
            << (compute.size() == 1 ? " instance of " : " instances of ") << instance_threads
            << (instance_threads == 1 ? " thread" : " threads");
  if (lone_threads != instance_threads) std::cerr << " (" << lone_threads << " for a lone batch)";
  std::cerr << ", BLAS " << BlasDescription() << ", CPU " << IsaName(HostCpuFeatures()) << "\n";
  if (device->is_cuda()) {
    std::cerr << "docsparse-server: models on " << DescribeDevice(*device) << "\n";
  }

  Metrics metrics(DOCSPARSE_VERSION);
  if (device->is_cuda()) {
    metrics.SetDeviceSource(device->str(), [device = *device] {
      const std::optional<DeviceMemory> memory = ReadDeviceMemory(device);
      DeviceReading reading;
      if (memory.has_value()) {
        reading.allocated_bytes = memory->allocated_bytes;
        reading.reserved_bytes = memory->reserved_bytes;
        reading.total_bytes = memory->total_bytes;
      }
      reading.utilization = ReadDeviceUtilization(device).value_or(-1);
      return reading;
    });
  }
  std::atomic<bool> ready{false};
  const std::string host = absl::GetFlag(FLAGS_host);
  HttpApiOptions api_options;
  api_options.version = DOCSPARSE_VERSION;
  api_options.timeout = std::chrono::milliseconds(
      static_cast<int64_t>(absl::GetFlag(FLAGS_http_timeout_seconds) * 1e3));
  api_options.threads = absl::GetFlag(FLAGS_http_threads);
  api_options.max_inputs =
      static_cast<size_t>(std::max(1, absl::GetFlag(FLAGS_max_client_batch_size)));
  const int64_t body_flag = absl::GetFlag(FLAGS_max_http_body_bytes);
  const size_t max_body_bytes =
      static_cast<size_t>(body_flag > 0 ? body_flag : 4 * absl::GetFlag(FLAGS_max_document_bytes));
  api_options.max_body_bytes = max_body_bytes;
  HttpApi api(api_options);
  std::unique_ptr<TokenAuthenticator> auth;
  if (const std::string path = absl::GetFlag(FLAGS_auth_token_file); !path.empty()) {
    absl::StatusOr<std::unique_ptr<TokenAuthenticator>> loaded = TokenAuthenticator::Load(path);
    if (!loaded.ok()) {
      std::cerr << "docsparse-server: " << loaded.status().message() << "\n";
      return 2;
    }
    auth = *std::move(loaded);
    std::cerr << "docsparse-server: " << auth->token_count() << " bearer token(s) from " << path
              << "\n";
  }
  const absl::StatusOr<std::optional<TlsFiles>> tls = TlsFilesFromFlags();
  if (!tls.ok()) {
    std::cerr << "docsparse-server: " << tls.status().message() << "\n";
    return 2;
  }
  std::unique_ptr<TlsReloader> tls_files;
  if (tls->has_value()) {
    absl::StatusOr<std::unique_ptr<TlsReloader>> started = TlsReloader::Start(**tls);
    if (!started.ok()) {
      std::cerr << "docsparse-server: " << started.status().message() << "\n";
      return 2;
    }
    tls_files = *std::move(started);
    std::cerr << "docsparse-server: TLS from " << (*tls)->cert_file
              << ((*tls)->mutual() ? ", client certificates required" : "")
              << (absl::GetFlag(FLAGS_http_tls) ? "" : " (gRPC only: --http_tls=false)")
              << ", files looked at every " << (*tls)->reload_seconds << " s\n";
  }
  auto http = HttpEndpoint::Start(
      host, absl::GetFlag(FLAGS_metrics_port), [&metrics] { return metrics.Render(); },
      [&ready] { return ready.load(); }, &api, max_body_bytes,
      absl::GetFlag(FLAGS_auth_protect_health_and_metrics) ? auth.get() : nullptr,
      absl::GetFlag(FLAGS_http_tls) ? tls_files.get() : nullptr);
  if (!http.ok()) {
    std::cerr << "docsparse-server: " << http.status().message() << "\n";
    return 1;
  }

  ModelLoadOptions load_options;
  load_options.device = *device;
  load_options.label_cache_bytes = static_cast<size_t>(absl::GetFlag(FLAGS_label_cache_bytes));
  if (const std::string flag = absl::GetFlag(FLAGS_precision); !flag.empty()) {
    load_options.precision = ParsePrecision(flag);
    if (!load_options.precision.has_value()) {
      std::cerr << "docsparse-server: --precision: \"" << flag << "\" is not one of "
                << absl::StrJoin(kPrecisions, ", ",
                                 [](std::string* out, Precision precision) {
                                   out->append(PrecisionName(precision));
                                 })
                << "\n";
      return 2;
    }
  }
  absl::StatusOr<std::unique_ptr<ModelRegistry>> registry;
  compute.Run([&registry, &load_options] {
    registry = ModelRegistry::Load(absl::GetFlag(FLAGS_model_repository), load_options);
    // The other instances read these weights from their own streams.
    FinishQueuedDeviceWork(load_options.device);
  });
  if (!registry.ok()) {
    std::cerr << "docsparse-server: " << registry.status().message() << "\n";
    return 1;
  }
  for (const auto& [name, status] : (*registry)->failed()) {
    std::cerr << "docsparse-server: " << status.message() << " (the other models serve)\n";
  }
  for (const ServedModel* model : (*registry)->models()) {
    metrics.RegisterModel(model->name, model->serving.attention.kind, model->load_seconds);
    metrics.SetModelCompute(model->name, PrecisionName(model->precision()), model->isa());
    if (model->labels != nullptr) {
      metrics.SetLabelCacheSource(model->name, [cache = model->labels.get()] {
        const LabelCacheStats stats = cache->stats();
        return LabelCacheReading{stats.hits, stats.misses, stats.evictions, stats.bytes};
      });
    }
    std::cerr << "docsparse-server: loaded model '" << model->name << "' from " << model->path
              << " in " << model->load_seconds << " s (" << PrecisionName(model->precision())
              << " on " << model->device().str() << ")\n";
  }

  ServerLimits limits;
  limits.max_document_bytes = absl::GetFlag(FLAGS_max_document_bytes);
  limits.max_document_tokens = absl::GetFlag(FLAGS_max_document_tokens);
  limits.max_request_tokens = absl::GetFlag(FLAGS_max_request_tokens);
  limits.max_request_gflops = absl::GetFlag(FLAGS_max_request_gflops);
  limits.max_generated_tokens = absl::GetFlag(FLAGS_max_generated_tokens);
  limits.max_beams = absl::GetFlag(FLAGS_max_beams);
  DocumentTasks tasks(**registry, limits);
  auto batchers = std::make_unique<ModelBatchers>(
      **registry, metrics, absl::GetFlag(FLAGS_max_batch_size),
      static_cast<size_t>(absl::GetFlag(FLAGS_max_queue)), &compute, layout->threads_per_instance);
  RequestRunner runner(**registry, tasks, *batchers, metrics,
                       absl::GetFlag(FLAGS_max_concurrent_streams));
  runner.SetAuthenticator(auth.get());
  DocumentService service(runner);
  api.Attach(runner, **registry);
  // The HTTP handlers use the runner: stop them before it goes, whichever
  // way Serve returns.
  absl::Cleanup stop_http = [&http] { (*http)->Stop(); };
  KServeService kserve(runner, **registry);
  // Reflection resolves what the generated pool holds; the health proto is
  // there only if something links its generated code (gRPC's own health
  // service is not protobuf C++), so name it here.
  (void)grpc::health::v1::HealthCheckRequest::descriptor();
  ReflectionV1Service reflection_v1({
      std::string(kServiceName),
      inference::GRPCInferenceService::service_full_name(),
      "grpc.health.v1.Health",
      "grpc.reflection.v1.ServerReflection",
      "grpc.reflection.v1alpha.ServerReflection",
  });

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  int grpc_port = 0;
  builder.AddListeningPort(
      absl::StrCat(host, ":", absl::GetFlag(FLAGS_port)),
      tls_files ? tls_files->GrpcCredentials() : grpc::InsecureServerCredentials(), &grpc_port);
  builder.RegisterService(&service);
  builder.RegisterService(&kserve);
  builder.RegisterService(&reflection_v1);
  // Documents are large: allow the byte limit plus room for the envelope.
  builder.SetMaxReceiveMessageSize(
      static_cast<int>(std::min<int64_t>(limits.max_document_bytes + (1 << 20), INT32_MAX)));
  // Long idle client connections behind load balancers: ping every 30 s so
  // dead peers are noticed, and accept client pings as often as every 10 s.
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, 30000);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 10000);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || grpc_port == 0) {
    std::cerr << "docsparse-server: cannot listen on " << host << ":" << absl::GetFlag(FLAGS_port)
              << "\n";
    return 1;
  }
  grpc::HealthCheckServiceInterface* health = server->GetHealthCheckService();
  health->SetServingStatus(false);
  std::cout << "docsparse-server: listening grpc=" << host << ":" << grpc_port << " http=" << host
            << ":" << (*http)->port() << std::endl;

  // Warm-up: one forward pass per model and instance before reporting
  // SERVING, and one more at a lone batch's width where that differs.
  for (const ServedModel* model : (*registry)->models()) {
    Mutex warm_mu;
    absl::Status warm;
    const auto warm_up = [&] {
      absl::Status status = WarmUp(*model);
      MutexLock lock(&warm_mu);
      warm.Update(status);
    };
    compute.RunOnEach(warm_up);
    if (lone_threads != instance_threads) compute.Run(warm_up);
    if (!warm.ok()) {
      std::cerr << "docsparse-server: warm-up of '" << model->name << "' failed: " << warm.message()
                << "\n";
      return 1;
    }
  }
  // gRPC first, /readyz last: whoever sees /readyz say ready (a Kubernetes
  // probe) finds gRPC health SERVING too.
  runner.SetReady(true);
  health->SetServingStatus(true);
  health->SetServingStatus(kServiceName, true);
  health->SetServingStatus("inference.GRPCInferenceService", true);
  ready.store(true);
  std::cout << "docsparse-server: ready" << std::endl;

  std::thread stopper([&] {
    const int signal_number = WaitForStopSignal();
    std::cout << "docsparse-server: signal " << signal_number << ", shutting down" << std::endl;
    // Drain: refuse new work, report NOT_SERVING, let in-flight requests
    // finish within the grace period, then cancel what is left.
    ready.store(false);
    runner.SetReady(false);
    health->SetServingStatus(false);
    const auto grace = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::duration<double>(absl::GetFlag(FLAGS_shutdown_grace_seconds)));
    // A batch that is computing cannot be interrupted, and gRPC waits for its
    // calls even after cancelling them. Past the grace period no caller waits
    // for those answers: exit rather than overstay, with status 1, since
    // work was cut off (a clean drain exits 0).
    const auto exit_by = std::chrono::steady_clock::now() + grace + std::chrono::milliseconds(500);
    std::thread([exit_by] {
      std::this_thread::sleep_until(exit_by);
      std::cout << "docsparse-server: grace period over with work still running; stopped (exit 1)"
                << std::endl;
      std::_Exit(1);
    }).detach();
    server->Shutdown(std::chrono::system_clock::now() + grace);
  });
  server->Wait();
  stopper.join();
  // HTTP requests in progress finish on the batchers, which are still there.
  std::move(stop_http).Invoke();
  batchers.reset();  // finishes whatever is still queued, joins the threads
  std::cout << "docsparse-server: stopped" << std::endl;
  return 0;
}

}  // namespace
}  // namespace docsparse

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "docsparse-server --model_repository=DIR [--port=50051] [--metrics_port=9090]");
  absl::ParseCommandLine(argc, argv);
  return docsparse::Serve();
}
