#!/usr/bin/env python3
"""Every query the deployment runs, against a real Prometheus scraping a real server.

Starts docsparse-server on loopback and Debian's Prometheus scraping it every
second with deploy/prometheus/rules.yaml loaded, drives load with the CLI's
load generator (`docsparse bench load`: embed, classify, summarize, a budget no
dense model can meet, a model that does not exist), then evaluates:

  * every PromQL expression of every panel of deploy/grafana/docsparse.json,
    with its template variables substituted as Grafana does, twice: once with
    every variable at "All" and once with the first value each variable's own
    query returns (the variable queries are evaluated too);
  * prometheus-adapter's rules (deploy/prometheus-adapter/values.yaml): each
    seriesQuery through /api/v1/series, each metricsQuery with <<.Series>>,
    <<.LabelMatchers>> and <<.GroupBy>> filled in as the adapter does for an
    HPA asking for the pods it scales;
  * every recording rule's expression, and every alert's (which must parse
    and run; an alert that does not fire has no data).

Each dashboard, adapter and recording-rule query must return at least one
series with a finite value, except the GPU panels' (docsparse_gpu_*, exported
only by a server with --device cuda), which must run without error like the
alerts. The scrape carries the labels a ServiceMonitor
adds in Kubernetes (namespace, pod, service, container), since the adapter's
queries and the dashboard's variables rely on them.

Standard library plus PyYAML (Debian python3-yaml). Run by CTest (deploy_promql).
"""

import argparse
import json
import math
import os
import pathlib
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

import yaml

NAMESPACE = "docsparse"
POD = "docsparse-7d9f8c6b5-x2x4q"
LOAD_SECONDS = 12
SETTLE_TIMEOUT_S = 60
# Grafana's built-in variables, as it would set them for a 1 s scrape
# interval and a 3 h range ($__rate_interval is at least 4 scrape intervals;
# Grafana's default scrape interval is 15 s).
GRAFANA_BUILTINS = {"__rate_interval": "1m", "__interval": "15s", "__range": "3h"}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """docsparse-server on loopback with free ports."""

    def __init__(self, binary, models, log_path):
        self.log = open(log_path, "w+")
        self.process = subprocess.Popen(
            [binary, "--host=127.0.0.1", "--port=0", "--metrics_port=0",
             f"--model_repository={models}", "--threads=2"],
            stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            self.log.seek(0)
            text = self.log.read()
            match = re.search(r"listening grpc=(\S+) http=(\S+)", text)
            if match and "docsparse-server: ready" in text:
                self.grpc, self.http = match.group(1), match.group(2)
                return
            if self.process.poll() is not None:
                break
            time.sleep(0.1)
        self.stop()
        self.log.seek(0)
        raise RuntimeError(f"docsparse-server did not get ready (exit status "
                           f"{self.process.returncode}):\n{self.log.read()}")

    def stop(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


class Prometheus:
    """Debian's Prometheus scraping `target` every second, with `rule_file`."""

    def __init__(self, binary, target, rule_file, workdir):
        config = {
            "global": {"scrape_interval": "1s", "scrape_timeout": "1s",
                       "evaluation_interval": "1s"},
            "rule_files": [str(rule_file)],
            "scrape_configs": [{
                "job_name": "docsparse",
                "static_configs": [{
                    "targets": [target],
                    # What prometheus-operator's ServiceMonitor relabelling adds.
                    "labels": {"namespace": NAMESPACE, "pod": POD, "service": "docsparse",
                               "container": "docsparse", "endpoint": "metrics"},
                }],
            }],
        }
        config_path = pathlib.Path(workdir) / "prometheus.yml"
        config_path.write_text(yaml.safe_dump(config))
        self.port = free_port()
        self.log_path = pathlib.Path(workdir) / "prometheus.log"
        self.log = open(self.log_path, "w")
        self.process = subprocess.Popen(
            [binary, f"--config.file={config_path}",
             f"--storage.tsdb.path={pathlib.Path(workdir) / 'data'}",
             f"--web.listen-address=127.0.0.1:{self.port}"],
            stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                self.get("/-/ready")
                return
            except (OSError, urllib.error.URLError):
                if self.process.poll() is not None:
                    break
                time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"Prometheus did not start:\n{self.log_path.read_text()}")

    def get(self, path, params=None):
        url = f"http://127.0.0.1:{self.port}{path}"
        if params:
            url += "?" + urllib.parse.urlencode(params, doseq=True)
        with urllib.request.urlopen(url, timeout=10) as response:
            body = response.read().decode()
        return json.loads(body) if path.startswith("/api/") else body

    def query(self, promql):
        """(error or None, result list) of an instant query."""
        try:
            body = self.get("/api/v1/query", {"query": promql})
        except urllib.error.HTTPError as error:
            return json.loads(error.read().decode()).get("error", str(error)), []
        if body.get("status") != "success":
            return body.get("error", "failed"), []
        return None, body["data"]["result"]

    def series(self, selector):
        body = self.get("/api/v1/series", {"match[]": selector})
        return body["data"]

    def stop(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def drive_load(cli, server_address):
    """Runs the load generators in parallel; returns once all have finished."""
    # Named model: the dashboard variables take the first value by name
    # ("minilm" before the default "minilm-lsg"), so that is the one loaded.
    common = [cli, "--server", server_address, "--model", "minilm", "--json", "bench", "load",
              "--duration", str(LOAD_SECONDS), "--synthetic-tokens", "256",
              "--synthetic-count", "8", "--deadline_ms", "20000"]
    runs = {
        "embed": ["--task", "embed", "--concurrency", "2"],
        "classify": ["--task", "classify", "--concurrency", "1"],
        "summarize": ["--task", "summarize", "--concurrency", "1"],
        # No plan on the default (LSG) model's knob lattice reaches 1% density
        # on 256 tokens (nor can a dense model): OK answers with
        # budget_met=false, so budget_unmet_total moves.
        "budget": ["--task", "embed", "--concurrency", "1", "--max_density", "0.01"],
        # NOT_FOUND answers, counted under model="unknown".
        "unknown-model": ["--model", "no-such-model", "--task", "embed", "--concurrency", "1",
                          "--rate", "5"],
    }
    processes = {name: subprocess.Popen(common + args, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, text=True)
                 for name, args in runs.items()}
    for name, process in processes.items():
        out, err = process.communicate(timeout=LOAD_SECONDS + 60)
        # The unknown-model run is all errors, so its exit status says nothing.
        report = json.loads(out) if out.strip().startswith("{") else {}
        if name != "unknown-model" and (process.returncode != 0 or not report.get("ok")):
            raise RuntimeError(f"load run {name} failed ({process.returncode}): {out}\n{err}")
        print(f"load {name}: {report.get('requests')} requests, {report.get('ok')} ok")


# --- Queries ----------------------------------------------------------------------

def dashboard_panels(dashboard):
    """Every panel, including those inside collapsed rows."""
    for panel in dashboard["panels"]:
        yield panel
        yield from panel.get("panels", [])


def dashboard_targets(dashboard):
    """(panel title, refId, expr) of every Prometheus query in the dashboard."""
    for panel in dashboard_panels(dashboard):
        for target in panel.get("targets", []):
            if target.get("expr"):
                yield panel["title"], target["refId"], target["expr"]


def label_values_to_promql(query):
    """Grafana's label_values(selector, label) as a PromQL query for its values."""
    match = re.fullmatch(r"\s*label_values\((.*),\s*(\w+)\s*\)\s*", query, re.S)
    if not match:
        raise ValueError(f"unsupported variable query: {query}")
    return f"group by ({match.group(2)}) ({match.group(1)})", match.group(2)


def substitute(expr, values):
    """Replaces $var, ${var} and [[var]] as Grafana does; values are regexes."""
    def value(match):
        name = next(g for g in match.groups() if g)
        if name not in values:
            raise KeyError(f"unknown variable ${name} in {expr}")
        return values[name]
    return re.sub(r"\$\{(\w+)\}|\[\[(\w+)\]\]|\$(\w+)", value, expr)


def adapter_queries(values_path, prometheus):
    """(description, kind, query) for each adapter rule, templated as the adapter does."""
    rules = yaml.safe_load(pathlib.Path(values_path).read_text())["rules"]["custom"]
    queries = []
    for rule in rules:
        series = prometheus.series(rule["seriesQuery"])
        names = sorted({s["__name__"] for s in series})
        pods = sorted({s["pod"] for s in series if s.get("namespace") == NAMESPACE})
        if not names or POD not in pods:
            raise AssertionError(f"seriesQuery {rule['seriesQuery']} found {series}")
        overrides = rule["resources"]["overrides"]
        namespace_label = next(k for k, v in overrides.items() if v["resource"] == "namespace")
        pod_label = next(k for k, v in overrides.items() if v["resource"] == "pod")
        for name in names:
            # The adapter's metricsQuery template fields for "pods in a namespace".
            matchers = f'{namespace_label}="{NAMESPACE}",{pod_label}=~"{"|".join(pods)}"'
            query = (rule["metricsQuery"].replace("<<.Series>>", name)
                     .replace("<<.LabelMatchers>>", matchers)
                     .replace("<<.GroupBy>>", pod_label))
            assert "<<" not in query, f"untemplated field left in {query}"
            published = re.sub(rule["name"]["matches"], rule["name"]["as"].replace("$", "\\"),
                               name)
            queries.append((f"adapter {published}", "adapter", query))
    return queries


def has_finite_value(result):
    for series in result:
        samples = [series["value"]] if "value" in series else series.get("values", [])
        if any(math.isfinite(float(v)) for _, v in samples):
            return True
    return False


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server-binary", required=True)
    parser.add_argument("--cli-binary", required=True)
    parser.add_argument("--model-repository", required=True)
    parser.add_argument("--repo", required=True, type=pathlib.Path)
    parser.add_argument("--prometheus", default="/usr/bin/prometheus")
    args = parser.parse_args()
    started = time.monotonic()
    if not os.access(args.prometheus, os.X_OK):
        sys.exit(f"{args.prometheus} missing: run scripts/setup (Debian package prometheus)")

    repo = args.repo.resolve()
    dashboard = json.loads((repo / "deploy/grafana/docsparse.json").read_text())
    rules_path = repo / "deploy/prometheus/rules.yaml"
    groups = yaml.safe_load(rules_path.read_text())["groups"]
    recorded = [r for g in groups for r in g["rules"] if "record" in r]
    alerts = [r for g in groups for r in g["rules"] if "alert" in r]

    with tempfile.TemporaryDirectory(prefix="docsparse-promql-") as workdir:
        server = Server(args.server_binary, args.model_repository, f"{workdir}/server.log")
        prometheus = None
        try:
            prometheus = Prometheus(args.prometheus, server.http, rules_path, workdir)
            drive_load(args.cli_binary, server.grpc)
            return evaluate_all(prometheus, dashboard, recorded, alerts,
                                repo / "deploy/prometheus-adapter/values.yaml", started)
        finally:
            if prometheus:
                prometheus.stop()
            server.stop()


def evaluate_all(prometheus, dashboard, recorded, alerts, adapter_values, started):
    # Prometheus loaded every rule, healthy.
    loaded = [r for g in prometheus.get("/api/v1/rules")["data"]["groups"] for r in g["rules"]]
    unhealthy = [(r["name"], r.get("lastError")) for r in loaded if r["health"] == "err"]
    assert not unhealthy, f"rules with errors: {unhealthy}"
    assert len(loaded) == len(recorded) + len(alerts), \
        f"Prometheus loaded {len(loaded)} rules, rules.yaml has {len(recorded) + len(alerts)}"

    # Dashboard variables: each query's values, then the expressions with the
    # variables at All and at the first value found.
    variables = [v for v in dashboard["templating"]["list"] if v["type"] == "query"]
    targets = list(dashboard_targets(dashboard))
    wanted = {}  # description -> query; each must return a finite value
    first_values = {}
    deadline = time.monotonic() + SETTLE_TIMEOUT_S
    while True:
        first_values.clear()
        all_values = dict(GRAFANA_BUILTINS, datasource="prometheus")
        all_values.update({v["name"]: ".*" for v in variables})
        concrete = dict(all_values)
        missing_variables = []
        for variable in variables:
            query = variable["query"]["query"] if isinstance(variable["query"], dict) \
                else variable["query"]
            promql, label = label_values_to_promql(substitute(query, concrete))
            error, result = prometheus.query(promql)
            values = sorted(s["metric"][label] for s in result if label in s["metric"])
            wanted[f"variable ${variable['name']}"] = promql
            if error or not values:
                missing_variables.append(variable["name"])
                continue
            # The first value that is not the unknown-model bucket.
            first_values[variable["name"]] = next((v for v in values if v != "unknown"),
                                                  values[0])
            concrete[variable["name"]] = re.escape(first_values[variable["name"]])
        if not missing_variables or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert not missing_variables, f"variables with no values: {missing_variables}"
    gpu_only = {}
    for title, ref, expr in targets:
        into = gpu_only if "docsparse_gpu_" in expr else wanted
        into[f"dashboard '{title}' {ref} [All]"] = substitute(expr, all_values)
        into[f"dashboard '{title}' {ref} {first_values}"] = substitute(expr, concrete)
    for query in adapter_queries(adapter_values, prometheus):
        wanted[query[0]] = query[2]
    for rule in recorded:
        wanted[f"recording rule {rule['record']}"] = rule["expr"]

    # Rates need two scrapes and recording rules an evaluation after them:
    # poll until every query has data, or report the ones that never did.
    pending = dict(wanted)
    errors = {}
    while pending and time.monotonic() < deadline:
        for description, query in list(pending.items()):
            error, result = prometheus.query(query)
            if error:
                errors[description] = f"{error}: {query}"
            elif has_finite_value(result):
                pending.pop(description)
        if pending:
            time.sleep(1)
    for description in sorted(errors):
        if description in pending:
            print(f"FAIL {description}: error {errors[description]}", file=sys.stderr)
    for description, query in sorted(pending.items()):
        if description not in errors:
            print(f"FAIL {description}: no finite value\n  {query}", file=sys.stderr)

    # Alerts, and the GPU panels on this CPU server: each expression must run
    # (no alert is expected to fire here, and no GPU series exists).
    alert_errors = []
    for description, query in sorted(gpu_only.items()):
        error, _ = prometheus.query(query)
        if error:
            alert_errors.append(f"{description} (GPU only): {error}")
    for rule in alerts:
        error, _ = prometheus.query(rule["expr"])
        if error:
            alert_errors.append(f"{rule['alert']}: {error}")
    for message in alert_errors:
        print(f"FAIL alert {message}", file=sys.stderr)

    dashboard_count = sum(1 for d in wanted if d.startswith("dashboard "))
    adapter_count = sum(1 for d in wanted if d.startswith("adapter "))
    # Guards against a vacuous pass: a dashboard or adapter file that lost its
    # queries, or a parser that stopped finding them.
    assert len(targets) >= 30, f"only {len(targets)} dashboard queries found"
    assert dashboard_count + len(gpu_only) == 2 * len(targets), \
        "a dashboard query was not evaluated"
    assert adapter_count >= 2, "prometheus-adapter rules not evaluated"
    assert len(recorded) >= 20, f"only {len(recorded)} recording rules found"
    passed = len(wanted) - len(pending)
    print(f"variables {first_values}")
    print(f"{len(targets)} dashboard queries x 2 substitutions, {len(variables)} variable queries, "
          f"{adapter_count} adapter metricsQueries (+ their seriesQueries), {len(recorded)} "
          f"recording rules: {passed} of {len(wanted)} returned finite data; "
          f"{len(alerts)} alert expressions and {len(gpu_only)} GPU-only panel queries ran, "
          f"{len(alert_errors)} failed; "
          f"{time.monotonic() - started:.1f} s")
    ok = not pending and not alert_errors
    print(f"{passed + len(alerts) + len(gpu_only) - len(alert_errors)} passed, "
          f"{len(pending) + len(alert_errors)} failed")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
