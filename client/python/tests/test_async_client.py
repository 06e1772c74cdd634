"""docsparse.AsyncClient (grpc.aio) against the real server (server_fixture.py)."""
import asyncio
import math
import unittest

import docsparse
from docsparse import (AttentionKind, Budget, DocsparseError, ExtractiveParams, GenerationParams,
                       HealthStatus, SummaryKind)
from server_fixture import GPL3, shared_server

GREEDY = GenerationParams(num_beams=1, max_length=24)
# The tiny BART's (random) summary of it has whitespace all along, so the
# stream sends text before its last chunk.
SUMMARY_SOURCE = ("The committee met on Tuesday to review the budget for the coming year. "
                  "Members agreed that spending on roads should rise.")


class AsyncClientTest(unittest.IsolatedAsyncioTestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = shared_server()
        cls.gpl = GPL3.read_text(encoding="utf-8")

    async def asyncSetUp(self):
        # A grpc.aio channel belongs to the loop it was made on: one per test.
        self.client = docsparse.AsyncClient(self.server.address, timeout=300)

    async def asyncTearDown(self):
        await self.client.close()

    async def assertError(self, code, fragment, awaitable):
        with self.assertRaises(DocsparseError) as raised:
            await awaitable
        self.assertEqual(raised.exception.code, code, raised.exception.message)
        self.assertIn(fragment, raised.exception.message)

    async def test_health_and_models(self):
        await self.client.wait_until_ready(timeout=30)
        self.assertIs(await self.client.health(), HealthStatus.SERVING)
        names = [m.name for m in await self.client.models()]
        self.assertIn("minilm-lsg", names)
        self.assertIn("bart", names)

    async def test_embed_under_a_budget(self):
        result = await self.client.embed(self.gpl, budget=Budget(max_density=0.05))
        self.assertEqual(len(result.embedding), 384)
        self.assertAlmostEqual(math.sqrt(sum(x * x for x in result.embedding)), 1.0, places=4)
        self.assertIs(result.cost.attention, AttentionKind.LSG)
        self.assertEqual(result.cost.budget.max_density, 0.05)
        self.assertTrue(result.cost.budget_met)
        self.assertLessEqual(result.cost.mean_density, 0.05)

    async def test_concurrent_calls(self):
        texts = [f"Document number {i} is about {topic}." for i, topic in
                 enumerate(["bread", "markets", "licenses", "code", "football", "physics"])]
        many = await self.client.embed_many(texts, model="minilm")
        together = await asyncio.gather(*(self.client.embed(t, model="minilm") for t in texts))
        for a, b in zip(many, together):
            self.assertGreater(sum(x * y for x, y in zip(a.embedding, b.embedding)), 0.999)
        await self.assertError("NOT_FOUND", "nope",
                               self.client.embed_many(texts, model="nope"))

    async def test_classify(self):
        result = await self.client.classify(self.gpl, ["software license", "recipe"])
        self.assertEqual(result.label, "software license")

    async def test_extractive_summary(self):
        result = await self.client.summarize(self.gpl,
                                             extractive=ExtractiveParams(max_sentences=2))
        self.assertIs(result.kind, SummaryKind.EXTRACTIVE)
        self.assertEqual(len(result.sentences), 2)

    async def test_abstractive_stream_matches_unary(self):
        unary = await self.client.summarize(SUMMARY_SOURCE, model="bart", generation=GREEDY)
        stream = await self.client.summarize(SUMMARY_SOURCE, model="bart", generation=GREEDY,
                                             stream=True)
        self.assertIsInstance(stream, docsparse.AsyncSummaryStream)
        pieces = [piece async for piece in stream]
        self.assertGreater(len(pieces), 1)
        self.assertEqual("".join(pieces), unary.summary)
        self.assertEqual(stream.result.token_ids, unary.token_ids)
        self.assertEqual(stream.cost.generated_tokens, len(unary.token_ids))

    async def test_stream_collect_and_errors(self):
        async with await self.client.summarize(SUMMARY_SOURCE, model="bart", generation=GREEDY,
                                               stream=True) as stream:
            with self.assertRaises(RuntimeError):
                stream.result
            result = await stream.collect()
        self.assertTrue(result.summary)
        failing = await self.client.summarize("x", model="nope", stream=True)
        await self.assertError("NOT_FOUND", "nope", failing.collect())

    async def test_errors(self):
        await self.assertError("NOT_FOUND", "nope", self.client.embed("x", model="nope"))
        await self.assertError("INVALID_ARGUMENT", "budget.max_density",
                               self.client.embed("x", budget=Budget(max_density=0)))
        await self.assertError("DEADLINE_EXCEEDED", "",
                               self.client.summarize(self.gpl, timeout=0.001))

    async def test_context_manager(self):
        async with docsparse.AsyncClient(self.server.address) as client:
            self.assertIs(await client.health(), HealthStatus.SERVING)


if __name__ == "__main__":
    unittest.main()
