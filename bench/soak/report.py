"""The report of bench/soak/run: the outcomes of soak.py's requests, judged.

A request may get the codes it expects (soak.py's Planner says which), plus
DEADLINE_EXCEEDED when it had a deadline, CANCELLED when its client
cancelled it, and UNAVAILABLE or CANCELLED when it overlapped a restart.
"""
import collections
import math
import os
import statistics
import time

# Outside [SIGTERM, ready + this], UNAVAILABLE is not expected: the channels
# reconnect within their 1 s backoff once the server listens again.
RESTART_SLACK_S = 3
RSS_EVERY_S = 5
# The first part of each server lifetime whose memory is not judged: the
# allocator's pools and the label caches fill while the request mix is new.
WARM_UP_FRACTION = 0.2
# Growth allowed in the server's heap in use, less its label caches (read
# from /metrics: docsparse_heap_in_use_bytes - docsparse_label_cache_bytes),
# from the first third of a lifetime's judged samples to the last. RSS is not
# judged: the heap is never trimmed (common/cpu_runtime.h), so RSS is the
# high-water mark of the largest working set so far and steps up whenever a
# larger batch than before runs (+7% in a 600 s soak with no leak). The heap
# in use falls back when requests end, so a leak raises its floor: compared
# are the 10th percentiles of the thirds (the server at its least busy), not
# medians, which follow how busy it was. 5% of the ~450 MiB floor of the three
# MiniLM models is ~22 MiB: a leak of 100 KiB a request crosses it once ~230
# requests pass between the thirds.
HEAP_GROWTH_LIMIT = 0.05
# An invalid status for a valid request: the proto says INTERNAL is a bug.
NEVER_VALID = {"INTERNAL", "UNKNOWN"}


def format_counts(counter):
    return ", ".join(f"{code} {n}" for code, n in counter.most_common()) or "none"


def percentile(values, fraction):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(fraction * len(ordered)) - 1))]


def read_events(path):
    """[(epoch, word, {key: value})] from the driver."""
    events = []
    if os.path.exists(path):
        with open(path) as file:
            for line in file:
                parts = line.split()
                if len(parts) >= 2:
                    fields = dict(p.split("=", 1) for p in parts[2:] if "=" in p)
                    events.append((float(parts[0]), parts[1], fields))
    return events


def restart_windows(events, end):
    """[(from, to)]: from a SIGTERM (or a death) to the next ready, plus slack."""
    windows, opened = [], None
    for when, word, _ in events:
        if word in ("sigterm", "died") and opened is None:
            opened = when
        elif word == "ready" and opened is not None:
            windows.append((opened, when + RESTART_SLACK_S))
            opened = None
    if opened is not None:
        windows.append((opened, end + RESTART_SLACK_S))
    return windows


def allowed_codes(outcome, windows):
    allowed = set(outcome.expected)
    if outcome.deadline_class != "none":
        allowed.add("DEADLINE_EXCEEDED")
    if outcome.cancelled:
        allowed.add("CANCELLED")
    if any(outcome.start <= to and outcome.end >= since for since, to in windows):
        # Refused while draining or down; or cancelled when the grace ran out.
        allowed |= {"UNAVAILABLE", "CANCELLED"}
    return allowed


def memory_verdict(soak, events):
    """Prints the memory table and verdict per server lifetime.

    Returns "flat", "growing", or "not judged" when no lifetime had samples
    enough after its warm-up (a short soak, or a slow machine).

    Judged: the heap in use less the label caches (HEAP_GROWTH_LIMIT says
    why not RSS), over a lifetime's samples after its warm-up (the first
    WARM_UP_FRACTION of it, and at least until its warm-up requests are
    answered) and before its SIGTERM (a drain finishes batches, it is not
    steady state).
    """
    lifetimes = collections.OrderedDict()
    for when, pid, rss, heap in soak.rss:
        lifetimes.setdefault(pid, []).append((when, rss, heap))
    sigterm = {int(f["pid"]): when - soak.started for when, word, f in events
               if word == "sigterm" and "pid" in f}
    judged_any, flat = False, True
    print(f"\nmemory (every {RSS_EVERY_S} s; a row per ~1/12 of each lifetime; heap: in use "
          "less the label caches, from /metrics)")
    print(f"  {'t (s)':>7}  {'server pid':>10}  {'RSS MiB':>8}  {'heap MiB':>8}")
    for pid, samples in lifetimes.items():
        step = max(1, math.ceil(len(samples) / 12))
        shown = samples[::step] + ([samples[-1]] if (len(samples) - 1) % step else [])
        for when, rss, heap in shown:
            heap_text = f"{heap / 1024:8.1f}" if heap is not None else f"{'-':>8}"
            print(f"  {when:7.0f}  {pid:>10}  {rss / 1024:8.1f}  {heap_text}")
    for number, (pid, samples) in enumerate(lifetimes.items(), 1):
        first = samples[0][0]
        until = sigterm.get(pid, samples[-1][0])
        since = max(first + WARM_UP_FRACTION * (until - first), soak.primed.get(pid, first))
        judged = [heap for when, _, heap in samples if since <= when <= until and heap is not None]
        peak = max(rss for _, rss, _ in samples) / 1024
        name = f"lifetime {number} (pid {pid})"
        if len(judged) < 6:
            print(f"  {name}: {len(judged)} heap samples after warm-up, too few to judge "
                  f"(RSS peak {peak:.0f} MiB)")
            continue
        judged_any = True
        third = len(judged) // 3
        early = percentile(judged[:third], 0.1)
        late = percentile(judged[-third:], 0.1)
        growth = (late - early) / early
        verdict = "flat" if growth < HEAP_GROWTH_LIMIT else "GROWING"
        flat = flat and growth < HEAP_GROWTH_LIMIT
        print(f"  {name}: judged {since:.0f}-{until:.0f} s ({len(judged)} samples): heap floor "
              f"(10th percentile) of the first third {early / 1024:.1f} MiB, of the last third "
              f"{late / 1024:.1f} MiB: {growth:+.1%} (limit +{HEAP_GROWTH_LIMIT:.0%}) -> "
              f"{verdict}; RSS peak {peak:.0f} MiB")
    if not judged_any:
        return "not judged"
    return "flat" if flat else "growing"


def percentile(values, fraction):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def report(soak, events):
    outcomes = soak.outcomes
    end = max((o.end for o in outcomes), default=time.time())
    windows = restart_windows(events, end)
    failures = []
    print(f"\n=== soak report: {soak.args.clients} clients, {soak.args.seconds:.0f} s ===")
    codes = collections.Counter(o.code for o in outcomes)
    lost = codes.get("LOST", 0)
    print(f"requests sent {soak.sent}, answered {soak.sent - lost}, lost {lost}")
    print(f"by status: {format_counts(codes)}")

    methods = sorted({o.method for o in outcomes})
    all_codes = [code for code, _ in codes.most_common()]
    print("\nby method")
    width = max(len(m) for m in methods) if methods else 6
    print(f"  {'method':<{width}}  " + "  ".join(f"{c:>{max(len(c), 5)}}" for c in all_codes))
    for method in methods:
        counts = collections.Counter(o.code for o in outcomes if o.method == method)
        print(f"  {method:<{width}}  " +
              "  ".join(f"{counts.get(c, 0):>{max(len(c), 5)}}" for c in all_codes))

    print("\nlatency of OK requests (ms)")
    for method in methods:
        ok = [o.latency_s * 1000 for o in outcomes if o.method == method and o.code == "OK"]
        if ok:
            print(f"  {method:<{width}}  n {len(ok):5d}  p50 {percentile(ok, 0.5):8.1f}  "
                  f"p99 {percentile(ok, 0.99):8.1f}  max {max(ok):8.1f}")

    print("\nslowest answers")
    for o in sorted(outcomes, key=lambda o: -o.latency_s)[:5]:
        print(f"  {o.latency_s:6.1f} s  {o.method} [{o.kind}] {o.size} -> {o.code}")
    print()
    for deadline in ("none", "60 s", "short"):
        counts = collections.Counter(o.code for o in outcomes
                                     if not o.malformed and o.deadline_class == deadline)
        print(f"valid requests with deadline {deadline}: {format_counts(counts)}")
    print(f"cancelled by the client (cancel() took effect): "
          f"{sum(o.cancelled for o in outcomes)}")

    malformed = [o for o in outcomes if o.malformed]
    wrong = [o for o in malformed if o.code not in allowed_codes(o, windows)]
    print(f"\nmalformed requests: {len(malformed)}, answered correctly "
          f"{len(malformed) - len(wrong)}, wrongly {len(wrong)}")
    describe(wrong)
    if wrong:
        unimplemented = sum(o.code == "UNIMPLEMENTED" for o in wrong)
        failures.append(f"{len(wrong)} malformed requests answered wrongly"
                        f" ({unimplemented} UNIMPLEMENTED)")

    valid = [o for o in outcomes if not o.malformed and o.code != "LOST"]
    unexpected = [o for o in valid if o.code not in allowed_codes(o, windows)]
    never = [o for o in unexpected if o.code in NEVER_VALID]
    print(f"valid requests: {len(valid)}, answered a code they could not expect "
          f"{len(unexpected)} (INTERNAL or UNKNOWN: {len(never)})")
    describe(unexpected)
    if unexpected:
        failures.append(f"{len(unexpected)} valid requests answered unexpectedly "
                        f"({len(never)} INTERNAL/UNKNOWN)")
    if lost:
        failures.append(f"{lost} requests lost")
        print(f"lost requests: {lost}")
        describe([o for o in outcomes if o.code == "LOST"])

    print("\nrestarts")
    for when, word, fields in events:
        stamp = f"{when - soak.started:7.1f} s"
        if word == "sigterm":
            in_flight = collections.Counter(o.code for o in outcomes if o.start < when < o.end)
            print(f"  {stamp}  SIGTERM to pid {fields.get('pid')}; the requests in flight then "
                  f"got {format_counts(in_flight)}")
        elif word == "exited":
            print(f"  {stamp}  exited with {fields.get('rc')} after {fields.get('drain_s')} s "
                  f"({fields.get('how', '').replace('_', ' ')})")
        elif word == "ready":
            print(f"  {stamp}  pid {fields.get('pid')} ready ({fields.get('start_s')} s "
                  f"after start)")
        elif word == "died":
            print(f"  {stamp}  pid {fields.get('pid')} DIED with {fields.get('rc')}")
    for since, to in windows:
        during = collections.Counter(
            o.code for o in outcomes if o.start <= to and o.end >= since)
        print(f"  requests overlapping {since - soak.started:.1f}-{to - soak.started:.1f} s: "
              f"{format_counts(during)}")

    memory = memory_verdict(soak, events)
    if memory == "growing":
        failures.append("server memory grew after warm-up")
    print()
    if failures:
        print("soak: FAIL: " + "; ".join(failures))
        return 1
    print("soak: PASS (nothing lost, every malformed request refused as expected, no valid "
          f"request answered unexpectedly, memory {memory})")
    return 0


def describe(outcomes, limit=12):
    groups = collections.Counter((o.method, o.kind, o.code) for o in outcomes)
    example = {}
    for o in outcomes:
        example.setdefault((o.method, o.kind, o.code), o)
    for key, n in groups.most_common(limit):
        o = example[key]
        print(f"    {n:4d} x {o.method} [{o.kind}] ({o.size}) deadline {o.deadline_class}"
              f"{' cancelled' if o.cancelled else ''} -> {o.code} after "
              f"{o.latency_s * 1000:.0f} ms: {o.details[:200]!r}")
