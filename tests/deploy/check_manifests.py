#!/usr/bin/env python3
"""Cross-checks docsparse's deployment files, beyond what each tool sees alone.

kubernetes-validate checks each object against the Kubernetes schema; promtool
checks the rule file; checkov and hadolint check security practice. None of
them notices that a ServiceMonitor selects no Service, that the HPA asks for a
metric prometheus-adapter does not publish, or that the PrometheusRule has
drifted from rules.yaml. This does, on the overlays as kustomize rendered them:

  check_manifests.py --repo ROOT RENDERED.yaml...   check (exit 1 on a problem)
  check_manifests.py --repo ROOT --write-prometheusrule
                                                    regenerate the PrometheusRule

Run by scripts/lint-deploy. Needs PyYAML only (Debian python3-yaml).
"""

import argparse
import pathlib
import re
import sys

import yaml

PROMETHEUSRULE = "deploy/k8s/base/prometheusrule.yaml"
RULES = "deploy/prometheus/rules.yaml"
ADAPTER_VALUES = "deploy/prometheus-adapter/values.yaml"
SERVER_PORTS = {"grpc": 50051, "metrics": 9090}  # server_main.cc's defaults

PROMETHEUSRULE_HEADER = """\
# GENERATED from deploy/prometheus/rules.yaml by
#   scripts/lint-deploy --write-prometheusrule
# Do not edit: change rules.yaml (where the comments are) and regenerate;
# scripts/lint-deploy fails while the two differ.
#
# The same rules for prometheus-operator. kube-prometheus-stack's Prometheus
# selects PrometheusRules by its Helm release label, as for the ServiceMonitor.
"""


class _BlockStyleDumper(yaml.SafeDumper):
    """Writes multi-line strings (PromQL, descriptions) as | blocks."""


def _represent_str(dumper, value):
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_BlockStyleDumper.add_representer(str, _represent_str)


def prometheusrule_text(repo):
    groups = yaml.safe_load((repo / RULES).read_text())["groups"]
    rule = {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {
            "name": "docsparse",
            "labels": {
                "app.kubernetes.io/name": "docsparse",
                "release": "kube-prometheus-stack",
            },
        },
        "spec": {"groups": groups},
    }
    body = yaml.dump(rule, Dumper=_BlockStyleDumper, sort_keys=False, width=100)
    return PROMETHEUSRULE_HEADER + body


class Checker:
    def __init__(self):
        self.problems = []
        self.checks = 0

    def expect(self, condition, message):
        self.checks += 1
        if not condition:
            self.problems.append(message)
        return condition


def load_objects(path):
    return [doc for doc in yaml.safe_load_all(pathlib.Path(path).read_text()) if doc]


def by_kind(objects, kind):
    return [o for o in objects if o.get("kind") == kind]


def selects(selector, labels):
    """True when a label selector (matchLabels / matchExpressions) matches."""
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expression in selector.get("matchExpressions") or []:
        key, operator = expression["key"], expression["operator"]
        values = expression.get("values") or []
        if operator == "In" and labels.get(key) not in values:
            return False
        if operator == "NotIn" and labels.get(key) in values:
            return False
        if operator == "Exists" and key not in labels:
            return False
        if operator == "DoesNotExist" and key in labels:
            return False
    return True


def adapter_metric_names(repo):
    """The custom-metric names prometheus-adapter publishes, from its rules."""
    names = set()
    for rule in yaml.safe_load((repo / ADAPTER_VALUES).read_text())["rules"]["custom"]:
        series = re.match(r"\s*([a-zA-Z_:][a-zA-Z0-9_:]*)", rule["seriesQuery"]).group(1)
        names.add(re.sub(rule["name"]["matches"], rule["name"]["as"].replace("$", "\\"), series))
    return names


def check_rendered(path, repo, check):
    """Checks one rendered overlay."""
    objects = load_objects(path)
    name = pathlib.Path(path).name
    deployments = by_kind(objects, "Deployment")
    if not check.expect(len(deployments) == 1, f"{name}: want one Deployment"):
        return
    deployment = deployments[0]
    pod = deployment["spec"]["template"]
    pod_labels = pod["metadata"]["labels"]
    check.expect(selects(deployment["spec"]["selector"], pod_labels),
                 f"{name}: the Deployment's selector does not match its pods")
    check.expect("replicas" not in deployment["spec"],
                 f"{name}: the Deployment sets replicas; the HPA owns the count")
    container = pod["spec"]["containers"][0]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    check.expect(ports == SERVER_PORTS, f"{name}: container ports {ports}, want {SERVER_PORTS}")
    args = container.get("args", [])
    for flag, port in (("--port", ports.get("grpc")), ("--metrics_port", ports.get("metrics"))):
        check.expect(f"{flag}={port}" in args, f"{name}: {flag}={port} missing from args {args}")
    check.expect("--model_repository=/models" in args, f"{name}: --model_repository=/models")
    mounts = {m["mountPath"]: m for m in container.get("volumeMounts", [])}
    check.expect(mounts.get("/models", {}).get("readOnly") is True,
                 f"{name}: /models must be mounted read-only")
    check.expect(re.search(r":\d[\w.]*-(cpu|cuda)$", container["image"]) is not None,
                 f"{name}: image {container['image']} has no -cpu/-cuda release tag")
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        grpc = container.get(probe, {}).get("grpc")
        check.expect(grpc is not None and grpc.get("port") == ports.get("grpc"),
                     f"{name}: {probe} must be a grpc.health.v1 probe on the gRPC port")
    startup = container.get("startupProbe", {})
    budget = startup.get("periodSeconds", 10) * startup.get("failureThreshold", 3)
    check.expect(budget >= 600, f"{name}: startupProbe allows {budget} s for model load, want >= 600")
    liveness = container.get("livenessProbe", {})
    drain = pod["spec"].get("terminationGracePeriodSeconds", 30)
    check.expect(liveness.get("periodSeconds", 10) * liveness.get("failureThreshold", 3) >= drain,
                 f"{name}: the liveness probe could kill a draining pod before its grace period")

    services = by_kind(objects, "Service")
    check.expect(len(services) == 2, f"{name}: want a ClusterIP and a headless Service")
    headless = [s for s in services if s["spec"].get("clusterIP") == "None"]
    check.expect(len(headless) == 1, f"{name}: want exactly one headless Service")
    for service in services:
        service_name = service["metadata"]["name"]
        check.expect(selects({"matchLabels": service["spec"]["selector"]}, pod_labels),
                     f"{name}: Service {service_name} selects no docsparse pod")
        for port in service["spec"]["ports"]:
            check.expect(port["targetPort"] in ports,
                         f"{name}: Service {service_name} targets unknown port {port['targetPort']}")

    monitors = by_kind(objects, "ServiceMonitor")
    if check.expect(len(monitors) == 1, f"{name}: want one ServiceMonitor"):
        monitor = monitors[0]["spec"]
        scraped = [s for s in services if selects(monitor["selector"], s["metadata"]["labels"])]
        check.expect(len(scraped) == 1 and scraped[0]["spec"].get("clusterIP") != "None",
                     f"{name}: the ServiceMonitor must select the ClusterIP Service only "
                     f"(selects {[s['metadata']['name'] for s in scraped]})")
        for endpoint in monitor["endpoints"]:
            check.expect(any(p["name"] == endpoint["port"] for s in scraped
                             for p in s["spec"]["ports"]),
                         f"{name}: ServiceMonitor port {endpoint['port']} is not on the Service")
        check.expect(monitor.get("jobLabel") in pod_labels or any(
            monitor.get("jobLabel") in s["metadata"]["labels"] for s in scraped),
            f"{name}: ServiceMonitor jobLabel names no Service label")

    for kind in ("PodDisruptionBudget", "NetworkPolicy"):
        for obj in by_kind(objects, kind):
            selector = obj["spec"].get("selector") or obj["spec"].get("podSelector")
            check.expect(selects(selector, pod_labels), f"{name}: {kind} selects no docsparse pod")

    hpas = by_kind(objects, "HorizontalPodAutoscaler")
    if check.expect(len(hpas) == 1, f"{name}: want one HorizontalPodAutoscaler"):
        hpa = hpas[0]["spec"]
        target = hpa["scaleTargetRef"]
        check.expect(target["kind"] == "Deployment"
                     and target["name"] == deployment["metadata"]["name"],
                     f"{name}: the HPA scales {target}, not the Deployment")
        published = adapter_metric_names(repo)
        wanted = {m["pods"]["metric"]["name"] for m in hpa["metrics"] if m["type"] == "Pods"}
        check.expect(wanted and wanted <= published,
                     f"{name}: the HPA reads {sorted(wanted)}; prometheus-adapter publishes "
                     f"{sorted(published)}")
        check.expect(1 <= hpa["minReplicas"] <= hpa["maxReplicas"], f"{name}: HPA replica bounds")

    claims = {c["metadata"]["name"] for c in by_kind(objects, "PersistentVolumeClaim")}
    for volume in pod["spec"].get("volumes", []):
        claim = volume.get("persistentVolumeClaim", {}).get("claimName")
        if claim:
            check.expect(claim in claims, f"{name}: volume claim {claim} is not in the overlay")

    rules = by_kind(objects, "PrometheusRule")
    if check.expect(len(rules) == 1, f"{name}: want one PrometheusRule"):
        source = yaml.safe_load((repo / RULES).read_text())["groups"]
        check.expect(rules[0]["spec"]["groups"] == source,
                     f"{name}: the PrometheusRule differs from {RULES}; run "
                     "scripts/lint-deploy --write-prometheusrule")
    namespaces = {o["metadata"].get("namespace") for o in objects}
    check.expect(namespaces == {"docsparse"}, f"{name}: objects in namespaces {namespaces}")


def check_skips_justified(repo, check):
    """Every checkov skip and hadolint ignore says why."""
    for path in sorted((repo / "deploy").rglob("*.yaml")):
        for line in path.read_text().splitlines():
            match = re.search(r"checkov\.io/skip\d+:\s*(CKV\w*)=?(.*)", line)
            if match:
                check.expect(len(match.group(2).strip()) >= 10,
                             f"{path.relative_to(repo)}: checkov skip {match.group(1)} "
                             "gives no reason")
    lines = (repo / "Dockerfile").read_text().splitlines()
    for number, line in enumerate(lines):
        match = re.search(r"checkov:skip=(CKV\w*):?(.*)", line)
        if match:
            check.expect(len(match.group(2).strip()) >= 10,
                         f"Dockerfile:{number + 1}: checkov skip {match.group(1)} gives no reason")
        if re.match(r"\s*# hadolint ignore=", line):
            # The reason is the comment line right above.
            above = lines[number - 1].strip() if number else ""
            check.expect(above.startswith("#") and "hadolint" not in above and len(above) > 12,
                         f"Dockerfile:{number + 1}: hadolint ignore without a reason above it")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", type=pathlib.Path, required=True)
    parser.add_argument("--write-prometheusrule", action="store_true")
    parser.add_argument("rendered", nargs="*")
    args = parser.parse_args()
    repo = args.repo.resolve()

    if args.write_prometheusrule:
        (repo / PROMETHEUSRULE).write_text(prometheusrule_text(repo))
        print(f"check_manifests: wrote {PROMETHEUSRULE}")
        return 0

    check = Checker()
    check.expect(bool(args.rendered), "no rendered overlay given")
    for path in args.rendered:
        check_rendered(path, repo, check)
    check.expect((repo / PROMETHEUSRULE).read_text() == prometheusrule_text(repo),
                 f"{PROMETHEUSRULE} is not what rules.yaml generates; run "
                 "scripts/lint-deploy --write-prometheusrule")
    check_skips_justified(repo, check)
    for problem in check.problems:
        print(f"check_manifests: {problem}", file=sys.stderr)
    print(f"check_manifests: {check.checks} checks on {len(args.rendered)} rendered files, "
          f"{len(check.problems)} problems")
    return 1 if check.problems else 0


if __name__ == "__main__":
    sys.exit(main())
