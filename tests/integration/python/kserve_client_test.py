#!/usr/bin/env python3
"""A Python grpcio client of docsparse's KServe v2 / Open Inference Protocol.

Generates stubs at test time from proto/inference/grpc_predict_v2.proto and
proto/docsparse/v1/docsparse.proto, starts docsparse-server on loopback and
checks inference.GRPCInferenceService: liveness, readiness, metadata, and that
ModelInfer's "embedding" equals DocumentService.Embed's for the same text
(bytes_contents and raw_input_contents alike), "scores" follow the labels'
order, the budget parameters act, and bad requests get INVALID_ARGUMENT
naming the field. Prints "N passed, M failed"; exits non-zero on a failure.
"""
import argparse
import os
import struct
import sys
import tempfile

import grpc
from grpc_tools import protoc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from grpcio_client_test import GPL3, Checks, expect_error, start_server  # noqa: E402

TEXTS = [
    "The quick brown fox jumps over the lazy dog.",
    "Preheat the oven to 200 degrees and bake the bread for forty minutes.",
    "Stocks fell sharply on Monday after the central bank raised interest rates.",
]
LABELS = ["recipe", "software license", "news article"]
HIDDEN = 384


def generate_stubs(proto_dir, out_dir):
    import grpc_tools

    include = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
    code = protoc.main([
        "protoc", f"-I{proto_dir}", f"-I{include}", f"--python_out={out_dir}",
        f"--grpc_python_out={out_dir}",
        os.path.join(proto_dir, "inference/grpc_predict_v2.proto"),
        os.path.join(proto_dir, "docsparse/v1/docsparse.proto"),
    ])
    if code != 0:
        raise RuntimeError("protoc failed")
    sys.path.insert(0, out_dir)


def raw_bytes(elements):
    """KServe raw BYTES: each element a 4-byte little-endian length, then it."""
    return b"".join(struct.pack("<I", len(e)) + e for e in elements)


def fp32_values(response, index):
    """Output `index` of `response` as floats, raw or typed."""
    if response.raw_output_contents:
        assert not response.outputs[index].contents.fp32_contents
        data = response.raw_output_contents[index]
        return list(struct.unpack(f"<{len(data) // 4}f", data))
    return list(response.outputs[index].contents.fp32_contents)


def max_abs_diff(a, b):
    assert len(a) == len(b), (len(a), len(b))
    return max(abs(x - y) for x, y in zip(a, b))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--server-binary", required=True)
    parser.add_argument("--proto-dir", required=True)
    parser.add_argument("--model-repository", required=True)
    args = parser.parse_args()

    generate_stubs(args.proto_dir, tempfile.mkdtemp(prefix="docsparse-kserve-py-"))
    from docsparse.v1 import docsparse_pb2 as pb
    from docsparse.v1 import docsparse_pb2_grpc as pb_grpc
    from inference import grpc_predict_v2_pb2 as kpb
    from inference import grpc_predict_v2_pb2_grpc as kpb_grpc

    def text_input(texts, shape=None, datatype="BYTES"):
        tensor = kpb.ModelInferRequest.InferInputTensor(
            name="text", datatype=datatype, shape=shape or [len(texts)])
        tensor.contents.bytes_contents.extend(texts)
        return tensor

    def infer_request(texts, outputs=(), raw=False, model="minilm", **parameters):
        request = kpb.ModelInferRequest(model_name=model, id="req-42")
        encoded = [t.encode() for t in texts]
        if raw:
            request.inputs.append(kpb.ModelInferRequest.InferInputTensor(
                name="text", datatype="BYTES", shape=[len(texts)]))
            request.raw_input_contents.append(raw_bytes(encoded))
        else:
            request.inputs.append(text_input(encoded))
        for name in outputs:
            request.outputs.add(name=name)
        for key, value in parameters.items():
            param = request.parameters[key]
            if isinstance(value, bool):
                param.bool_param = value
            elif isinstance(value, int):
                param.int64_param = value
            elif isinstance(value, float):
                param.double_param = value
            else:
                param.string_param = value
        return request

    proc, address = start_server(args.server_binary, args.model_repository)
    checks = Checks()
    try:
        channel = grpc.insecure_channel(
            address, options=[("grpc.max_receive_message_length", 64 << 20)])
        grpc.channel_ready_future(channel).result(timeout=30)
        kserve = kpb_grpc.GRPCInferenceServiceStub(channel)
        docs = pb_grpc.DocumentServiceStub(channel)
        gpl = open(GPL3, encoding="utf-8").read()
        reference = {}  # text -> DocumentService.Embed's embedding

        def reference_embedding(text):
            if text not in reference:
                response = docs.Embed(pb.EmbedRequest(
                    model="minilm", document=pb.Document(text=text)), timeout=60)
                reference[text] = list(response.embedding)
            return reference[text]

        def live_and_ready():
            assert kserve.ServerLive(kpb.ServerLiveRequest(), timeout=10).live
            assert kserve.ServerReady(kpb.ServerReadyRequest(), timeout=10).ready

        def model_ready():
            assert kserve.ModelReady(kpb.ModelReadyRequest(name="minilm"), timeout=10).ready
            assert kserve.ModelReady(
                kpb.ModelReadyRequest(name="minilm", version="1"), timeout=10).ready
            expect_error(kserve.ModelReady, kpb.ModelReadyRequest(name="nope"),
                         grpc.StatusCode.NOT_FOUND, "nope")
            expect_error(kserve.ModelReady, kpb.ModelReadyRequest(name="minilm", version="7"),
                         grpc.StatusCode.NOT_FOUND, "version '7'")
            expect_error(kserve.ModelReady, kpb.ModelReadyRequest(),
                         grpc.StatusCode.INVALID_ARGUMENT, "name: required")

        def server_metadata():
            response = kserve.ServerMetadata(kpb.ServerMetadataRequest(), timeout=10)
            assert response.name == "docsparse", response
            assert response.version == "0.1.0", response
            assert list(response.extensions) == [], response

        def model_metadata():
            response = kserve.ModelMetadata(kpb.ModelMetadataRequest(name="minilm"), timeout=10)
            assert response.name == "minilm" and response.platform == "docsparse", response
            assert list(response.versions) == ["1"], response
            inputs = [(t.name, t.datatype, list(t.shape)) for t in response.inputs]
            assert inputs == [("text", "BYTES", [-1])], inputs
            outputs = [(t.name, t.datatype, list(t.shape)) for t in response.outputs]
            assert outputs == [("embedding", "FP32", [-1, HIDDEN]),
                               ("scores", "FP32", [-1, -1])], outputs
            expect_error(kserve.ModelMetadata, kpb.ModelMetadataRequest(name="nope"),
                         grpc.StatusCode.NOT_FOUND, "nope")

        def embedding_matches_embed(raw):
            def check():
                response = kserve.ModelInfer(infer_request(TEXTS, raw=raw), timeout=120)
                assert response.model_name == "minilm" and response.id == "req-42", response
                assert response.model_version == "1", response.model_version
                assert len(response.outputs) == 1, response.outputs
                output = response.outputs[0]
                assert (output.name, output.datatype, list(output.shape)) == (
                    "embedding", "FP32", [3, HIDDEN]), output
                assert bool(response.raw_output_contents) == raw
                values = fp32_values(response, 0)
                for i, text in enumerate(TEXTS):
                    row = values[i * HIDDEN:(i + 1) * HIDDEN]
                    diff = max_abs_diff(row, reference_embedding(text))
                    assert diff <= 1e-6, f"text {i}: max abs diff {diff}"
                params = response.parameters
                assert params["density"].double_param == 1.0, params
                assert params["budget_met"].bool_param, params
                assert params["attention_gflops"].double_param > 0, params
                assert params["total_gflops"].double_param >= \
                    params["attention_gflops"].double_param, params
                assert abs(params["dense_equivalent_gflops"].double_param
                           - params["total_gflops"].double_param) < 1e-9, params
                assert params["input_tokens"].int64_param > 3 * 5, params
            return check

        def scores_follow_labels():
            for raw in (False, True):
                request = infer_request([TEXTS[1], gpl], outputs=["scores", "embedding"],
                                        raw=raw, labels=", ".join(LABELS))
                response = kserve.ModelInfer(request, timeout=300)
                names = [o.name for o in response.outputs]
                assert names == ["scores", "embedding"], names
                scores = response.outputs[0]
                assert list(scores.shape) == [2, 3], scores.shape
                assert scores.parameters["labels"].string_param == ",".join(LABELS)
                values = fp32_values(response, 0)
                for row, text in enumerate([TEXTS[1], gpl]):
                    classified = docs.Classify(pb.ClassifyRequest(
                        model="minilm", document=pb.Document(text=text), labels=LABELS),
                        timeout=300)
                    by_label = {s.label: s.score for s in classified.scores}
                    expected = [by_label[label] for label in LABELS]
                    got = values[row * 3:(row + 1) * 3]
                    assert max_abs_diff(got, expected) <= 1e-6, (got, expected)
                assert max(range(3), key=lambda j: values[j]) == 0, values  # recipe
                assert max(range(3), key=lambda j: values[3 + j]) == 1, values  # license
                embedding = fp32_values(response, 1)
                assert max_abs_diff(embedding[:HIDDEN], reference_embedding(TEXTS[1])) <= 1e-6

        def budget_parameters():
            # A cap below dense attention: runs anyway, budget_met false...
            response = kserve.ModelInfer(
                infer_request(TEXTS[:1], max_density=0.5), timeout=60)
            assert not response.parameters["budget_met"].bool_param, response.parameters
            assert response.parameters["density"].double_param == 1.0, response.parameters
            response = kserve.ModelInfer(
                infer_request(TEXTS[:1], max_attention_gflops=1000.0), timeout=60)
            assert response.parameters["budget_met"].bool_param, response.parameters
            # ...unless strict.
            expect_error(kserve.ModelInfer,
                         infer_request(TEXTS[:1], max_density=0.5, strict=True),
                         grpc.StatusCode.INVALID_ARGUMENT, "max_density")
            # An int64 cap is a double cap.
            response = kserve.ModelInfer(infer_request(TEXTS[:1], max_density=1), timeout=60)
            assert response.parameters["budget_met"].bool_param, response.parameters
            # A numeric string is a number (KServe's own client sends no
            # doubles); any other string is an error naming the parameter.
            response = kserve.ModelInfer(infer_request(TEXTS[:1], max_density="1.0"), timeout=60)
            assert response.parameters["budget_met"].bool_param, response.parameters
            expect_error(kserve.ModelInfer, infer_request(TEXTS[:1], max_density="half"),
                         grpc.StatusCode.INVALID_ARGUMENT,
                         "parameters.max_density: 'half' is not a finite number")
            expect_error(kserve.ModelInfer, infer_request([gpl], overflow="reject"),
                         grpc.StatusCode.RESOURCE_EXHAUSTED, "512")
            truncated = kserve.ModelInfer(infer_request([gpl], overflow="truncate"), timeout=120)
            chunked = kserve.ModelInfer(infer_request([gpl], overflow="chunk"), timeout=120)
            assert (chunked.parameters["input_tokens"].int64_param
                    > truncated.parameters["input_tokens"].int64_param), (chunked, truncated)
            expect_error(kserve.ModelInfer, infer_request(TEXTS[:1], overflow="spill"),
                         grpc.StatusCode.INVALID_ARGUMENT, "parameters.overflow")
            expect_error(kserve.ModelInfer, infer_request(TEXTS[:1], strict="yes"),
                         grpc.StatusCode.INVALID_ARGUMENT, "parameters.strict: expected a bool")
            expect_error(kserve.ModelInfer,
                         infer_request(TEXTS[:1], max_density=0.5, max_attention_gflops=1.0),
                         grpc.StatusCode.INVALID_ARGUMENT, "at most one of")
            expect_error(kserve.ModelInfer, infer_request(TEXTS[:1], max_densty=0.5),
                         grpc.StatusCode.INVALID_ARGUMENT, "parameters.max_densty")

        def bad_requests():
            invalid = grpc.StatusCode.INVALID_ARGUMENT
            expect_error(kserve.ModelInfer, infer_request(TEXTS, model="nope"),
                         grpc.StatusCode.NOT_FOUND, "nope")
            expect_error(kserve.ModelInfer, infer_request(TEXTS, model=""), invalid,
                         "model_name: required")
            request = kpb.ModelInferRequest(model_name="minilm")
            request.inputs.append(text_input([b"x"], datatype="FP32"))
            expect_error(kserve.ModelInfer, request, invalid,
                         "inputs[0].datatype: expected BYTES")
            expect_error(kserve.ModelInfer, kpb.ModelInferRequest(model_name="minilm"),
                         invalid, "inputs: missing input 'text'")
            request = kpb.ModelInferRequest(model_name="minilm")
            request.inputs.append(kpb.ModelInferRequest.InferInputTensor(
                name="txt", datatype="BYTES", shape=[1]))
            expect_error(kserve.ModelInfer, request, invalid, "inputs[0].name")
            request = kpb.ModelInferRequest(model_name="minilm")
            request.inputs.append(text_input([b"a", b"b"], shape=[3]))
            expect_error(kserve.ModelInfer, request, invalid,
                         "inputs[0].contents.bytes_contents")
            request = kpb.ModelInferRequest(model_name="minilm")
            request.inputs.append(text_input([b"a", b"b"], shape=[2, 2]))
            expect_error(kserve.ModelInfer, request, invalid, "inputs[0].shape")
            request = infer_request(TEXTS, raw=True)
            request.raw_input_contents[0] = raw_bytes([b"abc"])[:-1]
            expect_error(kserve.ModelInfer, request, invalid, "raw_input_contents[0]")
            expect_error(kserve.ModelInfer, infer_request(TEXTS, outputs=["logits"]), invalid,
                         "outputs[0].name")
            request = kpb.ModelInferRequest(model_name="minilm")
            request.inputs.append(text_input([b"fine", b"bad \xff byte"]))
            expect_error(kserve.ModelInfer, request, invalid, "text[1]: document.utf8_bytes")
            # [N, 1] is accepted, as tensors with a batch dimension come.
            request = kpb.ModelInferRequest(model_name="minilm")
            request.inputs.append(text_input([TEXTS[0].encode()], shape=[1, 1]))
            response = kserve.ModelInfer(request, timeout=60)
            assert list(response.outputs[0].shape) == [1, HIDDEN], response.outputs[0].shape

        def concurrent_calls():
            # Documents of concurrent requests share batches; each answer is
            # still its own documents'.
            from concurrent.futures import ThreadPoolExecutor

            def one(k):
                texts = [TEXTS[k % 3], TEXTS[(k + 1) % 3]]
                response = kserve.ModelInfer(infer_request(texts, raw=k % 2 == 1), timeout=120)
                values = fp32_values(response, 0)
                return max(max_abs_diff(values[i * HIDDEN:(i + 1) * HIDDEN],
                                        reference_embedding(t)) for i, t in enumerate(texts))

            for text in TEXTS:
                reference_embedding(text)
            with ThreadPoolExecutor(max_workers=8) as pool:
                diffs = list(pool.map(one, range(16)))
            assert max(diffs) <= 1e-6, diffs

        def deadline():
            expect_error(lambda r, timeout: kserve.ModelInfer(r, timeout=0.001),
                         infer_request([gpl, gpl]), grpc.StatusCode.DEADLINE_EXCEEDED, "")
            assert kserve.ServerReady(kpb.ServerReadyRequest(), timeout=10).ready

        checks.run("ServerLive and ServerReady", live_and_ready)
        checks.run("ModelReady", model_ready)
        checks.run("ServerMetadata", server_metadata)
        checks.run("ModelMetadata", model_metadata)
        checks.run("ModelInfer embedding (bytes_contents) == Embed",
                   embedding_matches_embed(raw=False))
        checks.run("ModelInfer embedding (raw_input_contents) == Embed",
                   embedding_matches_embed(raw=True))
        checks.run("ModelInfer scores in the labels' order == Classify", scores_follow_labels)
        checks.run("budget parameters", budget_parameters)
        checks.run("bad requests name the field", bad_requests)
        checks.run("16 concurrent ModelInfer calls", concurrent_calls)
        checks.run("deadline honoured", deadline)
    finally:
        checks.stop_server(proc)
    return checks.summary()


if __name__ == "__main__":
    sys.exit(main())
