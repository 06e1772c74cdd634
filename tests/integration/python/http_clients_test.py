#!/usr/bin/env python3
"""Clients of the HTTP API that nobody here wrote, against the real server.

Runs in the venv scripts/setup makes at $DOCSPARSE_CACHE/http-clients-venv and
starts docsparse-server on loopback (server/http_api.h is the contract,
server/openapi.json the document):

  - OpenAI's SDK (`openai`): /v1/embeddings equals gRPC Embed of the same
    texts, usage counts the cost reports' input tokens, base64 decodes to the
    same floats, /v1/models lists the served models;
  - huggingface_hub's InferenceClient.feature_extraction. Run through a
    recording proxy, huggingface_hub 2.4.0 with model="http://HOST:PORT"
    sends `POST /` with {"inputs": text, "parameters": {}} (TEI's route for the
    model's own task); its vector equals gRPC Embed's;
  - an SSE client (sseclient-py) on POST /summarize with "stream": true: the
    extractive default model (one final event) and the tiny BART fixture of
    tests/fixtures/seq2seq/bart (one event per token);
  - grpcio-reflection's ProtoReflectionDescriptorDatabase: the services and
    DocumentService.Embed's descriptor;
  - `requests`: the error statuses and bodies of the contract (422 naming the
    field, 404, 413 body cap and document tokens, 429 queue full, 503 while
    draining, 504 deadline), TEI's shape on TEI routes and OpenAI's on /v1;
  - openapi-spec-validator on GET /openapi.json, and schemathesis's `st run`
    against the live server from that document (no 5xx, every status,
    content type and body as documented).

Three servers: the default repository (fp32, so batched and unbatched
vectors agree to 1e-6), a small one with tight limits (4 KiB bodies, queue
of one, no batching) and the BART fixture, stopped last by the drain test.
Prints "N passed, M failed"; exits non-zero on a failure.
"""
import argparse
import base64
import collections
import concurrent.futures
import glob
import http.server
import json
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import unittest
from pathlib import Path

import grpc
import numpy as np
import requests
import sseclient
from google.protobuf import descriptor_pool
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (
    ProtoReflectionDescriptorDatabase,
)
from grpc_tools import protoc
from huggingface_hub import InferenceClient
from openai import OpenAI
from openapi_spec_validator import validate as validate_openapi

SOURCE_DIR = Path(__file__).resolve().parents[3]
GPL3 = Path("/usr/share/common-licenses/GPL-3")
DEFAULT_MODEL = "minilm-lsg"
TEXTS = [
    "The quick brown fox jumps over the lazy dog.",
    "Preheat the oven to 200 degrees and bake the bread for forty minutes.",
    "Stocks fell sharply on Monday after the central bank raised interest rates. " * 40,
]
PARAGRAPHS = (
    "The city council met on Tuesday evening to debate the new transport plan. "
    "Members argued for three hours about the cost of the tram line. "
    "The mayor said the line would cut traffic in the centre by a third.\n\n"
    "Residents of the northern districts welcomed the proposal. "
    "Shop owners on the main street feared that building work would keep customers away. "
    "A survey found that most commuters would use the tram every day.\n\n"
    "The council will vote on the plan next month. "
    "If it passes, construction could begin in the spring and finish within four years. "
    "Opponents promised to collect signatures for a referendum."
)
TEI_ERROR_TYPES = {"Validation", "Overloaded", "Unhealthy", "NotFound", "Timeout", "Backend"}

ARGS = None  # parsed in main()
pb = pb_grpc = None  # generated in main()


# ---- Servers ----

class Server:
    """One docsparse-server on free loopback ports; a thread keeps its output
    drained (the last lines go into failure messages)."""

    def __init__(self, repository, flags):
        self.process = subprocess.Popen(
            [ARGS.server_binary, "--host=127.0.0.1", "--port=0", "--metrics_port=0",
             f"--model_repository={repository}", *flags],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.output = collections.deque(maxlen=200)
        self.grpc_address = self.http_address = None
        deadline = time.time() + 120
        while time.time() < deadline:
            line = self.process.stdout.readline()
            if not line:
                break
            self.output.append(line)
            match = re.search(r"listening grpc=(\S+) http=(\S+)", line)
            if match:
                self.grpc_address, self.http_address = match.groups()
            if "docsparse-server: ready" in line:
                break
        else:
            line = ""
        if not line or self.http_address is None:
            self.process.kill()
            raise RuntimeError("server did not become ready:\n" + "".join(self.output))
        threading.Thread(target=self._drain, daemon=True).start()
        self.url = f"http://{self.http_address}"
        self.channel = grpc.insecure_channel(
            self.grpc_address, options=[("grpc.max_receive_message_length", 64 << 20)])
        self.stub = pb_grpc.DocumentServiceStub(self.channel)

    def _drain(self):
        for line in self.process.stdout:
            self.output.append(line)

    def log(self):
        return "".join(self.output)

    def stop(self):
        """SIGTERM; the exit status (None if it had to be killed after 30 s)."""
        if self.process.poll() is None:
            self.process.terminate()
        try:
            code = self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            code = None
        self.channel.close()
        return code


_servers = {}
_temp_dirs = []


def main_server():
    """The default repository; fp32 (vectors compared across batch shapes at
    1e-6); documents up to 20000 tokens (the 413 check sends more)."""
    if "main" not in _servers:
        _servers["main"] = Server(ARGS.model_repository, [
            "--threads=2", "--precision=fp32", "--max_document_tokens=20000"])
    return _servers["main"]


def limits_server():
    """minilm and the tiny BART fixture (an abstractive model, which streams
    token by token), with a 4 KiB body cap, a queue of one and no batching."""
    if "limits" not in _servers:
        repository = Path(tempfile.mkdtemp(prefix="docsparse-http-clients."))
        _temp_dirs.append(repository)
        (repository / "minilm").symlink_to(
            (Path(ARGS.model_repository) / "minilm").resolve(), target_is_directory=True)
        bart = repository / "bart"
        shutil.copytree(ARGS.seq2seq_fixture, bart)
        (bart / "docsparse.json").write_text(json.dumps({"tasks": ["summarize"]}))
        _servers["limits"] = Server(str(repository), [
            "--threads=2", "--precision=fp32", "--max_http_body_bytes=4096", "--max_queue=1",
            "--max_batch_size=1", "--max_beams=2", "--max_generated_tokens=16"])
    return _servers["limits"]


def stop_servers():
    for name, server in list(_servers.items()):
        server.stop()
        del _servers[name]
    for folder in _temp_dirs:
        shutil.rmtree(folder, ignore_errors=True)


def generate_stubs(proto_dir, out_dir):
    """docsparse.v1's Python stubs with grpcio-tools (as grpcio_client_test.py)."""
    import grpc_tools

    include = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
    code = protoc.main([
        "protoc", f"-I{proto_dir}", f"-I{include}", f"--python_out={out_dir}",
        f"--grpc_python_out={out_dir}", os.path.join(proto_dir, "docsparse/v1/docsparse.proto"),
    ])
    if code != 0:
        raise RuntimeError("protoc failed")
    sys.path.insert(0, out_dir)


# ---- Helpers ----

def grpc_embed(server, text, model=""):
    return server.stub.Embed(
        pb.EmbedRequest(model=model, document=pb.Document(text=text)), timeout=120)


def max_abs_diff(a, b):
    a = np.asarray(a, dtype=np.float64).reshape(-1)
    b = np.asarray(b, dtype=np.float64).reshape(-1)
    assert a.shape == b.shape, (a.shape, b.shape)
    return float(np.max(np.abs(a - b)))


def describe(response):
    return f"{response.request.method} {response.request.url} -> {response.status_code} " \
           f"{response.headers.get('content-type')} {response.text[:300]!r}"


class ApiTestCase(unittest.TestCase):
    def assertTeiError(self, response, status, needle, error_type=None):
        """TEI's error: exactly {"error": str, "error_type": str} as JSON."""
        self.assertEqual(response.status_code, status, describe(response))
        self.assertTrue(response.headers.get("content-type", "").startswith("application/json"),
                        describe(response))
        body = response.json()
        self.assertEqual(set(body), {"error", "error_type"}, describe(response))
        self.assertIsInstance(body["error"], str)
        self.assertIn(body["error_type"], TEI_ERROR_TYPES, describe(response))
        if error_type is not None:
            self.assertEqual(body["error_type"], error_type, describe(response))
        self.assertIn(needle, body["error"], describe(response))
        return body

    def assertOpenAiError(self, response, status, needle, param=None, code=None, type_=None):
        """OpenAI's error: {"error": {"message", "type", "param", "code"}}."""
        self.assertEqual(response.status_code, status, describe(response))
        self.assertTrue(response.headers.get("content-type", "").startswith("application/json"),
                        describe(response))
        body = response.json()
        self.assertEqual(set(body), {"error"}, describe(response))
        error = body["error"]
        self.assertIsInstance(error, dict, describe(response))
        self.assertEqual(set(error), {"message", "type", "param", "code"}, describe(response))
        self.assertIsInstance(error["message"], str)
        self.assertIsInstance(error["type"], str)
        self.assertIsInstance(error["param"], (str, type(None)))
        self.assertIsInstance(error["code"], (str, type(None)))
        self.assertIn(needle, error["message"], describe(response))
        if param is not None:
            self.assertEqual(error["param"], param, describe(response))
        if code is not None:
            self.assertEqual(error["code"], code, describe(response))
        if type_ is not None:
            self.assertEqual(error["type"], type_, describe(response))
        return error


# ---- gRPC reflection ----

class ReflectionTest(ApiTestCase):
    def test_reflection_client_lists_services_and_resolves_embed(self):
        server = main_server()
        database = ProtoReflectionDescriptorDatabase(server.channel)
        services = list(database.get_services())
        for name in ("docsparse.v1.DocumentService", "inference.GRPCInferenceService",
                     "grpc.health.v1.Health"):
            self.assertIn(name, services)
        pool = descriptor_pool.DescriptorPool(database)
        method = pool.FindMethodByName("docsparse.v1.DocumentService.Embed")
        self.assertEqual(method.input_type.full_name, "docsparse.v1.EmbedRequest")
        self.assertEqual(method.output_type.full_name, "docsparse.v1.EmbedResponse")
        self.assertEqual(method.containing_service.full_name, "docsparse.v1.DocumentService")
        self.assertIn("cost", method.output_type.fields_by_name)
        for name in ("inference.GRPCInferenceService", "grpc.health.v1.Health"):
            self.assertEqual(pool.FindServiceByName(name).full_name, name)


# ---- OpenAI ----

class OpenAiClientTest(ApiTestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = main_server()
        cls.client = OpenAI(base_url=f"{cls.server.url}/v1", api_key="unused", max_retries=0,
                            timeout=120)
        cls.expected = [grpc_embed(cls.server, text, DEFAULT_MODEL) for text in TEXTS]

    def test_embeddings_equal_grpc_embed(self):
        raw = self.client.embeddings.with_raw_response.create(model=DEFAULT_MODEL, input=TEXTS)
        response = raw.parse()
        self.assertEqual(response.model, DEFAULT_MODEL)
        self.assertEqual([item.index for item in response.data], list(range(len(TEXTS))))
        for item, expected in zip(response.data, self.expected):
            self.assertEqual(len(item.embedding), 384)
            diff = max_abs_diff(item.embedding, expected.embedding)
            self.assertLessEqual(diff, 1e-6, f"input {item.index}: max abs diff {diff}")
        tokens = sum(e.cost.input_tokens for e in self.expected)
        self.assertEqual(response.usage.prompt_tokens, tokens)
        self.assertEqual(response.usage.total_tokens, tokens)
        # The cost report's headers, summed over the inputs.
        self.assertEqual(int(raw.headers["x-docsparse-input-tokens"]), tokens)

    def test_base64_decodes_to_the_same_floats(self):
        response = self.client.embeddings.create(model=DEFAULT_MODEL, input=TEXTS,
                                                 encoding_format="base64")
        for item, expected in zip(response.data, self.expected):
            # Asked for base64, the SDK hands the string through undecoded.
            self.assertIsInstance(item.embedding, str)
            raw = base64.b64decode(item.embedding)
            self.assertEqual(len(raw), 384 * 4)
            floats = struct.unpack("<384f", raw)
            diff = max_abs_diff(floats, expected.embedding)
            self.assertLessEqual(diff, 1e-6, f"input {item.index}: max abs diff {diff}")

    def test_models_list_names_the_served_models(self):
        served = sorted(p.parent.name for p in Path(ARGS.model_repository).glob("*/docsparse.json"))
        listed = sorted(model.id for model in self.client.models.list())
        self.assertEqual(listed, served)
        grpc_listed = sorted(
            m.name for m in self.server.stub.ListModels(pb.ListModelsRequest(), timeout=10).models)
        self.assertEqual(listed, grpc_listed)


# ---- huggingface_hub ----

class RecordingProxy:
    """A loopback HTTP proxy to `target` that records each request's method,
    path and JSON body: to see which route a client calls."""

    def __init__(self, target):
        self.requests = []
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def _forward(self):
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length) if length else b""
                try:
                    recorded = json.loads(body) if body else None
                except ValueError:
                    recorded = body
                proxy.requests.append((self.command, self.path, recorded))
                headers = {k: v for k, v in self.headers.items()
                           if k.lower() in ("content-type", "accept")}
                answer = requests.request(self.command, target + self.path, data=body,
                                          headers=headers, timeout=120)
                self.send_response(answer.status_code)
                self.send_header("content-type", answer.headers.get("content-type", ""))
                self.send_header("content-length", str(len(answer.content)))
                self.end_headers()
                self.wfile.write(answer.content)

            do_GET = do_POST = _forward

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


class HuggingFaceClientTest(ApiTestCase):
    def test_feature_extraction_posts_to_root_and_equals_grpc_embed(self):
        server = main_server()
        text = TEXTS[1]
        expected = grpc_embed(server, text).embedding  # the default model, as "/" runs
        proxy = RecordingProxy(server.url)
        try:
            through_proxy = InferenceClient(model=proxy.url).feature_extraction(text)
        finally:
            proxy.close()
        print(f"\n  huggingface_hub InferenceClient.feature_extraction sent: {proxy.requests}",
              file=sys.stderr)
        self.assertEqual([(m, p) for m, p, _ in proxy.requests], [("POST", "/")])
        self.assertEqual(proxy.requests[0][2]["inputs"], text)
        direct = InferenceClient(model=server.url).feature_extraction(text)
        for vectors in (through_proxy, direct):
            self.assertIn(vectors.shape, ((1, 384), (384,)))
            diff = max_abs_diff(vectors, expected)
            self.assertLessEqual(diff, 1e-6, f"max abs diff {diff}")


# ---- Server-Sent Events ----

def sse_events(url, body):
    """POSTs `body` and parses the stream with sseclient-py: (response, [(event, data)])."""
    response = requests.post(url, json=body, stream=True, timeout=120)
    if response.status_code != 200:
        return response, []
    events = [(event.event, json.loads(event.data))
              for event in sseclient.SSEClient(response).events()]
    return response, events


class ServerSentEventsTest(ApiTestCase):
    def check_stream(self, server, body):
        response, events = sse_events(f"{server.url}/summarize", dict(body, stream=True))
        if response.status_code != 200:
            self.fail(describe(response))
        self.assertTrue(response.headers["content-type"].startswith("text/event-stream"))
        self.assertTrue(events, "no events")
        self.assertEqual({name for name, _ in events}, {"message"}, events)
        *pieces, last = [data for _, data in events]
        self.assertIs(last.get("done"), True, last)
        self.assertFalse(any(piece.get("done") for piece in pieces), pieces)
        self.assertGreater(last["cost"]["input_tokens"], 0, last["cost"])
        self.assertEqual("".join(d["text"] for d in pieces + [last]), last["summary"])
        unary = requests.post(f"{server.url}/summarize", json=body, timeout=120)
        self.assertEqual(unary.status_code, 200, describe(unary))
        self.assertEqual(unary.json()["summary"], last["summary"])
        return pieces, last

    def test_extractive_summary_arrives_as_one_final_event(self):
        pieces, last = self.check_stream(main_server(), {"inputs": PARAGRAPHS})
        self.assertEqual(last["kind"], "extractive")
        self.assertTrue(last["summary"])
        # Extractive summaries have no tokens to stream: all in the last event.
        self.assertEqual(pieces, [])

    def test_abstractive_summary_streams_token_by_token(self):
        server = limits_server()
        pieces, last = self.check_stream(server, {
            "model": "bart", "inputs": PARAGRAPHS[:1500],
            "generation": {"num_beams": 1, "max_new_tokens": 12}})
        self.assertEqual(last["kind"], "abstractive")
        self.assertGreater(len(pieces), 1, pieces)
        for piece in pieces:
            self.assertEqual(set(piece), {"text", "token_ids"}, piece)
            self.assertEqual(len(piece["token_ids"]), 1, piece)
        self.assertEqual([p["token_ids"][0] for p in pieces], last["token_ids"])
        self.assertGreater(last["cost"]["generated_tokens"], 0, last["cost"])


# ---- Errors ----

class ErrorMappingTest(ApiTestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = main_server()
        cls.url = cls.server.url
        cls.gpl = GPL3.read_text(encoding="utf-8")

    def post(self, path, body, **kwargs):
        return requests.post(f"{self.url}{path}", json=body, timeout=120, **kwargs)

    def test_422_names_the_invalid_field(self):
        tei_cases = [
            ("/embed", {"inputs": "x", "budget": {"max_density": "0.2"}}, "budget.max_density"),
            ("/embed", {}, "inputs"),
            ("/embed", {"inputs": ["a", 3]}, "inputs[1]"),
            ("/embed", {"inputs": "x", "pooling": "max"}, "pooling"),
            ("/", {"inputs": "x", "normalize": "yes"}, "normalize"),
            ("/predict", {"inputs": "x", "temperature": "hot"}, "temperature"),
            ("/predict", {"inputs": "x", "labels": []}, "labels"),
            ("/tokenize", {"inputs": 7}, "inputs"),
            ("/summarize", {}, "inputs"),
            ("/summarize", {"inputs": "x", "generation": {"num_beams": "four"}}, "generation"),
            ("/summarize", {"inputs": "x", "stream": "yes"}, "stream"),
        ]
        for path, body, field in tei_cases:
            with self.subTest(path=path, body=body):
                self.assertTeiError(self.post(path, body), 422, field, "Validation")
        with self.subTest("body is not JSON"):
            response = requests.post(f"{self.url}/embed", data=b"{not json",
                                     headers={"content-type": "application/json"}, timeout=60)
            self.assertTeiError(response, 422, "body", "Validation")
        with self.subTest("bad deadline header"):
            response = self.post("/embed", {"inputs": "x"},
                                 headers={"x-docsparse-timeout-ms": "soon"})
            self.assertTeiError(response, 422, "x-docsparse-timeout-ms", "Validation")
        openai_cases = [
            ({"input": "x", "budget": {"max_density": "0.2"}}, "budget.max_density"),
            ({}, "input"),
            ({"input": "x", "encoding_format": "hex"}, "encoding_format"),
            ({"input": "x", "dimensions": 3}, "dimensions"),
            ({"input": [[1, 2], "x", 5]}, "input[2]"),
        ]
        for body, field in openai_cases:
            with self.subTest(path="/v1/embeddings", body=body):
                self.assertOpenAiError(self.post("/v1/embeddings", body), 422, field, param=field,
                                       type_="invalid_request_error")

    def test_404_unknown_model_and_route(self):
        for path, body in (("/embed", {"inputs": "x", "model": "nope"}),
                           ("/predict", {"inputs": "x", "model": "nope"}),
                           ("/summarize", {"inputs": "x", "model": "nope"}),
                           ("/tokenize", {"inputs": "x", "model": "nope"})):
            with self.subTest(path=path):
                self.assertTeiError(self.post(path, body), 404, "nope", "NotFound")
        self.assertOpenAiError(self.post("/v1/embeddings", {"input": "x", "model": "nope"}), 404,
                               "nope", param="model", code="model_not_found",
                               type_="invalid_request_error")
        self.assertTeiError(requests.get(f"{self.url}/no/such/route", timeout=10), 404,
                            "/no/such/route", "NotFound")

    def test_413_document_over_max_document_tokens(self):
        # Three GPLs: about 20,500 tokens, over --max_document_tokens=20000.
        document = self.gpl * 3
        self.assertTeiError(self.post("/embed", {"inputs": document}), 413, "20000",
                            "Validation")
        self.assertTeiError(self.post("/summarize", {"inputs": document}), 413, "20000",
                            "Validation")
        self.assertOpenAiError(self.post("/v1/embeddings", {"input": document}), 413, "20000",
                               type_="invalid_request_error")

    def test_504_when_the_deadline_passes(self):
        timeout = {"x-docsparse-timeout-ms": "1"}
        self.assertTeiError(self.post("/embed", {"inputs": self.gpl}, headers=timeout), 504, "",
                            "Timeout")
        self.assertTeiError(self.post("/summarize", {"inputs": self.gpl}, headers=timeout), 504,
                            "", "Timeout")
        self.assertOpenAiError(self.post("/v1/embeddings", {"input": self.gpl}, headers=timeout),
                               504, "", type_="server_error")

    def test_413_only_for_bodies_over_a_limit_whatever_the_content_type(self):
        # curl -d's default content type is application/x-www-form-urlencoded.
        # A 35 KB JSON body is far under the body cap (32 MiB here) and the
        # document limits: it must not get 413 "larger than the limit".
        headers = {"content-type": "application/x-www-form-urlencoded"}
        small = requests.post(f"{self.url}/embed", data=json.dumps({"inputs": TEXTS[0]}),
                              headers=headers, timeout=120)
        large = requests.post(f"{self.url}/embed", data=json.dumps({"inputs": self.gpl}),
                              headers=headers, timeout=120)
        self.assertNotEqual(large.status_code, 413, describe(large))
        self.assertEqual(large.status_code, small.status_code, describe(large))

    def test_a_request_body_left_unread_does_not_break_the_next_request(self):
        # A GET (or OPTIONS) with a body whose bytes arrive after its headers:
        # httplib answers it without reading the body. The next request on
        # that connection must be answered as sent, never parsed from the
        # leftover body (request smuggling); the server closes every
        # connection after one request, so it finds the connection closed.
        host, port = self.server.http_address.rsplit(":", 1)
        body = b'{"inputs": "hello"}'
        for method in ("GET", "OPTIONS"):
            with self.subTest(method=method), socket.create_connection((host, int(port))) as s:
                s.sendall(f"{method} /embed HTTP/1.1\r\nHost: x\r\nContent-Type: application/json"
                          f"\r\nContent-Length: {len(body)}\r\n\r\n".encode())
                time.sleep(0.2)
                s.sendall(body)
                first = read_http_response(s)
                try:
                    s.sendall(b"POST /embed HTTP/1.1\r\nHost: x\r\nContent-Type: application/json"
                              b"\r\n" + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
                    second = read_http_response(s)
                except (BrokenPipeError, ConnectionResetError):
                    second = b""  # the server closed the connection: also safe
                self.assertTrue(first.startswith(b"HTTP/1.1 404"), first[:200])
                self.assertTrue(second.startswith(b"HTTP/1.1 200") or second == b"",
                                f"{method} with a body, then POST /embed on the same connection: "
                                f"{second[:200]!r}")


def read_http_response(sock):
    """One response with a Content-Length from `sock`; b"" if it was closed."""
    sock.settimeout(30)
    data = b""
    while True:
        head, sep, rest = data.partition(b"\r\n\r\n")
        match = re.search(rb"(?i)content-length: (\d+)", head)
        if sep and match and len(rest) >= int(match.group(1)):
            return data
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            return data
        if not chunk:
            return data
        data += chunk


# ---- OpenAPI ----

class OpenApiTest(ApiTestCase):
    def test_served_document_is_valid_openapi_and_the_tree_s(self):
        server = main_server()
        response = requests.get(f"{server.url}/openapi.json", timeout=10)
        self.assertEqual(response.status_code, 200, describe(response))
        self.assertTrue(response.headers["content-type"].startswith("application/json"))
        document = response.json()
        validate_openapi(document)
        self.assertEqual(document["openapi"], "3.0.3")
        self.assertEqual(document, json.loads((SOURCE_DIR / "server" / "openapi.json").read_text()))

    def test_schemathesis_finds_no_server_error_or_schema_violation(self):
        server = main_server()
        st = Path(sys.executable).parent / "st"
        report_dir = tempfile.mkdtemp(prefix="docsparse-schemathesis.")
        _temp_dirs.append(Path(report_dir))
        # /metrics is Prometheus text with no schema to check. A generous
        # deadline header: a short one that schemathesis picks would end in a
        # (documented, correct) 504; the header's own checks are above.
        command = [
            str(st), "run", f"{server.url}/openapi.json",
            "--checks", "not_a_server_error,status_code_conformance,content_type_conformance,"
                        "response_schema_conformance",
            "--max-examples", "20", "--seed", "20261126", "--workers", "1",
            "--exclude-path", "/metrics", "--header", "x-docsparse-timeout-ms: 120000",
            "--request-timeout", "120",
            "--no-color", "--output-sanitize", "false", "--output-truncate", "false",
            "--report", "json,vcr", "--report-dir", report_dir,
        ]
        started = time.time()
        # cwd: schemathesis keeps a .schemathesis/ folder where it runs.
        result = subprocess.run(command, capture_output=True, text=True, timeout=240,
                                cwd=report_dir)
        elapsed = time.time() - started
        [report_path] = glob.glob(os.path.join(report_dir, "json-*.json"))
        report = json.loads(Path(report_path).read_text())
        [vcr_path] = glob.glob(os.path.join(report_dir, "vcr-*.yaml"))
        interactions = vcr_interactions(vcr_path)
        statuses = collections.Counter(status for _, _, status, _ in interactions)
        print(f"\n  schemathesis: {' '.join(command[:3])} {' '.join(command[3:])}\n"
              f"  exit {result.returncode} in {elapsed:.0f} s; operations "
              f"{report['operations']}; test cases {report['test_cases']}; requests "
              f"{len(interactions)} by status {dict(sorted(statuses.items()))}; "
              f"failures {report['failures']}; errors {report['errors']}; "
              f"warnings { {k: v for k, v in report['warnings'].items() if v} }",
              file=sys.stderr)
        if result.returncode != 0:
            section = result.stdout.split("= FAILURES =", 1)[-1].split("= WARNINGS =", 1)[0]
            print(section[:6000], file=sys.stderr)
            # Each documented operation's undocumented answer, sent again
            # alone on a fresh connection: what it gets there says whether the
            # request itself or the connection's history caused it.
            document = requests.get(f"{server.url}/openapi.json", timeout=10).json()
            shown = 0
            for method, uri, status, interaction in interactions:
                path = "/" + uri.split("/", 3)[3] if uri.count("/") >= 3 else "/"
                operation = document["paths"].get(path, {}).get(method.lower())
                if operation is None or (str(status) in operation["responses"] and status < 500):
                    continue
                request = interaction["request"]
                alone = replay_alone(request)
                body = (request.get("body") or {}).get("string")
                print(f"  {method} {path} headers "
                      f"{ {k: v[0] for k, v in request['headers'].items()} } body {body!r} -> "
                      f"{status} {interaction['response']['body'].get('string')!r}; "
                      f"sent alone on a new connection -> {alone}", file=sys.stderr)
                shown += 1
                if shown == 10:
                    break
        self.assertTrue(report["complete"], report.get("stop_reason"))
        self.assertEqual(report["errors"], [])
        self.assertEqual(report["failures"], [])
        self.assertGreaterEqual(report["operations"]["tested"], 10)
        self.assertFalse([s for s in statuses if s >= 500], statuses)
        self.assertEqual(result.returncode, 0, result.stdout[-3000:])


def vcr_interactions(path):
    """(method, uri, status, interaction) of each request in schemathesis's
    VCR cassette."""
    import yaml  # PyYAML comes with schemathesis

    with open(path, encoding="utf-8") as f:
        cassette = yaml.safe_load(f)
    return [(i["request"]["method"], i["request"]["uri"], int(i["response"]["status"]["code"]), i)
            for i in cassette["http_interactions"]]


def replay_alone(request):
    """The status a cassette's request gets on a connection of its own."""
    headers = {k: v[0] for k, v in request["headers"].items()
               if k.lower() not in ("content-length", "connection")}
    headers["Connection"] = "close"
    body = (request.get("body") or {}).get("string")
    return requests.request(request["method"], request["uri"], headers=headers, timeout=120,
                            data=body.encode("utf-8") if body is not None else None).status_code


# ---- Limits: body cap, queue ----

class LimitsTest(ApiTestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = limits_server()
        cls.url = cls.server.url

    def test_413_generation_over_the_server_caps(self):
        def summarize(generation):
            return requests.post(f"{self.url}/summarize", json={
                "model": "bart", "inputs": "A short text to summarize.",
                "generation": generation}, timeout=60)
        self.assertTeiError(summarize({"num_beams": 3, "max_new_tokens": 8}), 413,
                            "generation.num_beams: 3 beams", "Validation")
        self.assertIn("--max_beams", summarize({"num_beams": 3, "max_new_tokens": 4}).json()["error"])
        self.assertTeiError(summarize({"max_new_tokens": 17}), 413, "--max_generated_tokens",
                            "Validation")
        response = summarize({"num_beams": 2, "max_new_tokens": 16})
        self.assertEqual(response.status_code, 200, describe(response))

    def test_413_body_over_the_cap(self):
        big = "x" * 5000  # over --max_http_body_bytes=4096
        self.assertTeiError(requests.post(f"{self.url}/embed", json={"inputs": big}, timeout=60),
                            413, "4096", "Validation")
        self.assertTeiError(requests.post(f"{self.url}/summarize", json={"inputs": big},
                                          timeout=60), 413, "4096", "Validation")
        # /v1 routes answer in OpenAI's shape, this error too.
        self.assertOpenAiError(requests.post(f"{self.url}/v1/embeddings", json={"input": big},
                                             timeout=60), 413, "4096")

    def fire(self, path, body, count):
        with concurrent.futures.ThreadPoolExecutor(count) as pool:
            return list(pool.map(
                lambda _: requests.post(f"{self.url}{path}", json=body, timeout=120),
                range(count)))

    def test_429_when_the_queue_is_full(self):
        # --max_queue=1 --max_batch_size=1: one document computing, one
        # waiting; concurrent long ones beyond that are refused.
        document = ("The quick brown fox jumps over the lazy dog near the river bank. " * 55)[:3500]
        for path, body, openai in (("/embed", {"inputs": document, "model": "minilm"}, False),
                                   ("/v1/embeddings", {"input": document, "model": "minilm"},
                                    True)):
            with self.subTest(path=path):
                refused = []
                for _ in range(5):  # rounds of 10 concurrent requests, until one is refused
                    responses = self.fire(path, body, 10)
                    for response in responses:
                        self.assertIn(response.status_code, (200, 429), describe(response))
                    refused = [r for r in responses if r.status_code == 429]
                    if refused:
                        break
                self.assertTrue(refused, "no 429 in 50 concurrent requests")
                if openai:
                    self.assertOpenAiError(refused[0], 429, "queue", type_="rate_limit_error")
                else:
                    self.assertTeiError(refused[0], 429, "queue", "Overloaded")


# ---- Bearer tokens, as the clients send them ----

class AuthenticatedClientsTest(ApiTestCase):
    """A server run with --auth_token_file: OpenAI's api_key and Hugging
    Face's token reach it as `Authorization: Bearer ...`."""

    TOKEN = "client-test-0123456789abcdef"

    @classmethod
    def setUpClass(cls):
        folder = Path(tempfile.mkdtemp(prefix="docsparse-tokens."))
        _temp_dirs.append(folder)
        tokens = folder / "tokens.txt"
        tokens.write_text(f"{cls.TOKEN} minilm,minilm-lsg\n")
        cls.server = Server(ARGS.model_repository, ["--threads=2", f"--auth_token_file={tokens}"])
        _servers["auth"] = cls.server

    def test_openai_api_key_is_the_bearer_token(self):
        from openai import AuthenticationError, OpenAI, PermissionDeniedError

        good = OpenAI(base_url=f"{self.server.url}/v1", api_key=self.TOKEN, max_retries=0)
        response = good.embeddings.create(model="minilm", input=["a document"])
        self.assertEqual(len(response.data[0].embedding), 384)
        with self.assertRaises(PermissionDeniedError):  # not a model of the token's
            good.embeddings.create(model="minilm-sbm", input=["a document"])
        wrong = OpenAI(base_url=f"{self.server.url}/v1", api_key="wrong-0123456789abcdef",
                       max_retries=0)
        with self.assertRaises(AuthenticationError):
            wrong.embeddings.create(model="minilm", input=["a document"])

    def test_hugging_face_token_is_the_bearer_token(self):
        # InferenceClient names no model: the server's default, minilm-lsg.
        from huggingface_hub import InferenceClient

        vector = np.asarray(InferenceClient(model=self.server.url, token=self.TOKEN)
                            .feature_extraction("a document")).reshape(-1)
        self.assertEqual(vector.shape, (384,))
        with self.assertRaises(Exception) as refused:
            InferenceClient(model=self.server.url, token="wrong-0123456789abcdef") \
                .feature_extraction("a document")
        self.assertIn("401", str(refused.exception))


# ---- Draining: 503 ----

class DrainTest(ApiTestCase):
    """Stops the limits server: runs last."""

    def test_503_while_draining_and_in_flight_work_finishes(self):
        server = limits_server()
        gpl = GPL3.read_text(encoding="utf-8")
        in_flight = {}

        def long_call():  # gRPC calls in flight hold the drain open
            try:
                in_flight["response"] = grpc_embed(server, gpl * 4, "minilm")
            except grpc.RpcError as error:
                in_flight["error"] = error

        caller = threading.Thread(target=long_call)
        caller.start()
        time.sleep(0.3)
        server.process.send_signal(signal.SIGTERM)
        answers = {}
        deadline = time.time() + 5
        try:
            # Wait for the drain to start: a request admitted just before it
            # would wait for the long call in the queue (--max_queue=1) and
            # outlive it, so nothing would hold the server up afterwards.
            while time.time() < deadline and "health" not in answers:
                response = requests.get(f"{server.url}/health", timeout=30)
                if response.status_code == 503:
                    answers["health"] = response
                time.sleep(0.01)
            self.assertIn("health", answers, "/health not 503 within 5 s of SIGTERM")
            response = requests.post(f"{server.url}/embed",
                                     json={"inputs": "x", "model": "minilm"}, timeout=30)
            answers["embed"] = response
            answers["openai"] = requests.post(f"{server.url}/v1/embeddings",
                                              json={"input": "x", "model": "minilm"}, timeout=30)
            answers["readyz"] = requests.get(f"{server.url}/readyz", timeout=30)
        except requests.ConnectionError as error:
            caller.join(timeout=60)
            self.fail(f"HTTP stopped while a gRPC call was still in flight: {error}; the call: "
                      f"{in_flight}")
        self.assertTeiError(answers["embed"], 503, "", "Unhealthy")
        self.assertOpenAiError(answers["openai"], 503, "", type_="server_error")
        self.assertTeiError(answers["health"], 503, "", "Unhealthy")
        self.assertEqual(answers["readyz"].status_code, 503)
        caller.join(timeout=60)
        self.assertIn("response", in_flight, in_flight.get("error"))
        self.assertEqual(len(in_flight["response"].embedding), 384)
        code = server.stop()
        del _servers["limits"]
        self.assertEqual(code, 0, server.log())


# ---- Main ----

def main():
    global ARGS, pb, pb_grpc
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--server-binary", required=True)
    parser.add_argument("--proto-dir", required=True)
    parser.add_argument("--model-repository", required=True)
    parser.add_argument("--seq2seq-fixture",
                        default=str(SOURCE_DIR / "tests" / "fixtures" / "seq2seq" / "bart"))
    parser.add_argument("tests", nargs="*", help="TestCase or TestCase.test_name to run")
    ARGS = parser.parse_args()

    stubs = tempfile.mkdtemp(prefix="docsparse-http-clients-stubs.")
    _temp_dirs.append(Path(stubs))
    generate_stubs(ARGS.proto_dir, stubs)
    from docsparse.v1 import docsparse_pb2, docsparse_pb2_grpc  # noqa: E402
    pb, pb_grpc = docsparse_pb2, docsparse_pb2_grpc
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

    loader = unittest.TestLoader()
    # DrainTest stops the limits server: last.
    order = [ReflectionTest, OpenAiClientTest, HuggingFaceClientTest, ServerSentEventsTest,
             ErrorMappingTest, OpenApiTest, AuthenticatedClientsTest, LimitsTest, DrainTest]
    if ARGS.tests:
        suite = loader.loadTestsFromNames(ARGS.tests, sys.modules[__name__])
    else:
        suite = unittest.TestSuite(loader.loadTestsFromTestCase(case) for case in order)
    started = time.time()
    try:
        result = unittest.TextTestRunner(verbosity=2, stream=sys.stdout).run(suite)
    finally:
        for name, server in _servers.items():
            if server.process.poll() is not None and server.process.returncode != 0:
                print(f"server '{name}' exited {server.process.returncode}:\n{server.log()}")
        stop_servers()
    # A test with failing subtests is one failed test.
    failed = len({getattr(test, "test_case", test).id()
                  for test, _ in result.failures + result.errors})
    passed = max(0, result.testsRun - failed - len(result.skipped))
    print(f"({time.time() - started:.0f} s)")
    print(f"{passed} passed, {failed} failed")
    return 0 if result.wasSuccessful() and failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
