"""docsparse.Client against the real server (server_fixture.py)."""
import math
import os
import tempfile
import unittest

import grpc

import docsparse
from docsparse import (AttentionKind, Budget, ClassificationMethod, DocsparseError,
                       ExtractiveParams, GenerationParams, HealthStatus, SummaryKind, Task,
                       TokenIds)
from server_fixture import GPL3, shared_server

LABELS = ["software license", "recipe", "news article"]
# Greedy and short: the tiny random BART streams a piece per token.
GREEDY = GenerationParams(num_beams=1, max_length=24)
# The tiny BART's (random) summary of it has whitespace all along, so the
# stream sends text before its last chunk.
SUMMARY_SOURCE = ("The committee met on Tuesday to review the budget for the coming year. "
                  "Members agreed that spending on roads should rise.")


def norm(vector):
    return math.sqrt(sum(x * x for x in vector))


def cosine(a, b):
    return sum(x * y for x, y in zip(a, b)) / (norm(a) * norm(b))


class ClientTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = shared_server()
        cls.client = docsparse.Client(cls.server.address, timeout=300)
        cls.gpl = GPL3.read_text(encoding="utf-8")

    @classmethod
    def tearDownClass(cls):
        cls.client.close()

    def assertError(self, code, fragment, call, *args, **kwargs):
        with self.assertRaises(DocsparseError) as raised:
            call(*args, **kwargs)
        error = raised.exception
        self.assertEqual(error.code, code, error.message)
        self.assertEqual(error.grpc_code, getattr(grpc.StatusCode, code))
        self.assertIn(fragment, error.message)
        self.assertTrue(str(error).startswith(code + ": "), str(error))
        return error

    # ------------------------------------------------------------ admin --

    def test_health_is_serving(self):
        self.client.wait_until_ready(timeout=30)
        self.assertIs(self.client.health(), HealthStatus.SERVING)
        self.assertIs(self.client.health("docsparse.v1.DocumentService"), HealthStatus.SERVING)
        self.assertError("NOT_FOUND", "", self.client.health, "no.such.Service")

    def test_models_lists_the_repository(self):
        models = {m.name: m for m in self.client.models()}
        self.assertIn("minilm", models)
        self.assertIn("bart", models)
        lsg = models["minilm-lsg"]
        self.assertEqual(lsg.architecture, "bert")
        self.assertIs(lsg.attention, AttentionKind.LSG)
        self.assertIn(AttentionKind.DENSE, lsg.available_attention)
        self.assertEqual((lsg.hidden_size, lsg.num_layers, lsg.num_heads), (384, 6, 12))
        self.assertEqual(lsg.max_position_tokens, 16384)
        self.assertEqual(set(lsg.tasks), {Task.EMBED, Task.CLASSIFY, Task.SUMMARIZE})
        self.assertIn("software license", lsg.default_labels)
        self.assertTrue(lsg.ready)
        self.assertEqual(models["bart"].architecture, "bart")
        self.assertEqual(models["bart"].tasks, (Task.SUMMARIZE,))

    # ------------------------------------------------------------ embed --

    def test_embed_reports_its_cost(self):
        result = self.client.embed("Hello world.", model="minilm")
        self.assertEqual(result.model, "minilm")
        self.assertEqual(len(result.embedding), 384)
        self.assertIsInstance(result.embedding, list)
        self.assertAlmostEqual(norm(result.embedding), 1.0, places=4)
        cost = result.cost
        self.assertEqual(cost.input_tokens, 5)  # [CLS] hello world . [SEP]
        self.assertEqual(cost.windows, 1)
        self.assertFalse(cost.truncated)
        self.assertIs(cost.attention, AttentionKind.DENSE)
        self.assertEqual(cost.mean_density, 1.0)
        self.assertEqual(len(cost.layers), 6)
        self.assertEqual([len(layer.head_edges) for layer in cost.layers], [12] * 6)
        self.assertEqual(cost.attention_edges, 6 * 12 * 5 * 5)
        self.assertEqual(cost.attention_flops, cost.attention_edges * 4 * 32)  # d_head 32
        self.assertGreater(cost.total_flops, cost.attention_flops)
        self.assertEqual(cost.total_flops, cost.dense_equivalent_flops)
        self.assertTrue(cost.budget_met)
        self.assertGreater(cost.timings.total_ms, 0)
        self.assertGreaterEqual(cost.batch_size, 1)
        self.assertIn(cost.precision, ("fp32", "bf16", "int8"))
        self.assertTrue(cost.isa)

    def test_density_budget_is_honoured_and_reported(self):
        native = self.client.embed(self.gpl)  # the default model: minilm-lsg
        self.assertEqual(native.model, "minilm-lsg")
        self.assertIs(native.cost.attention, AttentionKind.LSG)
        self.assertEqual(native.cost.windows, 1)  # 6,843 tokens in one LSG pass
        self.assertLess(native.cost.mean_density, 0.5)
        cap = native.cost.mean_density / 2
        capped = self.client.embed(self.gpl, budget=Budget(max_density=cap))
        self.assertEqual(capped.cost.budget.max_density, cap)
        self.assertTrue(capped.cost.budget_met)
        self.assertLessEqual(capped.cost.mean_density, cap)
        self.assertLess(capped.cost.attention_flops, native.cost.attention_flops)
        self.assertNotEqual(capped.cost.knobs, native.cost.knobs)  # the planner retuned
        self.assertEqual(capped.cost.input_tokens, native.cost.input_tokens)
        self.assertLess(capped.cost.total_flops, capped.cost.dense_equivalent_flops)
        self.assertGreater(cosine(capped.embedding, native.embedding), 0.9)

    def test_attention_gflops_budget_is_honoured(self):
        native = self.client.embed(self.gpl)
        cap = native.cost.attention_gflops * 0.6
        capped = self.client.embed(self.gpl, budget=Budget(max_attention_gflops=cap))
        self.assertEqual(capped.cost.budget.max_attention_gflops, cap)
        self.assertTrue(capped.cost.budget_met)
        self.assertLessEqual(capped.cost.attention_gflops, cap)

    def test_budget_overrides_the_planner(self):
        result = self.client.embed("A short note.", budget=Budget(attention="dense"))
        self.assertIs(result.cost.attention, AttentionKind.DENSE)
        self.assertIs(result.cost.budget.attention, AttentionKind.DENSE)

    def test_bad_budgets_are_invalid_argument(self):
        self.assertError("INVALID_ARGUMENT", "budget.max_density", self.client.embed, "x",
                         budget=Budget(max_density=1.5))
        self.assertError("INVALID_ARGUMENT", "budget.max_attention_gflops", self.client.embed,
                         "x", budget=Budget(max_attention_gflops=-1))
        # Below the cheapest plan: strict refuses naming the minimum ...
        self.assertError("INVALID_ARGUMENT", "minimum", self.client.embed, self.gpl,
                         budget=Budget(max_density=0.001, strict=True))
        # ... and without strict the cheapest plan runs, budget_met=False.
        loose = self.client.embed(self.gpl, budget=Budget(max_density=0.001))
        self.assertFalse(loose.cost.budget_met)

    def test_unknown_model_is_not_found(self):
        error = self.assertError("NOT_FOUND", "nope", self.client.embed, "x", model="nope")
        self.assertIsInstance(error, Exception)

    def test_documents_as_text_bytes_path_and_token_ids(self):
        text = "Hello world. The quick brown fox jumps over the lazy dog."
        by_text = self.client.embed(text, model="minilm").embedding
        by_bytes = self.client.embed(text.encode(), model="minilm").embedding
        with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
            f.write(text)
        try:
            from pathlib import Path
            by_path = self.client.embed(Path(f.name), model="minilm").embedding
        finally:
            os.unlink(f.name)
        for other in (by_bytes, by_path):
            self.assertGreater(cosine(by_text, other), 0.9999)
        # hello world . in bert-base-uncased's vocabulary.
        by_ids = self.client.embed(TokenIds([7592, 2088, 1012]), model="minilm")
        self.assertEqual(by_ids.cost.input_tokens, 5)
        self.assertGreater(cosine(by_ids.embedding,
                                  self.client.embed("hello world.", model="minilm").embedding),
                           0.9999)
        self.assertError("INVALID_ARGUMENT", "document.utf8_bytes", self.client.embed,
                         b"bad \xff byte")

    def test_pooling_and_normalize(self):
        text = "Sparse attention keeps long documents affordable."
        mean = self.client.embed(text, model="minilm", pooling="mean").embedding
        cls = self.client.embed(text, model="minilm", pooling=docsparse.Pooling.CLS).embedding
        self.assertLess(cosine(mean, cls), 0.999)
        raw = self.client.embed(text, model="minilm", normalize=False).embedding
        self.assertGreater(abs(norm(raw) - 1), 0.01)
        self.assertGreater(cosine(raw, mean), 0.9999)

    def test_overflow(self):
        self.assertError("RESOURCE_EXHAUSTED", "512", self.client.embed, self.gpl, model="minilm",
                         overflow="reject")
        truncated = self.client.embed(self.gpl, model="minilm", overflow="truncate")
        self.assertTrue(truncated.cost.truncated)
        self.assertEqual(truncated.cost.input_tokens, 512)
        chunked = self.client.embed(self.gpl, model="minilm", overflow=docsparse.Overflow.CHUNK)
        self.assertGreater(chunked.cost.windows, 1)

    def test_mask_maps(self):
        result = self.client.embed(self.gpl, return_mask_map=True, mask_map_resolution=16)
        maps = result.cost.mask_maps
        self.assertEqual([m.layer for m in maps], list(range(6)))
        for m in maps:
            self.assertLessEqual(max(m.rows, m.cols), 16)
            self.assertEqual(len(m.density), m.rows * m.cols)
            self.assertTrue(all(0 <= d <= 1 for d in m.density))
            self.assertGreater(m.at(0, 0), 0)  # the global token sees everything
        self.assertEqual(self.client.embed("x").cost.mask_maps, ())

    def test_embed_many_keeps_the_order(self):
        texts = ["A recipe for bread.", "Stock markets fell sharply today.",
                 "The GNU General Public License.", "Functions and variables in C++."]
        many = self.client.embed_many(texts, model="minilm")
        self.assertEqual(len(many), len(texts))
        for text, result in zip(texts, many):
            one = self.client.embed(text, model="minilm")
            self.assertGreater(cosine(one.embedding, result.embedding), 0.999)
        self.assertError("NOT_FOUND", "nope", self.client.embed_many, texts, model="nope")

    # --------------------------------------------------------- classify --

    def test_classify_with_labels(self):
        result = self.client.classify(self.gpl, LABELS)
        self.assertEqual(result.label, "software license")
        self.assertEqual(sorted(s.label for s in result.scores), sorted(LABELS))
        self.assertAlmostEqual(sum(s.score for s in result.scores), 1.0, places=5)
        self.assertEqual([s.score for s in result.scores],
                         sorted((s.score for s in result.scores), reverse=True))
        self.assertIs(result.method, ClassificationMethod.ZERO_SHOT)
        self.assertGreater(result.cost.input_tokens, 6000)

    def test_classify_default_labels_and_temperature(self):
        result = self.client.classify("Mix the flour, eggs and milk; bake for an hour.",
                                      temperature=1.0)
        self.assertEqual(len(result.scores), 6)
        self.assertEqual(result.label, "recipe")
        self.assertLess(result.scores[0].score, 0.5)  # temperature 1: a flat softmax
        self.assertError("INVALID_ARGUMENT", "temperature", self.client.classify, "x",
                         temperature=-1)

    # -------------------------------------------------------- summarize --

    def test_extractive_summary(self):
        result = self.client.summarize(self.gpl, extractive=ExtractiveParams(max_sentences=3))
        self.assertIs(result.kind, SummaryKind.EXTRACTIVE)
        self.assertEqual(len(result.sentences), 3)
        indices = [s.index for s in result.sentences]
        self.assertEqual(indices, sorted(indices))
        raw = self.gpl.encode()
        for sentence in result.sentences:
            # The sentence's text has its line breaks made spaces.
            span = raw[sentence.begin_byte:sentence.end_byte].decode()
            self.assertEqual(" ".join(span.split()), sentence.text)
            self.assertIn(sentence.text, result.summary)
        self.assertGreater(result.cost.windows, 3)  # one per candidate sentence

    def test_extractive_stream_sends_the_whole_summary(self):
        unary = self.client.summarize(self.gpl, extractive=ExtractiveParams(max_sentences=2))
        stream = self.client.summarize(self.gpl, extractive=ExtractiveParams(max_sentences=2),
                                       stream=True)
        self.assertIsInstance(stream, docsparse.SummaryStream)
        self.assertEqual(list(stream), [unary.summary])
        self.assertEqual(stream.result.summary, unary.summary)
        self.assertEqual(stream.cost.input_tokens, unary.cost.input_tokens)

    def test_abstractive_stream_matches_unary(self):
        unary = self.client.summarize(SUMMARY_SOURCE, model="bart", generation=GREEDY)
        self.assertIs(unary.kind, SummaryKind.ABSTRACTIVE)
        self.assertTrue(unary.summary)
        self.assertEqual(unary.cost.generated_tokens, len(unary.token_ids))
        self.assertGreater(unary.cost.decoder_flops, 0)
        with self.client.summarize(SUMMARY_SOURCE, model="bart", generation=GREEDY,
                                   stream=True) as stream:
            pieces = list(stream)
        self.assertGreater(len(pieces), 1)  # token by token
        self.assertEqual("".join(pieces), unary.summary)
        result = stream.result
        self.assertEqual(result.summary, unary.summary)
        self.assertEqual(result.token_ids, unary.token_ids)
        self.assertEqual(result.model, "bart")
        self.assertEqual(stream.cost.generated_tokens, len(unary.token_ids))
        self.assertGreater(stream.cost.timings.time_to_first_token_ms, 0)
        self.assertLessEqual(stream.cost.timings.time_to_first_token_ms,
                             stream.cost.timings.total_ms)

    def test_stream_result_needs_the_end(self):
        stream = self.client.summarize(SUMMARY_SOURCE, model="bart", generation=GREEDY,
                                       stream=True)
        first = next(stream)
        with self.assertRaises(RuntimeError):
            stream.result
        result = stream.collect()  # drains the rest
        self.assertTrue(result.summary.startswith(first))
        self.assertTrue(stream.done)
        self.assertEqual(list(stream), [])

    def test_stream_errors_are_raised_while_iterating(self):
        stream = self.client.summarize("x", model="nope", stream=True)
        with self.assertRaises(DocsparseError) as raised:
            list(stream)
        self.assertEqual(raised.exception.code, "NOT_FOUND")

    def test_generation_on_an_encoder_is_invalid_argument(self):
        self.assertError("INVALID_ARGUMENT", "generation", self.client.summarize, "Some text.",
                         model="minilm", generation=GREEDY)

    def test_deadline_exceeded(self):
        self.assertError("DEADLINE_EXCEEDED", "", self.client.summarize, self.gpl, timeout=0.001)

    # ----------------------------------------------------- client side --

    def test_context_manager_closes_the_channel(self):
        with docsparse.Client(self.server.address) as client:
            self.assertIs(client.health(), HealthStatus.SERVING)
        with self.assertRaises(ValueError):  # grpc: "Cannot invoke RPC on closed channel!"
            client.health()

    def test_client_default_model(self):
        with docsparse.Client(self.server.address, model="minilm") as client:
            self.assertEqual(client.embed("x").model, "minilm")
            self.assertEqual(client.embed("x", model="minilm-lsg").model, "minilm-lsg")

    def test_arguments_are_checked_before_sending(self):
        with self.assertRaises(ValueError):
            Budget(max_density=0.1, max_attention_gflops=1.0)
        with self.assertRaises(ValueError):
            self.client.embed("x", overflow="sideways")
        with self.assertRaises(ValueError):
            self.client.embed("x", timeout=0)
        with self.assertRaises(TypeError):
            self.client.classify("x", "software license,recipe")
        with self.assertRaises(TypeError):
            self.client.embed(42)


if __name__ == "__main__":
    unittest.main()
