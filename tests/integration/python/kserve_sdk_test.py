#!/usr/bin/env python3
"""KServe's own Python SDK against docsparse's KServe v2 endpoint.

A KServe user's client is `kserve.InferenceGRPCClient`, not hand-made stubs.
It sends parameters as bool, int64 or string only (it refuses a Python
float) and keeps only those types from a response. This test runs that
client against the real docsparse-server on loopback and checks that it can
send a density budget and a temperature, and read every cost figure (the
"cost" JSON parameter); and that a call's labels are embedded once, not once
per document. Prints "N passed, M failed"; exits non-zero on a failure.
"""
import argparse
import asyncio
import json
import os
import sys
import traceback

from kserve import InferenceGRPCClient, InferInput, InferRequest
from kserve.protocol.infer_type import RequestedOutput
from kserve.protocol.grpc.grpc_predict_v2_pb2 import InferParameter

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import server_process  # noqa: E402

MODEL = "minilm"
TEXTS = [
    "The quick brown fox jumps over the lazy dog.",
    "Preheat the oven to 200 degrees and bake the bread for forty minutes.",
    "Stocks fell sharply on Monday after the central bank raised interest rates.",
    "Permission is granted to copy, distribute and modify this software.",
]


def parameter(parameters, name):
    """A response parameter as the SDK hands it over (a plain value, or an
    InferParameter it did not convert)."""
    value = parameters[name]
    if isinstance(value, InferParameter):
        return getattr(value, value.WhichOneof("parameter_choice"))
    return value


def text_input(texts):
    return InferInput("text", [len(texts)], "BYTES", data=[t.encode() for t in texts])


async def infer(client, texts, parameters, outputs=("embedding",)):
    request = InferRequest(MODEL, [text_input(texts)], parameters=parameters,
                           request_outputs=[RequestedOutput(o) for o in outputs])
    return await client.infer(request)


async def main_async(address):
    client = InferenceGRPCClient(address, timeout=120)
    passed = failed = 0

    async def check(name, coroutine):
        nonlocal passed, failed
        try:
            await coroutine()
            passed += 1
            print(f"[ OK ] {name}")
        except Exception:  # report every failure, keep going
            failed += 1
            print(f"[FAIL] {name}\n{traceback.format_exc()}")

    async def ready():
        assert await client.is_server_ready()

    async def density_budget_as_a_string():
        # The SDK cannot send 0.2 as a number: it refuses floats.
        capped = await infer(client, TEXTS[:1], {"max_density": "0.2", "attention": "dense"})
        cost = json.loads(parameter(capped.parameters, "cost"))
        assert cost["budget"]["max_density"] == 0.2, cost
        assert cost["budget_met"] is False, cost  # dense attention cannot go below 1
        assert parameter(capped.parameters, "budget_met") is False
        free = await infer(client, TEXTS[:1], {})
        assert json.loads(parameter(free.parameters, "cost"))["budget_met"] is True

    async def every_cost_figure_reads():
        response = await infer(client, TEXTS[:2], {"seed": 7})
        cost = json.loads(parameter(response.parameters, "cost"))
        for field in ("input_tokens", "attention_edges", "mean_density", "attention_flops",
                      "total_flops", "dense_equivalent_flops", "budget_met"):
            assert field in cost, (field, cost)
        assert float(cost["mean_density"]) == 1.0, cost
        assert float(cost["total_flops"]) > float(cost["attention_flops"]) > 0, cost
        assert int(cost["input_tokens"]) == parameter(response.parameters, "input_tokens")
        embedding = response.outputs[0].as_numpy()
        assert embedding.shape == (2, 384), embedding.shape

    async def temperature_as_a_string():
        labels = "recipe,software license,news article"
        sharp = await infer(client, TEXTS[3:], {"labels": labels, "temperature": "0.01"},
                            outputs=("scores",))
        soft = await infer(client, TEXTS[3:], {"labels": labels, "temperature": "1"},
                           outputs=("scores",))
        sharp_scores = sharp.outputs[0].as_numpy()[0]
        soft_scores = soft.outputs[0].as_numpy()[0]
        assert sharp_scores.argmax() == 1, sharp_scores
        assert sharp_scores.max() > soft_scores.max(), (sharp_scores, soft_scores)

    async def labels_embedded_once_per_call():
        # Fresh labels (not cached), four documents: the label prompts are
        # encoded once for the call, not once per document.
        labels = ",".join(f"fresh topic {i} for this call" for i in range(6))
        four = await infer(client, TEXTS, {"labels": labels}, outputs=("scores",))
        four_tokens = parameter(four.parameters, "input_tokens")
        documents_only = await infer(client, TEXTS, {}, outputs=("embedding",))
        document_tokens = parameter(documents_only.parameters, "input_tokens")
        label_tokens = four_tokens - document_tokens
        assert label_tokens > 0, (four_tokens, document_tokens)
        again = await infer(client, TEXTS[:1], {"labels": labels.replace("fresh", "new")},
                            outputs=("scores",))
        one_document = parameter(again.parameters, "input_tokens")
        one_label_set = one_document - parameter(
            (await infer(client, TEXTS[:1], {})).parameters, "input_tokens")
        # "new ..." labels tokenize like "fresh ...": one set's tokens.
        assert label_tokens == one_label_set, (label_tokens, one_label_set)
        assert four.outputs[0].as_numpy().shape == (4, 6)

    await check("server ready", ready)
    await check("max_density sent as a string is applied and reported", density_budget_as_a_string)
    await check("every cost figure reads from the cost parameter", every_cost_figure_reads)
    await check("temperature sent as a string is applied", temperature_as_a_string)
    await check("a call's labels are embedded once, not per document",
                labels_embedded_once_per_call)
    await client.close()
    return passed, failed


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--server-binary", required=True)
    parser.add_argument("--model-repository", required=True)
    args = parser.parse_args()
    proc, address = server_process.start_server(
        args.server_binary, args.model_repository, ["--threads=2", "--precision=fp32"])
    try:
        passed, failed = asyncio.run(main_async(address))
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
