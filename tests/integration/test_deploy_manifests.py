"""The deployment files: Kubernetes manifests valid against the API schemas (kubernetes-validate,
strict), with the probes, grace period and bind directory the agents need; their settings and the
compose file's commands accepted by gpualloc's own settings and argument parser."""

from __future__ import annotations

import shlex
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from gpualloc.agent.cli import build_parser
from gpualloc.schemas.events import PoolConfigured
from gpualloc.schemas.settings import load_settings

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
MANIFESTS = sorted((DEPLOY / "kubernetes").glob("*.yaml"))
K8S_VERSION = "1.30.0"  # the oldest Kubernetes the manifests promise to work with


def documents() -> list[dict]:
    return [doc for path in MANIFESTS for doc in yaml.safe_load_all(path.read_text()) if doc]


def of_kind(kind: str) -> list[dict]:
    return [d for d in documents() if d["kind"] == kind]


@pytest.mark.parametrize("version", [K8S_VERSION, kubernetes_validate.latest_version()])
def test_every_manifest_is_valid_against_the_api_schemas(version):
    docs = documents()
    assert {d["kind"] for d in docs} >= {"Deployment", "DaemonSet", "ConfigMap", "Secret", "Service"}
    for doc in docs:
        kubernetes_validate.validate(doc, version, strict=True)  # raises ValidationError naming the field


def test_a_broken_manifest_is_caught():
    (deployment,) = of_kind("Deployment")
    broken = {**deployment, "spec": {**deployment["spec"], "replicas": "one"}}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, K8S_VERSION, strict=True)


def _settings_env(monkeypatch) -> None:
    """The ConfigMap's and Secret's variables in the environment, as the pods get them."""
    for kind in ("ConfigMap", "Secret"):
        for doc in of_kind(kind):
            for name, value in {**(doc.get("data") or {}), **(doc.get("stringData") or {})}.items():
                if name.isupper():
                    monkeypatch.setenv(name, str(value))


def test_the_agent_deployment_has_its_probes_grace_and_settings(monkeypatch):
    (deployment,) = of_kind("Deployment")
    pod = deployment["spec"]["template"]["spec"]
    (agent,) = pod["containers"]
    assert agent["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert agent["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert pod["terminationGracePeriodSeconds"] >= 30 and deployment["spec"]["strategy"]["type"] == "Recreate"
    args = build_parser().parse_args(agent["args"])
    assert (
        args.command == "agent"
        and int(args.__dict__["setting:agent.metrics_port"]) == agent["ports"][0]["containerPort"]
    )
    _settings_env(monkeypatch)
    settings = load_settings({}, None)
    assert settings.bootstrap and settings.log.format == "json"
    (config,) = of_kind("ConfigMap")
    PoolConfigured.model_validate(yaml.safe_load(config["data"]["pool.json"]))


def test_the_node_agent_daemonset_learns_its_node_and_binds_on_the_host():
    (daemonset,) = of_kind("DaemonSet")
    pod = daemonset["spec"]["template"]["spec"]
    (init,) = pod["initContainers"]
    assert {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}} in init["env"]
    (agent,) = pod["containers"]
    command = shlex.split(
        agent["args"][0].split("exec ", 1)[1].replace('"$NODE_INDEX"', "1").replace('"$NODE_GPUS"', "8-15")
    )
    args = build_parser().parse_args(command[1:])
    assert args.command == "node-agent" and args.node == 1 and args.bind_dir == "/var/lib/gpualloc/bind"
    host = {v["name"]: v for v in pod["volumes"]}["bind"]["hostPath"]["path"]
    assert host == "/var/lib/gpualloc/bind"
    (config,) = of_kind("ConfigMap")
    compile(config["data"]["node-labels.py"], "node-labels.py", "exec")  # the init container's script
    rules = of_kind("ClusterRole")[0]["rules"]
    assert rules == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}]


def test_the_compose_services_run_commands_gpualloc_accepts():
    compose = yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())
    services = compose["services"]
    assert services["kafka"]["image"] == "${KAFKA_IMAGE:-apache/kafka:4.1.2}"
    assert set(services) == {"kafka", "agent", "node-0", "node-1", "publisher"}
    for name in ("agent", "node-0", "node-1"):
        command = [part.replace("${STEP_SECONDS:-1}", "1") for part in services[name]["command"]]
        args = build_parser().parse_args(command)
        assert args.command == name.split("-")[0].replace("node", "node-agent")
        assert services[name]["image"] == "${GPUALLOC_IMAGE:-gpualloc:latest}"
