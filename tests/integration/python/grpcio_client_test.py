#!/usr/bin/env python3
"""An independent Python grpcio client against the real docsparse-server.

Generates stubs from proto/ with grpcio-tools, starts docsparse-server on
loopback, and checks: grpc.health.v1 says SERVING, server reflection lists
DocumentService, every DocumentService RPC answers, and each error status of
DESIGN.md comes back with the field named. Reflection (v1alpha and v1) lists
the services and resolves each of them. Prints "N passed, M failed".
"""
import argparse
import math
import os
import subprocess
import sys
import tempfile
import traceback

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from grpc_tools import protoc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import server_process  # noqa: E402

GPL3 = "/usr/share/common-licenses/GPL-3"


def generate_stubs(proto_dir, out_dir):
    import shutil

    import grpc_tools

    include = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
    # Reflection v1's stubs would land in a Python package "grpc", which the
    # grpc library owns: generate them from a copy at another path (module
    # reflection_v1.reflection_pb2; the proto package stays grpc.reflection.v1).
    copies = os.path.join(out_dir, "proto-copies")
    os.makedirs(os.path.join(copies, "reflection_v1"))
    shutil.copy(os.path.join(proto_dir, "grpc/reflection/v1/reflection.proto"),
                os.path.join(copies, "reflection_v1/reflection.proto"))
    code = protoc.main([
        "protoc", f"-I{proto_dir}", f"-I{copies}", f"-I{include}", f"--python_out={out_dir}",
        f"--grpc_python_out={out_dir}",
        os.path.join(proto_dir, "docsparse/v1/docsparse.proto"),
        os.path.join(copies, "reflection_v1/reflection.proto"),
    ])
    if code != 0:
        raise RuntimeError("protoc failed")
    sys.path.insert(0, out_dir)


def resolve_symbol(reflection_pb2, reflection_pb2_grpc, channel, symbol):
    """The file descriptors reflection returns for `symbol`, as a pool."""
    from google.protobuf import descriptor_pb2, descriptor_pool

    stub = reflection_pb2_grpc.ServerReflectionStub(channel)
    [response] = list(stub.ServerReflectionInfo(
        iter([reflection_pb2.ServerReflectionRequest(file_containing_symbol=symbol)]),
        timeout=10))
    assert not response.HasField("error_response"), response.error_response
    pool = descriptor_pool.DescriptorPool()
    files = [descriptor_pb2.FileDescriptorProto.FromString(raw)
             for raw in response.file_descriptor_response.file_descriptor_proto]
    # Dependencies first, as a client adds them.
    for proto in reversed(files):
        pool.Add(proto)
    return pool


def start_server(binary, repository):
    # fp32: answers are compared with each other across batch compositions at
    # 1e-6; bf16 products round differently with the shape of the batch (the
    # bf16 gate is tests/integration/precision_server_test.cc).
    return server_process.start_server(
        binary, repository, ["--threads=2", "--precision=fp32", "--max_document_tokens=20000"])


class Checks:
    def __init__(self):
        self.passed = 0
        self.failed = 0

    def run(self, name, fn):
        try:
            fn()
            self.passed += 1
            print(f"[ OK ] {name}")
        except Exception:  # report every failure, keep going
            self.failed += 1
            print(f"[FAIL] {name}\n{traceback.format_exc()}")

    def stop_server(self, proc):
        """SIGTERM, and the server must exit 0 within 30 s."""
        proc.terminate()
        try:
            code = proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = None
        self.run("server exits 0 on SIGTERM", lambda: _expect_zero(code))

    def summary(self):
        """Prints the closing line; the process exit status."""
        print(f"{self.passed} passed, {self.failed} failed")
        return 0 if self.failed == 0 else 1


def _expect_zero(code):
    assert code == 0, f"server exit status {code} after SIGTERM"


def expect_error(call, request, code, field):
    try:
        call(request, timeout=60)
    except grpc.RpcError as error:
        assert error.code() == code, f"{error.code()} != {code}: {error.details()}"
        assert field in error.details(), f"'{field}' not in '{error.details()}'"
        return
    raise AssertionError(f"expected {code}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--server-binary", required=True)
    parser.add_argument("--proto-dir", required=True)
    parser.add_argument("--model-repository", required=True)
    args = parser.parse_args()

    stubs = tempfile.mkdtemp(prefix="docsparse-py-")
    generate_stubs(args.proto_dir, stubs)
    from docsparse.v1 import docsparse_pb2 as pb
    from docsparse.v1 import docsparse_pb2_grpc as pb_grpc

    proc, address = start_server(args.server_binary, args.model_repository)
    checks = Checks()
    try:
        channel = grpc.insecure_channel(
            address, options=[("grpc.max_receive_message_length", 64 << 20)])
        grpc.channel_ready_future(channel).result(timeout=30)
        stub = pb_grpc.DocumentServiceStub(channel)
        gpl = open(GPL3, encoding="utf-8").read()

        def health():
            health_stub = health_pb2_grpc.HealthStub(channel)
            for service in ("", "docsparse.v1.DocumentService"):
                response = health_stub.Check(
                    health_pb2.HealthCheckRequest(service=service), timeout=10)
                assert response.status == health_pb2.HealthCheckResponse.SERVING, response

        def reflection():
            reflection_stub = reflection_pb2_grpc.ServerReflectionStub(channel)
            responses = reflection_stub.ServerReflectionInfo(
                iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=10)
            names = [s.name for r in responses for s in r.list_services_response.service]
            assert "docsparse.v1.DocumentService" in names, names
            assert "grpc.health.v1.Health" in names, names
            # Every listed service resolves (grpc.health.v1.Health did not).
            for name in names:
                pool = resolve_symbol(reflection_pb2, reflection_pb2_grpc, channel, name)
                assert pool.FindServiceByName(name).full_name == name

        def reflection_v1():
            # Current clients (grpcurl, grpcui) ask for v1 first.
            from reflection_v1 import reflection_pb2 as v1, reflection_pb2_grpc as v1_grpc
            stub = v1_grpc.ServerReflectionStub(channel)
            [listed] = list(stub.ServerReflectionInfo(
                iter([v1.ServerReflectionRequest(list_services="")]), timeout=10))
            names = [s.name for s in listed.list_services_response.service]
            for name in ("docsparse.v1.DocumentService", "inference.GRPCInferenceService",
                         "grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection"):
                assert name in names, names
            pool = resolve_symbol(v1, v1_grpc, channel, "docsparse.v1.DocumentService")
            method = pool.FindServiceByName("docsparse.v1.DocumentService").FindMethodByName(
                "Embed")
            assert method.input_type.full_name == "docsparse.v1.EmbedRequest"
            pool.FindMessageTypeByName("docsparse.v1.CostReport")
            responses = list(stub.ServerReflectionInfo(iter([
                v1.ServerReflectionRequest(file_containing_symbol="no.such.Symbol"),
                v1.ServerReflectionRequest(file_by_filename="grpc/health/v1/health.proto"),
            ]), timeout=10))
            assert responses[0].error_response.error_code == grpc.StatusCode.NOT_FOUND.value[0]
            assert len(responses[1].file_descriptor_response.file_descriptor_proto) == 1

        def list_models():
            models = stub.ListModels(pb.ListModelsRequest(), timeout=10).models
            minilm = [m for m in models if m.name == "minilm"]
            assert minilm and minilm[0].hidden_size == 384, models

        def embed():
            response = stub.Embed(
                pb.EmbedRequest(model="minilm", document=pb.Document(text="Hello world.")),
                timeout=60)
            assert len(response.embedding) == 384
            norm = math.sqrt(sum(x * x for x in response.embedding))
            assert abs(norm - 1) < 1e-4, norm
            assert response.cost.mean_density == 1.0
            assert response.cost.input_tokens == 5, response.cost.input_tokens

        def classify():
            response = stub.Classify(pb.ClassifyRequest(
                document=pb.Document(text=gpl),
                labels=["software license", "recipe", "news article"]), timeout=120)
            assert response.scores[0].label == "software license", response.scores
            assert abs(sum(s.score for s in response.scores) - 1) < 1e-5

        def summarize():
            request = pb.SummarizeRequest(
                document=pb.Document(text=gpl),
                extractive=pb.ExtractiveParams(max_sentences=3))
            unary = stub.Summarize(request, timeout=120)
            assert len(unary.sentences) == 3
            assert unary.kind == pb.SUMMARY_KIND_EXTRACTIVE
            chunks = list(stub.SummarizeStream(request, timeout=120))
            assert chunks[-1].done
            assert "".join(c.text for c in chunks) == unary.summary

        def errors():
            expect_error(stub.Embed, pb.EmbedRequest(model="nope", document=pb.Document(text="x")),
                         grpc.StatusCode.NOT_FOUND, "nope")
            expect_error(stub.Embed, pb.EmbedRequest(), grpc.StatusCode.INVALID_ARGUMENT,
                         "document")
            expect_error(stub.Embed,
                         pb.EmbedRequest(document=pb.Document(utf8_bytes=b"bad \xff byte")),
                         grpc.StatusCode.INVALID_ARGUMENT, "document.utf8_bytes")
            expect_error(stub.Embed, pb.EmbedRequest(document=pb.Document(text=gpl * 3)),
                         grpc.StatusCode.RESOURCE_EXHAUSTED, "20000 tokens")
            expect_error(stub.Embed,
                         pb.EmbedRequest(model="minilm", document=pb.Document(text=gpl),
                                         options=pb.RequestOptions(overflow=pb.OVERFLOW_REJECT)),
                         grpc.StatusCode.RESOURCE_EXHAUSTED, "512")
            expect_error(stub.Classify,
                         pb.ClassifyRequest(document=pb.Document(text="x"), temperature=-1),
                         grpc.StatusCode.INVALID_ARGUMENT, "temperature")


        checks.run("health SERVING", health)
        checks.run("reflection lists the services and resolves each", reflection)
        checks.run("reflection v1 lists, resolves and names what it lacks", reflection_v1)
        checks.run("ListModels", list_models)
        checks.run("Embed", embed)
        checks.run("Classify GPL-3", classify)
        checks.run("Summarize and SummarizeStream", summarize)
        checks.run("error statuses", errors)
        # A deadline far shorter than the work: the client gets DEADLINE_EXCEEDED.
        checks.run("deadline honoured", lambda: expect_error(
            lambda r, timeout: stub.Summarize(r, timeout=0.001),
            pb.SummarizeRequest(document=pb.Document(text=gpl)),
            grpc.StatusCode.DEADLINE_EXCEEDED, ""))
    finally:
        checks.stop_server(proc)
    return checks.summary()


if __name__ == "__main__":
    sys.exit(main())
