"""The requests of bench/bounded_work/run; prints what each cost."""
import sys
import threading
import time

import grpc

address, stubs = sys.argv[1], sys.argv[2]
sys.path.insert(0, stubs)
from docsparse.v1 import docsparse_pb2 as pb  # noqa: E402
from docsparse.v1 import docsparse_pb2_grpc as pb_grpc  # noqa: E402

channel = grpc.insecure_channel(address, options=[("grpc.max_send_message_length", 64 << 20)])
stub = pb_grpc.DocumentServiceStub(channel)
gpl3 = open("/usr/share/common-licenses/GPL-3", encoding="utf-8").read()
long_document = pb.Document(text="\n\n".join([gpl3] * 8))
tiny = pb.Document(text="Hello.")

whole = stub.Embed(pb.EmbedRequest(document=long_document), timeout=600)
print(f"long Embed run whole: {whole.cost.input_tokens} tokens, "
      f"{whole.cost.timings.inference_ms:.0f} ms inference ({whole.cost.precision} on "
      f"{whole.cost.isa})")

for run in range(1, 4):
    def abandon():
        try:
            stub.Embed(pb.EmbedRequest(document=long_document), timeout=0.6)
        except grpc.RpcError as error:
            abandon.code = error.code().name
    abandon.code = "OK"
    caller = threading.Thread(target=abandon)
    caller.start()
    time.sleep(0.2)
    started = time.time()
    answer = stub.Embed(pb.EmbedRequest(document=tiny), timeout=600)
    wall = (time.time() - started) * 1000
    caller.join()
    print(f"abandoned long Embed ({abandon.code}), run {run}: the next tiny Embed queued "
          f"{answer.cost.timings.queue_ms:.0f} ms ({wall:.0f} ms wall)")

labels = []
for i in range(256):
    label = f"label {i}:"
    while len(label) < 1000:
        label += f" q{len(label) % 97}z"
    labels.append(label)
started = time.time()
try:
    answer = stub.Classify(pb.ClassifyRequest(document=pb.Document(text="Two words."),
                                              labels=labels), timeout=600)
    print(f"256 labels of ~1 KB: OK after {time.time() - started:.2f} s, "
          f"{answer.cost.input_tokens} tokens")
except grpc.RpcError as error:
    print(f"256 labels of ~1 KB: {error.code().name} after "
          f"{(time.time() - started) * 1000:.0f} ms: {error.details()}")

for chunk in range(17):
    fillers = [f"filler topic {chunk}-{i}" for i in range(256)]
    stub.Classify(pb.ClassifyRequest(document=pb.Document(text="Two words."), labels=fillers),
                  timeout=600)
repeated = [f"repeated topic number {i}" for i in range(40)]
for attempt in (1, 2):
    started = time.time()
    answer = stub.Classify(pb.ClassifyRequest(document=pb.Document(text="Two words."),
                                              labels=repeated), timeout=600)
    print(f"40 labels after 4,352 others, call {attempt}: {answer.cost.input_tokens} tokens, "
          f"{(time.time() - started) * 1000:.0f} ms")
