"""Issue 22, beyond one machine: deploy/kubernetes/config.yaml for Zero to JupyterHub loads with
KubeSpawner installed and gives each student's pod what the course needs.

No cluster here: the values are read the way the z2jh chart's own jupyterhub_config.py reads them
(``singleuser.*`` keys onto KubeSpawner traits, ``hub.config`` merged into the configuration,
``hub.extraConfig`` snippets run with ``c`` and ``z2jh.get_config``), a KubeSpawner is made from
the result (mocked, as KubeSpawner's own tests do) and the pod manifest it would send is checked:
the image, limits, environment, security context. The NetworkPolicy is the chart's template: its
values are checked. The image definition is checked against the repo2docker files it is built from.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import re
import sys
import types
from pathlib import Path

import pytest

kubespawner = pytest.importorskip("kubespawner", reason="the k8s extra: pip install -e '.[k8s]'")
yaml = pytest.importorskip("yaml")

from traitlets.config import Config  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
K8S = ROOT / "deploy" / "kubernetes"

# singleuser.KEY -> KubeSpawner trait, as the chart's jupyterhub_config.py maps them (the subset
# config.yaml uses; image, cmd and defaultUrl are handled apart there too).
SINGLEUSER_TRAITS = {
    "uid": "uid", "fsGid": "fs_gid", "memory.limit": "mem_limit", "memory.guarantee": "mem_guarantee",
    "cpu.limit": "cpu_limit", "cpu.guarantee": "cpu_guarantee", "extraEnv": "environment",
    "lifecycleHooks": "lifecycle_hooks", "extraPodConfig": "extra_pod_config", "image.pullPolicy": "image_pull_policy",
    "storage.capacity": "storage_capacity", "cmd": "cmd", "defaultUrl": "default_url",
}


def lookup(values: dict, dotted: str, default=None):
    node = values
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return default
        node = node[part]
    return node


def z2jh_config(values: dict) -> Config:
    """The hub's configuration as z2jh would build it from VALUES."""
    c = Config()
    for section, settings in (lookup(values, "hub.config") or {}).items():
        for trait, value in settings.items():
            setattr(c[section], trait, value)
    for key, trait in SINGLEUSER_TRAITS.items():
        value = lookup(values, "singleuser." + key)
        if value is not None:
            setattr(c.KubeSpawner, trait, value)
    image = lookup(values, "singleuser.image.name")
    if image:
        tag = lookup(values, "singleuser.image.tag")
        c.KubeSpawner.image = f"{image}:{tag}" if tag else image
    fake = types.ModuleType("z2jh")
    fake.get_config = lambda key, default=None: lookup(values, key, default)
    saved = sys.modules.get("z2jh")
    sys.modules["z2jh"] = fake
    try:
        for _, snippet in sorted((lookup(values, "hub.extraConfig") or {}).items()):
            exec(compile(snippet, "hub.extraConfig", "exec"), {"c": c})
    finally:
        if saved is None:
            sys.modules.pop("z2jh", None)
        else:
            sys.modules["z2jh"] = saved
    return c


@pytest.fixture(scope="module")
def values() -> dict:
    return yaml.safe_load((K8S / "config.yaml").read_text())


KUBECONFIG = """apiVersion: v1
kind: Config
clusters: [{name: none, cluster: {server: "https://127.0.0.1:9"}}]
users: [{name: none, user: {token: unused}}]
contexts: [{name: none, context: {cluster: none, user: none}}]
current-context: none
"""


@pytest.fixture(autouse=True)
def no_cluster(tmp_path, monkeypatch):
    """A kube config naming a cluster that is never contacted (KubeSpawner loads one at init)."""
    import kubernetes_asyncio.config.kube_config as kube_config

    (tmp_path / "kubeconfig").write_text(KUBECONFIG)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "kubeconfig"))
    monkeypatch.setattr(kube_config, "KUBE_CONFIG_DEFAULT_LOCATION", str(tmp_path / "kubeconfig"))


def pod_manifest(config: Config):
    """The pod KubeSpawner would create for one student (no cluster: mocked)."""
    from jupyterhub.objects import Hub, Server
    from kubespawner import KubeSpawner

    class Student:
        name = "ana"
        id = 1
        url = "/user/ana/"
        escaped_name = "ana"
        settings = {}
        spawners = {}
        server = Server()

    async def make():  # KubeSpawner's client belongs to a running loop
        spawner = KubeSpawner(config=config, hub=Hub(), user=Student(), api_token="t", oauth_client_id="o",
                              _mock=True)
        return spawner, await spawner.get_pod_manifest()

    # On a thread of its own: an earlier test in the same process may leave an event loop running
    # in this one, where asyncio.run refuses to start (seen in the full suite, not alone).
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, make()).result()


def test_the_config_gives_each_student_a_safe_cancho_pod(values):
    spawner, pod = pod_manifest(z2jh_config(values))
    (container,) = pod.spec.containers
    assert container.image == "registry.example.org/cancho-course:0.1.0"
    assert container.resources.limits == {"cpu": 1.0, "memory": 1 << 30}
    assert container.resources.requests == {"cpu": 0.25, "memory": 512 << 20}
    env = {e.name: e.value for e in container.env}
    assert env["CANCHO_SAFE"] == "1" and env["PYTHONNOUSERSITE"] == "1" and env["PYTHONSAFEPATH"] == "1"
    assert env["CANCHO_HELPER_DIR"] == "/opt/cancho/helpers" and env["CANCHO_SANDBOX"] == "userns"
    assert container.args[:4] == ["python3", "-s", "-m", "jupyterhub.singleuser"]
    args = " ".join(container.args)
    for setting in ("--KernelSpecManager.allowed_kernelspecs=cancho", "--ServerApp.terminals_enabled=False",
                    "cancho_singleuser.CourseKernelSpecManager", "--ContentsManager.allow_hidden=False"):
        assert setting in args
    sc = container.security_context  # KubeSpawner passes container_security_context on as given
    assert sc["runAsNonRoot"] is True and sc["runAsUser"] == 1000
    assert sc["allowPrivilegeEscalation"] is False and sc["capabilities"] == {"drop": ["ALL"]}
    assert not sc.get("privileged")
    assert sc["seccompProfile"] == {"type": "Unconfined"}  # bubblewrap's user namespaces (docs/teaching.md)
    assert spawner.disable_user_config is True and spawner.default_url == "/lab"


def test_where_the_cluster_allows_no_user_namespaces_the_pod_keeps_the_runtimes_seccomp(values):
    values = {**values, "custom": {"cancho": {"sandbox": "none"}}}
    _, pod = pod_manifest(z2jh_config(values))
    sc = pod.spec.containers[0].security_context
    assert sc["seccompProfile"] == {"type": "RuntimeDefault"} and sc["capabilities"] == {"drop": ["ALL"]}
    assert "appArmorProfile" not in sc
    assert {e.name: e.value for e in pod.spec.containers[0].env}["CANCHO_SANDBOX"] == "none"
    with pytest.raises(ValueError, match="custom.cancho.sandbox"):
        z2jh_config({**values, "custom": {"cancho": {"sandbox": "sys-admin"}}})


def test_the_network_policy_denies_pod_to_pod_and_egress_but_dns(values):
    policy = values["singleuser"]["networkPolicy"]
    assert policy["enabled"] is True
    assert policy["ingress"] == [] and policy["egress"] == [] and policy["allowedIngressPorts"] == []
    rules = policy["egressAllowRules"]
    assert rules["privateIPs"] is False and rules["nonPrivateIPs"] is False and rules["cloudMetadataServer"] is False
    assert rules["dnsPortsKubeSystemNamespace"] and rules["dnsPortsPrivateIPs"]
    assert policy["interNamespaceAccessLabels"] == "ignore"


def test_the_image_is_built_from_the_repo2docker_files():
    docker = (K8S / "Dockerfile").read_text()
    runtime = (ROOT / "runtime.txt").read_text().strip()
    assert runtime.startswith("python-")
    assert f"ARG PYTHON={runtime.removeprefix('python-')}" in docker
    assert re.search(r"^FROM python:\$\{PYTHON\}", docker, re.M)
    assert "COPY apt.txt" in docker and "bash postBuild" in docker
    apt = (ROOT / "apt.txt").read_text().split()
    assert {"gcc", "libc6-dev", "bubblewrap"} <= set(apt)
    assert re.search(r"^USER 1000$", docker, re.M)  # never root in the student's pod
    assert 'CMD ["python3", "-s", "-m", "jupyterhub.singleuser"]' in docker
    assert "chelper --build /opt/cancho/helpers" in docker and "chmod -R go-w /opt/cancho" in docker
