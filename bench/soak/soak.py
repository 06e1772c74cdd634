"""The clients and the report of bench/soak/run.

CLIENTS threads, each with a channel of its own, send one request at a time
for SECONDS: Embed, Classify, Summarize (extractive) and ListModels on the
served models, documents cut at random from /usr/share/common-licenses (a few
words to ~4k tokens, rarely ~16k on minilm-lsg), random budgets, overflow and
pooling options, short deadlines that expire, client cancellations, and
malformed requests: bytes that do not parse, and well-formed messages with a
bad field. The driver sends the server SIGTERM midway and restarts it; it
writes the server's pid to PIDFILE and what happened to EVENTS.

Every request ends in exactly one outcome: the status code it was answered
with, or lost when nothing came LOST_AFTER_S after its deadline (after its
sending when it had none). Exits 1 when a request was lost, a malformed
request was answered other than its expected code, a valid one was answered
a code it could not expect (INTERNAL and UNKNOWN never), or the server's
memory grew after warm-up.
"""
import argparse
import collections
import math
import os
import random
import sys
import threading
import time
import urllib.request

import grpc

from report import RSS_EVERY_S, format_counts, read_events, report

# A request not answered this long after its deadline is lost. The gRPC
# client ends a call at its deadline by itself, so for those this catches a
# client that hangs; requests without a deadline catch a server that never
# answers.
LOST_AFTER_S = 120
PROGRESS_EVERY_S = 30

LABEL_POOL = [
    "software license", "copyright law", "warranty disclaimer", "patents",
    "free software", "legal contract", "trademark", "open source community",
    "sports", "cooking recipe", "weather forecast", "music", "astronomy",
    "financial report", "medicine", "politics", "source code", "history",
]

OK = frozenset({"OK"})
INVALID = frozenset({"INVALID_ARGUMENT"})
EXHAUSTED = frozenset({"RESOURCE_EXHAUSTED"})
NOT_FOUND = frozenset({"NOT_FOUND"})

CHANNEL_OPTIONS = [
    ("grpc.max_send_message_length", 64 << 20),
    ("grpc.max_receive_message_length", 64 << 20),
    # The default backoff after a refused connection grows to 120 s: the
    # clients would miss the restarted server for minutes.
    ("grpc.initial_reconnect_backoff_ms", 200),
    ("grpc.min_reconnect_backoff_ms", 200),
    ("grpc.max_reconnect_backoff_ms", 1000),
    # One connection per client, as separate processes would have.
    ("grpc.use_local_subchannel_pool", 1),
]


class Plan:
    """One request to send and what may answer it."""

    def __init__(self, method, request, kind, expected, malformed=False, raw=False):
        self.method = method        # "Embed", "Classify", "Summarize", "ListModels"
        self.request = request      # a message, or bytes when raw
        self.kind = kind            # what it is, for the report
        self.expected = expected    # codes it may get besides deadline/cancel/restart
        self.malformed = malformed
        self.raw = raw
        self.deadline = None        # seconds, or None
        self.deadline_class = "none"
        self.cancel_after = None    # seconds, or None


Outcome = collections.namedtuple(
    "Outcome", "method kind malformed expected code details latency_s start end "
               "deadline_class cancelled size")


def size_of(plan):
    """The model and the document's length, for the report."""
    if plan.raw:
        return f"{len(plan.request)} bytes"
    if not hasattr(plan.request, "document"):
        return ""
    document = plan.request.document
    content = document.WhichOneof("content")
    length = {"text": lambda: f"{len(document.text)} chars",
              "utf8_bytes": lambda: f"{len(document.utf8_bytes)} bytes",
              "token_ids": lambda: f"{len(document.token_ids.ids)} ids"}.get(
                  content, lambda: "no document")()
    return f"{plan.request.model or '(default)'}, {length}"


class Corpus:
    """Real text: the distinct licenses of /usr/share/common-licenses."""

    def __init__(self, folder="/usr/share/common-licenses"):
        seen, texts = set(), []
        for name in sorted(os.listdir(folder)):
            path = os.path.realpath(os.path.join(folder, name))
            if path in seen or not os.path.isfile(path):
                continue
            seen.add(path)
            with open(path, encoding="utf-8", errors="replace") as file:
                texts.append(file.read())
        self.text = "\n\n".join(texts)

    def cut(self, rng, chars):
        """About `chars` characters from a random offset, on word boundaries."""
        chars = min(chars, len(self.text) - 1)
        while True:
            start = rng.randrange(0, len(self.text) - chars)
            text = self.text[start:start + chars]
            first_space = text.find(" ")
            if 0 <= first_space < 20 and chars > 40:
                text = text[first_space + 1:]
            if text.strip():
                return text


class Planner:
    """Draws the requests: the mix, the lengths, the budgets, the faults."""

    def __init__(self, pb, models, corpus):
        self.pb = pb
        self.models = models          # name -> ModelInfo
        self.names = sorted(models)
        self.corpus = corpus
        self.has_lsg = "minilm-lsg" in models

    def next(self, rng):
        r = rng.random()
        if r < 0.05:
            plan = self.garbage(rng)
        elif r < 0.15:
            plan = self.bad_field(rng)
        elif r < 0.18:
            plan = Plan("ListModels", self.pb.ListModelsRequest(), "list", OK)
        elif r < 0.50:
            plan = self.embed(rng)
        elif r < 0.75:
            plan = self.classify(rng)
        else:
            plan = self.summarize(rng)
        self.time_limits(rng, plan)
        return plan

    # ---------------------------------------------------------- valid --

    def document_chars(self, rng):
        # Log-uniform from a few words to ~4k tokens (~4.2 characters a token
        # in these licenses).
        return int(math.exp(rng.uniform(math.log(20), math.log(17000))))

    def common(self, rng, method, request, kind, model, chars):
        """Budget and options on `request`; returns the Plan."""
        pb = self.pb
        expected = set(OK)
        info = self.models[model]
        request.model = model
        text = self.corpus.cut(rng, chars)
        if rng.random() < 0.1:
            request.document.utf8_bytes = text.encode("utf-8")
        else:
            request.document.text = text
        budget = request.budget
        planners = {p.attention: p for p in info.planners}
        attention = info.attention
        if rng.random() < 0.25 and chars < 20000:
            attention = rng.choice(list(info.available_attention))
            budget.attention = attention
            kind += f" {pb.AttentionKind.Name(attention)[len('ATTENTION_KIND_'):].lower()}"
        cap = rng.random()
        if cap < 0.2:
            budget.max_density = round(rng.uniform(0.01, 1.0), 3)
            kind += " max_density"
        elif cap < 0.35:
            budget.max_attention_gflops = round(math.exp(rng.uniform(math.log(1e-3),
                                                                    math.log(10))), 4)
            kind += " max_gflops"
        elif cap < 0.45 and "edge_regularization" in planners.get(
                attention, pb.PlannerInfo()).knobs:
            budget.edge_regularization = round(rng.uniform(0, 3), 2)
            kind += " beta"
        planner = planners.get(attention)
        if planner is not None and rng.random() < 0.15:
            if "window" in planner.knobs:
                budget.knobs["window"] = rng.randrange(16, 514, 2)  # must be even
                kind += " knobs"
            elif "random_blocks" in planner.knobs:
                budget.knobs["random_blocks"] = rng.randint(0, 3)
                kind += " knobs"
        if planner is not None and planner.samples and rng.random() < 0.5:
            budget.seed = rng.getrandbits(63)
        if budget.WhichOneof("cap") is not None and rng.random() < 0.3:
            budget.strict = True
            expected |= INVALID  # below the planner's floor
            kind += " strict"
        options = request.options
        if method != "Summarize":
            overflow = rng.random()
            if overflow < 0.15:
                options.overflow = pb.OVERFLOW_TRUNCATE
            elif overflow < 0.3:
                options.overflow = pb.OVERFLOW_CHUNK
            elif overflow < 0.4:
                options.overflow = pb.OVERFLOW_REJECT
                expected |= EXHAUSTED  # longer than the model's positions
                kind += " reject"
        if rng.random() < 0.05:
            options.return_mask_map = True
            options.mask_map_resolution = rng.randint(8, 64)
        if rng.random() < 0.3:
            options.request_id = f"soak-{rng.getrandbits(48):x}"
        return Plan(method, request, kind, frozenset(expected))

    def embed(self, rng):
        pb = self.pb
        request = pb.EmbedRequest()
        if self.has_lsg and rng.random() < 0.03:
            # ~16k tokens in one pass: seconds on 2 cores, so rarely.
            request.model = "minilm-lsg"
            request.document.text = self.corpus.cut(rng, 68000)
            return Plan("Embed", request, "embed 16k", OK)
        request.pooling = rng.choice([pb.POOLING_UNSPECIFIED, pb.POOLING_CLS, pb.POOLING_MEAN])
        if rng.random() < 0.3:
            request.normalize = rng.random() < 0.5
        model = rng.choice(self.names)
        return self.common(rng, "Embed", request, "embed", model, self.document_chars(rng))

    def classify(self, rng):
        request = self.pb.ClassifyRequest()
        kind = "classify defaults"
        if rng.random() < 0.6:
            request.labels.extend(rng.sample(LABEL_POOL, rng.randint(1, 8)))
            kind = f"classify {len(request.labels)} labels"
        if rng.random() < 0.2:
            request.temperature = rng.uniform(0.01, 1.0)
        model = rng.choice(self.names)
        return self.common(rng, "Classify", request, kind, model, self.document_chars(rng))

    def summarize(self, rng):
        request = self.pb.SummarizeRequest()
        if rng.random() < 0.5:
            request.extractive.max_sentences = rng.randint(0, 8)
        if rng.random() < 0.5:
            request.extractive.diversity = rng.uniform(0, 1)
        model = rng.choice(self.names)
        return self.common(rng, "Summarize", request, "summarize", model,
                           self.document_chars(rng))

    def largest(self, rng):
        """The heaviest requests of the mix, one each (see Soak.prime)."""
        pb = self.pb
        plans = []
        if self.has_lsg:
            request = pb.EmbedRequest(model="minilm-lsg",
                                      document=pb.Document(text=self.corpus.cut(rng, 68000)))
            plans.append(Plan("Embed", request, "warm-up embed 16k", OK))
        for model in self.names:
            text = self.corpus.cut(rng, 17000)
            plans.append(Plan("Classify", pb.ClassifyRequest(
                model=model, document=pb.Document(text=text), labels=LABEL_POOL[:8]),
                "warm-up classify 4k", OK))
            plans.append(Plan("Summarize", pb.SummarizeRequest(
                model=model, document=pb.Document(text=text)), "warm-up summarize 4k", OK))
        return plans

    # ------------------------------------------------------ malformed --

    def garbage(self, rng):
        """Bytes no DocumentService request parses from."""
        noise = bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 64)))
        cases = [
            # field 2 (document) says 127 bytes follow; fewer do
            ("truncated field", b"\x12\x7f" + noise[:100]),
            # wire type 7 does not exist
            ("wire type 7", b"\x0f" + noise),
            # field number 0 is invalid
            ("field number 0", b"\x00" + noise),
            # the model name (a string) is not UTF-8
            ("model not UTF-8", b"\x0a\x02\xff\xfe"),
            # a varint longer than 10 bytes
            ("endless varint", b"\x08" + b"\xff" * 11),
        ]
        name, data = rng.choice(cases)
        method = rng.choice(["Embed", "Classify", "Summarize"])
        return Plan(method, data, f"bytes: {name}", INVALID, malformed=True, raw=True)

    def bad_field(self, rng):
        pb = self.pb
        model = rng.choice(self.names)
        text = self.corpus.cut(rng, rng.randint(20, 2000))
        doc = pb.Document(text=text)

        def embed(**fields):
            return "Embed", pb.EmbedRequest(model=model, document=doc, **fields)

        def classify(**fields):
            fields.setdefault("document", doc)
            return "Classify", pb.ClassifyRequest(model=model, **fields)

        def summarize(**fields):
            fields.setdefault("document", doc)
            return "Summarize", pb.SummarizeRequest(model=model, **fields)

        long_labels = [f"label {i}: " + "q z " * 250 for i in range(256)]
        cases = [
            ("max_density < 0", INVALID,
             lambda: embed(budget=pb.SparsityBudget(max_density=-rng.uniform(0.01, 1)))),
            ("max_density > 1", INVALID,
             lambda: classify(budget=pb.SparsityBudget(max_density=1.5))),
            ("max_density NaN", INVALID,
             lambda: embed(budget=pb.SparsityBudget(max_density=float("nan")))),
            ("max_attention_gflops 0", INVALID,
             lambda: summarize(budget=pb.SparsityBudget(max_attention_gflops=0))),
            ("unknown model", NOT_FOUND,
             lambda: ("Embed", pb.EmbedRequest(model=f"no-such-model-{rng.randint(0, 9)}",
                                               document=doc))),
            ("no document", INVALID, lambda: classify(document=pb.Document())),
            ("blank document", INVALID,
             lambda: ("Embed", pb.EmbedRequest(model=model,
                                               document=pb.Document(text=" \n\t ")))),
            ("utf8_bytes not UTF-8", INVALID,
             lambda: ("Embed", pb.EmbedRequest(
                 model=model, document=pb.Document(utf8_bytes=b"caf\xc3 \xff\xfe")))),
            ("token id outside the vocabulary", INVALID,
             lambda: ("Embed", pb.EmbedRequest(
                 model=model, document=pb.Document(
                     token_ids=pb.TokenIds(ids=[2023, rng.choice([-1, 10**7])]))))),
            ("257 labels", INVALID,
             lambda: classify(labels=[f"topic {i}" for i in range(257)])),
            ("duplicate label", INVALID, lambda: classify(labels=["patents", "patents"])),
            ("blank label", INVALID, lambda: classify(labels=["patents", "  "])),
            ("label over 1 KiB", INVALID, lambda: classify(labels=["x" * 1025])),
            ("temperature 0", INVALID, lambda: classify(temperature=0.0)),
            ("unknown knob", INVALID,
             lambda: embed(budget=pb.SparsityBudget(knobs={"no_such_knob": 1}))),
            ("attention the model lacks", INVALID,
             lambda: embed(budget=pb.SparsityBudget(attention=pb.ATTENTION_KIND_ROUTING))),
            ("attention enum 99", INVALID,
             lambda: embed(budget=pb.SparsityBudget(attention=99))),
            ("mask_map_resolution 5000", INVALID,
             lambda: embed(options=pb.RequestOptions(return_mask_map=True,
                                                     mask_map_resolution=5000))),
            ("max_sentences -1", INVALID,
             lambda: summarize(extractive=pb.ExtractiveParams(max_sentences=-1))),
            ("diversity 2", INVALID,
             lambda: summarize(extractive=pb.ExtractiveParams(diversity=2.0))),
            ("generation on an extractive model", INVALID,
             lambda: summarize(generation=pb.GenerationParams(num_beams=4))),
            ("token ids to Summarize", INVALID,
             lambda: summarize(document=pb.Document(token_ids=pb.TokenIds(ids=[2023, 2003])))),
            ("70,000 token ids", EXHAUSTED,
             lambda: ("Embed", pb.EmbedRequest(
                 model=model, document=pb.Document(token_ids=pb.TokenIds(ids=[2023] * 70000))))),
            ("256 labels of ~1 KB", EXHAUSTED,
             lambda: classify(document=pb.Document(text="Two words."), labels=long_labels)),
        ]
        name, expected, build = rng.choice(cases)
        method, request = build()
        return Plan(method, request, f"bad field: {name}", expected, malformed=True)

    # ------------------------------------------------------------ time --

    def time_limits(self, rng, plan):
        if plan.malformed:
            # Their answer is the point: nothing may cut it short.
            plan.deadline, plan.deadline_class = 60.0, "60 s"
            return
        r = rng.random()
        if r < 0.45:
            pass
        elif r < 0.8:
            plan.deadline, plan.deadline_class = 60.0, "60 s"
        else:
            plan.deadline = math.exp(rng.uniform(math.log(0.02), math.log(10.0)))
            plan.deadline_class = "short"
        if rng.random() < 0.1:
            plan.cancel_after = rng.uniform(0, 2.0)


def heap_in_use_kib(http_address):
    """The server's heap in use less its label caches, from its /metrics.

    RSS cannot tell a leak from the allocator's high-water mark (the server
    never trims its heap); the heap's bytes in use fall back when requests
    end. The label caches grow by design up to --label_cache_bytes per model.
    """
    with urllib.request.urlopen(f"http://{http_address}/metrics", timeout=5) as response:
        text = response.read().decode()
    heap, caches = None, 0.0
    for line in text.splitlines():
        if line.startswith("docsparse_heap_in_use_bytes "):
            heap = float(line.split()[-1])
        elif line.startswith("docsparse_label_cache_bytes{"):
            caches += float(line.split()[-1])
    return None if heap is None else int((heap - caches) / 1024)


class Soak:
    def __init__(self, args, pb, pb_grpc):
        self.args = args
        self.pb = pb
        self.pb_grpc = pb_grpc
        self.lock = threading.Lock()
        self.outcomes = []
        self.in_flight = 0
        self.sent = 0
        # (seconds since start, pid, RSS KiB, heap in use less label caches KiB or None)
        self.rss = []
        self.stop = threading.Event()
        self.started = time.time()
        self.primers = []
        self.primed = {}  # server pid -> when its warm-up requests were answered

    def send(self, channel, stub, plan):
        if plan.raw:
            call = channel.unary_unary(f"/docsparse.v1.DocumentService/{plan.method}",
                                       request_serializer=None, response_deserializer=None)
        else:
            call = getattr(stub, plan.method)
        done = threading.Event()
        finished = []
        start, wall = time.monotonic(), time.time()
        with self.lock:
            self.sent += 1
            self.in_flight += 1
        future = call.future(plan.request, timeout=plan.deadline)

        def on_done(_):
            finished.append(time.monotonic())
            done.set()

        future.add_done_callback(on_done)
        cancelled = False
        if plan.cancel_after is not None and not done.wait(plan.cancel_after):
            cancelled = future.cancel()
        if done.wait((plan.deadline or 0) + LOST_AFTER_S):
            code, details = future.code().name, future.details() or ""
            latency = finished[0] - start
        else:
            future.cancel()
            code, details, latency = "LOST", "", time.monotonic() - start
        outcome = Outcome(plan.method + (" [bytes]" if plan.raw else ""), plan.kind,
                          plan.malformed, plan.expected, code, details, latency, wall,
                          wall + latency, plan.deadline_class, cancelled, size_of(plan))
        with self.lock:
            self.in_flight -= 1
            self.outcomes.append(outcome)
        return outcome

    def client(self, index, planner, end):
        rng = random.Random(self.args.seed * 1000 + index)
        channel = grpc.insecure_channel(self.args.address, options=CHANNEL_OPTIONS)
        stub = self.pb_grpc.DocumentServiceStub(channel)
        while time.monotonic() < end:
            outcome = self.send(channel, stub, planner.next(rng))
            if outcome.code == "UNAVAILABLE":
                time.sleep(rng.uniform(0.1, 0.3))  # the server restarts: do not spin
        channel.close()

    def prime(self, planner, number, pid):
        """Sends the heaviest requests of the mix at once, when a server is ready.

        The server keeps freed memory for reuse (common/cpu_runtime.h), so its
        RSS is the high-water mark of its heap: it steps up the first time a
        larger batch than before runs and never comes down. Left to chance, a
        16k-token Embed (~1 in 100 requests) first arrives after the warm-up
        and reads as growth; sent here, it arrives during it.
        """
        rng = random.Random(self.args.seed * 1000 - number)
        channel = grpc.insecure_channel(self.args.address, options=CHANNEL_OPTIONS)
        stub = self.pb_grpc.DocumentServiceStub(channel)
        threads = [threading.Thread(target=self.send, args=(channel, stub, plan))
                   for plan in planner.largest(rng)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        channel.close()
        self.primed[pid] = time.time() - self.started

    def watch_restarts(self, planner):
        """Starts prime() at every "ready" the driver writes."""
        seen = 0
        while True:
            ready = [e for e in read_events(self.args.events) if e[1] == "ready"]
            for number in range(seen + 1, len(ready) + 1):
                pid = int(ready[number - 1][2].get("pid", 0))
                primer = threading.Thread(target=self.prime, args=(planner, number, pid))
                primer.start()
                self.primers.append(primer)
            seen = len(ready)
            if self.stop.wait(0.5):
                return

    def sample_rss(self):
        while True:
            try:
                with open(self.args.pidfile) as file:
                    fields = file.read().split()
                pid = int(fields[0])
                rss = None
                with open(f"/proc/{pid}/status") as file:
                    for line in file:
                        if line.startswith("VmRSS:"):
                            rss = int(line.split()[1])
                heap = heap_in_use_kib(fields[1]) if len(fields) > 1 else None
                if rss is not None:
                    self.rss.append((time.time() - self.started, pid, rss, heap))
            except (OSError, ValueError):
                pass  # between lifetimes
            if self.stop.wait(RSS_EVERY_S):
                return

    def progress(self):
        while not self.stop.wait(PROGRESS_EVERY_S):
            with self.lock:
                codes = collections.Counter(o.code for o in self.outcomes)
                sent, in_flight = self.sent, self.in_flight
            rss = f", RSS {self.rss[-1][2] / 1024:.0f} MiB" if self.rss else ""
            if self.rss and self.rss[-1][3] is not None:
                rss += f", heap in use {self.rss[-1][3] / 1024:.0f} MiB"
            print(f"soak: {time.time() - self.started:.0f} s: {sent} sent, {in_flight} in "
                  f"flight, {format_counts(codes)}{rss}", flush=True)

    def run(self):
        channel = grpc.insecure_channel(self.args.address, options=CHANNEL_OPTIONS)
        listed = self.pb_grpc.DocumentServiceStub(channel).ListModels(
            self.pb.ListModelsRequest(), timeout=30)
        channel.close()
        models = {m.name: m for m in listed.models if m.ready}
        print(f"soak: {self.args.clients} clients for {self.args.seconds:.0f} s against "
              f"{self.args.address}, models {', '.join(sorted(models))}", flush=True)
        planner = Planner(self.pb, models, Corpus())
        end = time.monotonic() + self.args.seconds
        helpers = [threading.Thread(target=self.sample_rss, daemon=True),
                   threading.Thread(target=self.progress, daemon=True),
                   threading.Thread(target=self.watch_restarts, args=(planner,), daemon=True)]
        clients = [threading.Thread(target=self.client, args=(i, planner, end))
                   for i in range(self.args.clients)]
        for thread in helpers + clients:
            thread.start()
        for thread in clients:
            thread.join()
        self.stop.set()
        for thread in helpers + self.primers:
            thread.join()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--address", required=True)
    parser.add_argument("--stubs", required=True, help="folder of the generated docsparse_pb2")
    parser.add_argument("--seconds", type=float, default=600)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--pidfile", required=True, help="the server's pid, kept by the driver")
    parser.add_argument("--events", required=True, help="the driver's SIGTERM/ready lines")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    sys.path.insert(0, args.stubs)
    from docsparse.v1 import docsparse_pb2 as pb
    from docsparse.v1 import docsparse_pb2_grpc as pb_grpc

    soak = Soak(args, pb, pb_grpc)
    soak.run()
    return report(soak, read_events(args.events))


if __name__ == "__main__":
    sys.exit(main())
