"""The installed package itself, without a server: the generated stubs are
package-relative, the dataclasses mirror every field of the proto (so a field
added to docsparse.proto fails here until the client carries it), and the
runtime pins match the generated code."""
import dataclasses
import re
import unittest
from importlib import metadata
from pathlib import Path

import docsparse
from docsparse import _convert
from docsparse._convert import pb


def fields(cls):
    return {f.name for f in dataclasses.fields(cls)}


def proto_fields(message):
    return {f.name for f in message.DESCRIPTOR.fields}


class GeneratedStubsTest(unittest.TestCase):
    def test_stubs_are_generated_and_package_relative(self):
        stubs = Path(docsparse.__file__).parent / "_proto"
        generated = sorted(p.name for p in stubs.rglob("*_pb2*") if p.suffix in (".py", ".pyi"))
        self.assertEqual(generated,
                         ["docsparse_pb2.py", "docsparse_pb2.pyi", "docsparse_pb2_grpc.py"])
        for path in [*stubs.rglob("*.py"), *stubs.rglob("*.pyi")]:
            for line in path.read_text(encoding="utf-8").splitlines():
                self.assertIsNone(re.match(r"\s*(from|import) docsparse\b", line),
                                  f"{path.name}: {line}")
        self.assertEqual(pb.DESCRIPTOR.name, "docsparse/v1/docsparse.proto")

    def test_every_rpc_has_a_method(self):
        rpcs = {m.name for m in pb.DESCRIPTOR.services_by_name["DocumentService"].methods}
        self.assertEqual(rpcs, {"Embed", "Classify", "Summarize", "SummarizeStream",
                                "ListModels"})
        for client in (docsparse.Client, docsparse.AsyncClient):
            for method in ("embed", "classify", "summarize", "models", "health"):
                self.assertTrue(callable(getattr(client, method)), method)

    def test_runtime_requirements_follow_the_generator(self):
        requires = metadata.requires("docsparse")
        self.assertTrue(any(re.match(r"grpcio>=\d", r) for r in requires), requires)
        self.assertTrue(any(r.startswith("protobuf") for r in requires), requires)
        self.assertTrue(any(r.startswith("grpcio-health-checking") for r in requires), requires)


class MirrorsTheProtoTest(unittest.TestCase):
    def test_results_have_every_field(self):
        pairs = [
            (docsparse.CostReport, pb.CostReport), (docsparse.AttentionKnobs, pb.AttentionKnobs),
            (docsparse.LayerCost, pb.LayerCost), (docsparse.MaskMap, pb.MaskMap),
            (docsparse.Timings, pb.Timings), (docsparse.LabelScore, pb.LabelScore),
            (docsparse.ExtractedSentence, pb.ExtractedSentence),
            (docsparse.ModelInfo, pb.ModelInfo),
            (docsparse.GenerationParams, pb.GenerationParams),
            (docsparse.ExtractiveParams, pb.ExtractiveParams),
            (docsparse.Budget, pb.SparsityBudget),
        ]
        for ours, theirs in pairs:
            self.assertEqual(fields(ours), proto_fields(theirs), ours.__name__)
        self.assertEqual(fields(docsparse.EmbedResult), proto_fields(pb.EmbedResponse))
        self.assertEqual(fields(docsparse.ClassifyResult), proto_fields(pb.ClassifyResponse))
        self.assertEqual(fields(docsparse.SummarizeResult), proto_fields(pb.SummarizeResponse))

    def test_enums_have_every_value(self):
        for ours in (docsparse.AttentionKind, docsparse.Overflow, docsparse.Pooling,
                     docsparse.Task, docsparse.SummaryKind, docsparse.ClassificationMethod):
            proto_enum = _convert._PROTO_ENUM[ours]
            for number in proto_enum.values():
                member = _convert.enum_from_proto(ours, number)
                self.assertEqual(_convert.enum_to_proto(ours, member, "x"), number, member)
            self.assertEqual(len(ours), len(proto_enum.values()), ours.__name__)

    def test_results_are_frozen(self):
        budget = docsparse.Budget(max_density=0.1, attention="LSG")
        self.assertIs(budget.attention, docsparse.AttentionKind.LSG)
        with self.assertRaises(dataclasses.FrozenInstanceError):
            budget.max_density = 0.2

    def test_budget_round_trips(self):
        for budget in (docsparse.Budget(),
                       docsparse.Budget(max_density=0.25, seed=7, strict=True),
                       docsparse.Budget(max_attention_gflops=3.5, attention="sbm"),
                       docsparse.Budget(edge_regularization=0.0)):
            message = _convert.budget_to_proto(budget)
            self.assertEqual(_convert.budget_from_proto(message), budget)

    def test_error_pickles(self):
        import pickle

        error = pickle.loads(pickle.dumps(docsparse.DocsparseError("NOT_FOUND", "no model")))
        self.assertEqual((error.code, error.message, str(error)),
                         ("NOT_FOUND", "no model", "NOT_FOUND: no model"))


if __name__ == "__main__":
    unittest.main()
