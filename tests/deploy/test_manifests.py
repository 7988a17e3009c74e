"""The Kubernetes manifests (deploy/kustomize/) and the systemd units (deploy/systemd/).

Each overlay is rendered by the real ``kubectl kustomize`` (no cluster needed), as a site would render it: from a
copy of deploy/kustomize with its secret files made from the committed examples. The objects the issue lists must
be there with resource limits, probes and a locked-down security context; every rendered object must pass
``kubernetes-validate --strict`` (the command-line tool, on the rendered file); the commands the containers run
must exist and accept their arguments; the settings the ConfigMap and Secret provide must start production
Django and pass ``manage.py check --deploy``; the air-gapped overlay must point at nothing outside the site.
The systemd units are checked by ``systemd-analyze verify`` and for the keys the issue asks for.
"""

from __future__ import annotations

import configparser
import copy
import os
import re
import secrets
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlparse

import pytest
import yaml

from tests.deploy.test_dockerfiles import REPO, command_problems

KUSTOMIZE = REPO / "deploy" / "kustomize"
SYSTEMD = REPO / "deploy" / "systemd"
KUBECTL = "/usr/bin/kubectl"
KUBERNETES_VALIDATE = Path(sys.executable).with_name("kubernetes-validate")
# The version the fake API server and the executor's manifests are checked against, and the newest one
# kubernetes-validate knows (sites run anything in between).
KUBERNETES_VERSIONS = ("1.30", "1.37")
OVERLAYS = ("single-cluster", "air-gapped")
PORTAL_NAMESPACE, AGENT_NAMESPACE = "gpuportal", "gpuportal-agents"
WORKLOADS = ("Deployment", "DaemonSet", "Job")
SECRET_FILES = ("secret.env", "agent-tokens.env", "migrate-secret.env")


def _clean_env(**extra) -> dict:
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": extra.pop("HOME", "/tmp"), **extra}


def render(tree: Path, overlay: str) -> str:
    if not (os.path.isfile(KUBECTL) and os.access(KUBECTL, os.X_OK)):
        pytest.fail(f"{KUBECTL} is missing: the manifests are rendered by the real kubectl kustomize")
    done = subprocess.run([KUBECTL, "kustomize", str(tree / "overlays" / overlay)], capture_output=True, text=True,
                          timeout=60, env=_clean_env(HOME=str(tree.parent)), check=False)
    assert done.returncode == 0, f"kubectl kustomize {overlay} failed:\n{done.stderr}"
    return done.stdout


def site_tree(tmp: Path) -> Path:
    """deploy/kustomize as a site has it: the examples copied to each overlay's secret files."""
    tree = tmp / "kustomize"
    shutil.copytree(KUSTOMIZE, tree)
    for overlay in OVERLAYS:
        for name in SECRET_FILES:
            shutil.copy(tree / f"{name}.example", tree / "overlays" / overlay / name)
    return tree


@pytest.fixture(scope="module")
def rendered(tmp_path_factory) -> dict[str, tuple[str, list[dict]]]:
    """overlay -> (the rendered text, its objects)."""
    tree = site_tree(tmp_path_factory.mktemp("site"))
    out = {}
    for overlay in OVERLAYS:
        text = render(tree, overlay)
        out[overlay] = (text, [d for d in yaml.safe_load_all(text) if d])
    return out


def by_kind(objects: list[dict], kind: str) -> dict[str, dict]:
    return {o["metadata"]["name"]: o for o in objects if o["kind"] == kind}


def generated(objects: list[dict], kind: str, name: str) -> dict:
    """A generated ConfigMap or Secret (kustomize adds a hash to its name)."""
    [found] = [o for o in objects
               if o["kind"] == kind and re.fullmatch(rf"{name}-[a-z0-9]{{10}}", o["metadata"]["name"])]
    return found


def pod_spec(workload: dict) -> dict:
    return workload["spec"]["template"]["spec"]


def all_containers(spec: dict) -> list[dict]:
    """The init containers (the migration Job's first step) and the containers."""
    return [*spec.get("initContainers", []), *spec["containers"]]


def workloads(objects: list[dict]) -> list[dict]:
    return [o for o in objects if o["kind"] in WORKLOADS]


def container_port(container: dict, port) -> int:
    if isinstance(port, int):
        return port
    return next(p["containerPort"] for p in container.get("ports", []) if p.get("name") == port)


# --- what is there ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_each_overlay_renders_every_object_the_issue_lists(rendered, overlay):
    _text, objects = rendered[overlay]
    deployments = by_kind(objects, "Deployment")
    assert set(deployments) == {"gpuportal-portal", "gpuportal-worker", "gpuportal-worker-agents", "gpuportal-beat"}
    assert {o["metadata"]["namespace"] for o in deployments.values()} == {PORTAL_NAMESPACE}
    service = by_kind(objects, "Service")["gpuportal-portal"]
    assert service["spec"]["selector"] == deployments["gpuportal-portal"]["spec"]["selector"]["matchLabels"]
    ingress = by_kind(objects, "Ingress")["gpuportal"]
    backend = ingress["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]
    assert backend["name"] == "gpuportal-portal" and backend["port"]["name"] == service["spec"]["ports"][0]["name"]
    [migrate] = by_kind(objects, "Job").values()
    [first] = pod_spec(migrate)["initContainers"]
    assert first["command"] == ["python", "manage.py", "migrate", "--noinput"]
    [container] = pod_spec(migrate)["containers"]
    assert container["command"][:3] == ["python", "manage.py", "audit_db_roles"]
    settings = generated(objects, "ConfigMap", "gpuportal-settings")
    assert settings["data"]["GPUPORTAL_ENV"] == "production"
    secret = generated(objects, "Secret", "gpuportal-secrets")
    for workload in workloads(objects):
        if workload["metadata"]["namespace"] != PORTAL_NAMESPACE:
            continue
        [container] = pod_spec(workload)["containers"]
        sources = [next(iter(s.values()))["name"] for s in container["envFrom"]]
        assert sources == [settings["metadata"]["name"], secret["metadata"]["name"]], workload["metadata"]["name"]
    [pdb] = by_kind(objects, "PodDisruptionBudget").values()
    assert pdb["spec"]["selector"]["matchLabels"] == deployments["gpuportal-portal"]["spec"]["selector"]["matchLabels"]
    assert pdb["spec"]["minAvailable"] == 1 and deployments["gpuportal-portal"]["spec"]["replicas"] >= 2
    assert set(by_kind(objects, "DaemonSet")) == {"gpuportal-agent"}
    assert set(by_kind(objects, "Namespace")) == {PORTAL_NAMESPACE, AGENT_NAMESPACE}
    assert by_kind(objects, "NetworkPolicy")


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_container_has_limits_and_a_locked_down_security_context(rendered, overlay):
    for workload in workloads(rendered[overlay][1]):
        name, spec = workload["metadata"]["name"], pod_spec(workload)
        pod_security = spec.get("securityContext", {})
        assert pod_security.get("runAsNonRoot") is True and pod_security.get("runAsUser", 0) > 0, name
        assert pod_security.get("seccompProfile", {}).get("type") == "RuntimeDefault", name
        assert not any("hostPath" in volume for volume in spec.get("volumes", [])), f"{name} mounts a host path"
        mounts_tmp = {v["name"] for v in spec.get("volumes", []) if "emptyDir" in v}
        for container in all_containers(spec):
            resources = container.get("resources", {})
            for section in ("requests", "limits"):
                assert {"cpu", "memory"} <= set(resources.get(section, {})), f"{name}: {section}"
            security = container.get("securityContext", {})
            assert security.get("allowPrivilegeEscalation") is False, name
            assert security.get("readOnlyRootFilesystem") is True, name
            assert security.get("capabilities", {}).get("drop") == ["ALL"], name
            assert not security.get("privileged") and not security.get("capabilities", {}).get("add"), name
            if container["image"].rsplit(":", 1)[0].rsplit("/", 1)[-1] == "gpuportal":
                # Python, gunicorn and Celery write temporary files; the root file system is read-only.
                assert any(m["mountPath"] == "/tmp" and m["name"] in mounts_tmp
                           for m in container.get("volumeMounts", [])), f"{name} has no writable /tmp"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_probes_ask_what_each_process_offers(rendered, overlay):
    objects = rendered[overlay][1]
    deployments = by_kind(objects, "Deployment")
    [portal] = pod_spec(deployments["gpuportal-portal"])["containers"]
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        http = portal[probe]["httpGet"]
        assert http["path"] == path and container_port(portal, http["port"]) == 8000, probe
    for name, role in (("gpuportal-worker", "worker"), ("gpuportal-worker-agents", "worker"),
                       ("gpuportal-beat", "beat")):
        [container] = pod_spec(deployments[name])["containers"]
        command = container["livenessProbe"]["exec"]["command"]
        assert command == ["python", "manage.py", "liveness", role], name
        assert command_problems(command) == []
        assert container["livenessProbe"]["timeoutSeconds"] >= 10, "a Django start-up must fit in the probe"
    [agent] = pod_spec(by_kind(objects, "DaemonSet")["gpuportal-agent"])["containers"]
    assert agent["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container_port(agent, agent["livenessProbe"]["httpGet"]["port"]) == 9400


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_one_beat_at_a_time(rendered, overlay):
    beat = by_kind(rendered[overlay][1], "Deployment")["gpuportal-beat"]
    assert beat["spec"]["replicas"] == 1 and beat["spec"]["strategy"] == {"type": "Recreate"}


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_container_command_exists_and_accepts_its_arguments(rendered, overlay):
    commands = {}
    for workload in workloads(rendered[overlay][1]):
        for container in all_containers(pod_spec(workload)):
            argv = [*container.get("command", []), *container.get("args", [])]
            assert argv, f"{workload['metadata']['name']} relies on the image's command"
            assert command_problems(argv) == [], argv
            commands[workload["metadata"]["name"]] = argv
    assert commands["gpuportal-worker"][:6] == ["celery", "-A", "gpuportal", "worker", "-Q", "celery"]
    assert commands["gpuportal-worker-agents"][:6] == ["celery", "-A", "gpuportal", "worker", "-Q", "agents"]
    assert commands["gpuportal-beat"][:4] == ["celery", "-A", "gpuportal", "beat"]
    beat_schedule = commands["gpuportal-beat"][commands["gpuportal-beat"].index("--schedule") + 1]
    assert beat_schedule.startswith("/tmp/"), "beat writes its schedule; only /tmp is writable"


def test_the_agent_queue_is_the_one_the_settings_route_polling_to():
    from django.conf import settings

    assert settings.CELERY_TASK_ROUTES["fleet.tasks.poll_agents"]["queue"] == "agents"


# --- validation ---------------------------------------------------------------------------------------------


def kubernetes_validate(path: Path, version: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(KUBERNETES_VALIDATE), "--strict", "-k", version, str(path)],
                          capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_kubernetes_validate_strict_accepts_every_rendered_object(rendered, overlay, tmp_path):
    text, objects = rendered[overlay]
    path = tmp_path / f"{overlay}.yaml"
    path.write_text(text)
    for version in KUBERNETES_VERSIONS:
        done = kubernetes_validate(path, version)
        assert done.returncode == 0, done.stdout + done.stderr
        output = done.stdout + done.stderr
        passed = re.findall(rf"passed for resource (\S+) against version {re.escape(version)}", output)
        assert len(passed) == len(objects), "every object is validated, none skipped"


def test_kubernetes_validate_strict_refuses_a_misspelled_field(rendered, tmp_path):
    """The check above can fail: one rendered Deployment with a typo in a probe is refused."""
    objects = copy.deepcopy(rendered["single-cluster"][1])
    portal = next(o for o in objects if o["kind"] == "Deployment" and o["metadata"]["name"] == "gpuportal-portal")
    container = pod_spec(portal)["containers"][0]
    container["livenesProbe"] = container.pop("livenessProbe")
    path = tmp_path / "broken.yaml"
    path.write_text(yaml.safe_dump_all(objects))
    done = kubernetes_validate(path, KUBERNETES_VERSIONS[0])
    assert done.returncode != 0 and "livenesProbe" in done.stdout + done.stderr


# --- the network ----------------------------------------------------------------------------------------------


def _selects(policy: dict, labels: dict) -> bool:
    selector = policy["spec"]["podSelector"]
    if any(labels.get(k) != v for k, v in selector.get("matchLabels", {}).items()):
        return False
    for expression in selector.get("matchExpressions", []):
        assert expression["operator"] == "In", "only In is understood here"
        if labels.get(expression["key"]) not in expression["values"]:
            return False
    return True


def _egress_ports(policies: list[dict], labels: dict) -> set[tuple[str, int]]:
    return {(port.get("protocol", "TCP"), port["port"]) for policy in policies if _selects(policy, labels)
            for rule in policy["spec"].get("egress", []) for port in rule.get("ports", [])}


def test_network_policies_deny_by_default_and_open_only_what_each_part_needs(rendered):
    objects = rendered["single-cluster"][1]
    policies = list(by_kind(objects, "NetworkPolicy").values())
    assert {p["metadata"]["namespace"] for p in policies} == {PORTAL_NAMESPACE}
    deny = [p for p in policies if p["spec"]["podSelector"] == {} and set(p["spec"]["policyTypes"]) ==
            {"Ingress", "Egress"} and not p["spec"].get("ingress") and not p["spec"].get("egress")]
    assert deny, "a default deny for the namespace"
    labels = {name: d["spec"]["template"]["metadata"]["labels"] for name, d in by_kind(objects, "Deployment").items()}
    labels["migrate"] = by_kind(objects, "Job")["gpuportal-migrate"]["spec"]["template"]["metadata"]["labels"]
    # In: the portal only, from the ingress controller's and Prometheus' namespaces, on 8000.
    ingress_rules = [(p["metadata"]["name"], rule) for p in policies for rule in p["spec"].get("ingress", [])]
    assert len(ingress_rules) == 1
    name, rule = ingress_rules[0]
    portal_policy = by_kind(objects, "NetworkPolicy")[name]
    assert _selects(portal_policy, labels["gpuportal-portal"])
    assert not any(_selects(portal_policy, labels[other]) for other in labels if other != "gpuportal-portal")
    assert rule["ports"] == [{"protocol": "TCP", "port": 8000}]
    assert rule["from"] == [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": name}}}
                            for name in ("ingress-nginx", "monitoring")]
    # Out: what each process talks to.
    dns = {("UDP", 53), ("TCP", 53)}
    database, broker, api, agents, mail = {("TCP", 5432)}, {("TCP", 6379)}, {("TCP", 443), ("TCP", 6443)}, \
        {("TCP", 9400)}, {("TCP", 25), ("TCP", 587)}
    anchor = {("UDP", 514)}  # syslog, where the audit chain's head goes
    expected = {"gpuportal-portal": dns | database | broker | api | mail | anchor,
                "gpuportal-worker": dns | database | broker | api | mail | anchor,
                "gpuportal-worker-agents": dns | database | broker | api | mail | agents,
                "gpuportal-beat": dns | broker,
                "migrate": dns | database}
    for part, ports in expected.items():
        assert _egress_ports(policies, labels[part]) == ports, part


# --- identity -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_only_the_pods_that_drive_the_cluster_hold_the_executors_token(rendered, overlay):
    objects = rendered[overlay][1]
    [account] = by_kind(objects, "ServiceAccount").values()
    binding = by_kind(objects, "ClusterRoleBinding")["gpuportal-executor"]
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                  "name": "gpuportal-executor"}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": account["metadata"]["name"],
                                    "namespace": account["metadata"]["namespace"]}]
    assert account.get("automountServiceAccountToken") is False
    for workload in workloads(objects):
        spec, name = pod_spec(workload), workload["metadata"]["name"]
        drives = name in ("gpuportal-portal", "gpuportal-worker", "gpuportal-worker-agents")
        assert spec.get("serviceAccountName") == (account["metadata"]["name"] if drives else None), name
        assert spec.get("automountServiceAccountToken") is drives, name


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_agent_runs_on_gpu_nodes_with_its_nodes_token(rendered, overlay):
    objects = rendered[overlay][1]
    agent = by_kind(objects, "DaemonSet")["gpuportal-agent"]
    spec = pod_spec(agent)
    assert agent["metadata"]["namespace"] == AGENT_NAMESPACE
    assert spec["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert spec["hostNetwork"] is True and spec["hostPID"] is True  # see the DaemonSet's comment
    namespace = by_kind(objects, "Namespace")[AGENT_NAMESPACE]
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"
    assert by_kind(objects, "Namespace")[PORTAL_NAMESPACE]["metadata"]["labels"][
        "pod-security.kubernetes.io/enforce"] == "restricted"
    [container] = spec["containers"]
    [mount] = container["volumeMounts"]
    [volume] = [v for v in spec["volumes"] if v["name"] == mount["name"]]
    tokens = generated(objects, "Secret", "gpuportal-agent-tokens")
    assert volume["secret"]["secretName"] == tokens["metadata"]["name"] and mount["readOnly"] is True
    assert tokens["metadata"]["namespace"] == AGENT_NAMESPACE
    args = container["args"]
    token_file = args[args.index("--token-file") + 1]
    assert token_file == f"{mount['mountPath']}/$(NODE_NAME)", "each agent reads the key named after its node"
    env = {e["name"]: e for e in container["env"]}
    assert env["NODE_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"
    assert args[args.index("--bind") + 1] == "$(HOST_IP)", "listen on the node's address, not everywhere"
    assert env["HOST_IP"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.hostIP"
    agent_settings = generated(objects, "ConfigMap", "gpuportal-agent-settings")
    assert env["GPUPORTAL_URL"]["valueFrom"]["configMapKeyRef"]["name"] == agent_settings["metadata"]["name"]


# --- database roles and the audit anchor ----------------------------------------------------------------------


def _url_user(url: str) -> str | None:
    return urlparse(url).username


def _secret_names(container: dict) -> set[str]:
    """The Secrets a container reads, whole (envFrom) or by key (env)."""
    names = {s["secretRef"]["name"] for s in container.get("envFrom", []) if "secretRef" in s}
    return names | {e["valueFrom"]["secretKeyRef"]["name"] for e in container.get("env", [])
                    if "secretKeyRef" in e.get("valueFrom", {})}


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_migrations_run_as_the_tables_owner_and_the_portal_as_its_restricted_role(rendered, overlay):
    """The owner's URL reaches the migration Job only; after migrate, the Job gives the portal's role (the user of
    the portal's DATABASE_URL) its rights with audit_db_roles: no table of its own, no UPDATE or DELETE of the
    audit log."""
    objects = rendered[overlay][1]
    owner_secret = generated(objects, "Secret", "gpuportal-migrate-secrets")["metadata"]["name"]
    app_user = _url_user(read_env_file(KUSTOMIZE / "secret.env.example")["DATABASE_URL"])
    owner_user = _url_user(read_env_file(KUSTOMIZE / "migrate-secret.env.example")["DATABASE_URL"])
    assert app_user and owner_user and app_user != owner_user
    for workload in workloads(objects):
        name = workload["metadata"]["name"]
        for container in all_containers(pod_spec(workload)):
            assert (owner_secret in _secret_names(container)) == (name == "gpuportal-migrate"), name
    steps = all_containers(pod_spec(by_kind(objects, "Job")["gpuportal-migrate"]))
    assert [step["command"][2] for step in steps] == ["migrate", "audit_db_roles"]
    for step in steps:
        [database] = [e for e in step["env"] if e["name"] == "DATABASE_URL"]  # env wins over envFrom
        assert database["valueFrom"]["secretKeyRef"] == {"name": owner_secret, "key": "DATABASE_URL"}
    roles = steps[1]["command"]
    assert roles[roles.index("--app-role") + 1] == app_user


def test_production_exports_the_audit_head_to_syslog_and_refuses_to_start_without_an_anchor(rendered):
    objects = rendered["single-cluster"][1]
    settings = generated(objects, "ConfigMap", "gpuportal-settings")["data"]
    host, _sep, port = settings["GPUPORTAL_AUDIT_HEAD_SYSLOG"].rpartition(":")
    assert host and port.isdigit()
    labels = {name: d["spec"]["template"]["metadata"]["labels"] for name, d in by_kind(objects, "Deployment").items()}
    policies = list(by_kind(objects, "NetworkPolicy").values())
    for exporter in ("gpuportal-worker", "gpuportal-portal"):  # the beat task's worker; verify_audit in a portal pod
        assert ("UDP", int(port)) in _egress_ports(policies, labels[exporter]), exporter
    secret = filled_in(read_env_file(KUSTOMIZE / "secret.env.example"))
    without = {key: value for key, value in settings.items() if key != "GPUPORTAL_AUDIT_HEAD_SYSLOG"}
    refused = django_in_production({**without, **secret}, "check")
    assert refused.returncode != 0 and "ImproperlyConfigured" in refused.stderr
    assert "GPUPORTAL_AUDIT_HEAD_FILE" in refused.stderr and "GPUPORTAL_AUDIT_HEAD_SYSLOG" in refused.stderr


# --- the site's names and images --------------------------------------------------------------------------------


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_host_names_agree(rendered, overlay):
    """The Ingress host is allowed by Django, and is the portal's URL for users, pods and agents alike."""
    objects = rendered[overlay][1]
    settings = generated(objects, "ConfigMap", "gpuportal-settings")["data"]
    ingress = by_kind(objects, "Ingress")["gpuportal"]
    hosts = {rule["host"] for rule in ingress["spec"]["rules"]}
    assert hosts == set(ingress["spec"]["tls"][0]["hosts"])
    assert hosts <= {h.strip() for h in settings["ALLOWED_HOSTS"].split(",")}
    assert urlparse(settings["GPUPORTAL_URL"]).hostname in hosts
    assert generated(objects, "ConfigMap", "gpuportal-agent-settings")["data"]["GPUPORTAL_URL"] == \
        settings["GPUPORTAL_URL"]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_images_are_pinned_by_version(rendered, overlay):
    for workload in workloads(rendered[overlay][1]):
        for container in all_containers(pod_spec(workload)):
            name, _sep, tag = container["image"].rpartition(":")
            assert name and "/" not in tag and re.fullmatch(r"\d+\.\d+\.\d+", tag), container["image"]


def test_air_gapped_points_at_nothing_outside_the_site(rendered):
    text, objects = rendered["air-gapped"]
    for workload in workloads(objects):
        for container in all_containers(pod_spec(workload)):
            assert container["image"].startswith("registry.local/"), container["image"]
            assert container["imagePullPolicy"] == "IfNotPresent", workload["metadata"]["name"]
    names = set()
    for config in (o for o in objects if o["kind"] == "ConfigMap"):
        for value in config["data"].values():
            names |= {urlparse(url).hostname for url in re.findall(r"\w+://[^\s,]+", value)}
        names |= {h.strip() for h in config["data"].get("ALLOWED_HOSTS", "").split(",") if h.strip()}
        names |= {config["data"][k] for k in ("EMAIL_HOST",) if k in config["data"]}
        names |= {config["data"][k].rpartition(":")[0] for k in ("GPUPORTAL_AUDIT_HEAD_SYSLOG",) if k in config["data"]}
    names |= {rule["host"] for rule in by_kind(objects, "Ingress")["gpuportal"]["spec"]["rules"]}
    assert names and all(n.endswith((".internal", ".local")) for n in names), names
    assert "example.com" not in text


def test_single_cluster_pulls_from_a_registry_of_its_own(rendered):
    for workload in workloads(rendered["single-cluster"][1]):
        for container in all_containers(pod_spec(workload)):
            assert container["image"].startswith("registry.example.com/gpuportal/"), container["image"]


# --- the settings they hold ---------------------------------------------------------------------------------


def read_env_file(path: Path) -> dict[str, str]:
    """KEY=VALUE lines (kustomize's env files and systemd's EnvironmentFile agree on this much)."""
    values = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            key, sep, value = line.partition("=")
            assert sep, f"{path.name}: {line!r} is not KEY=VALUE"
            values[key.strip()] = value.strip()
    return values


def filled_in(values: dict[str, str]) -> dict[str, str]:
    """The placeholders replaced as the example's comments say (fresh keys, a password in the URLs)."""
    return {key: value.replace("REPLACE-ME", secrets.token_urlsafe(64)) for key, value in values.items()}


def django_in_production(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    """``manage.py <args>`` with exactly ``env`` (no variable of this test run leaks in)."""
    return subprocess.run([sys.executable, "manage.py", *args], cwd=REPO, capture_output=True, text=True, timeout=120,
                          env=_clean_env(DJANGO_SETTINGS_MODULE="gpuportal.settings", **env), check=False)


def test_the_configmap_and_the_secret_start_production_and_pass_check_deploy(rendered):
    settings = generated(rendered["single-cluster"][1], "ConfigMap", "gpuportal-settings")["data"]
    example = read_env_file(KUSTOMIZE / "secret.env.example")
    assert not set(example) & set(settings), "a variable in both the ConfigMap and the Secret"
    done = django_in_production({**settings, **filled_in(example)}, "check", "--deploy", "--fail-level", "WARNING")
    assert done.returncode == 0, done.stdout + done.stderr
    assert_placeholders_refused(settings, example)


def assert_placeholders_refused(settings: dict[str, str], example: dict[str, str]) -> None:
    """Each key left as the example has it stops start-up, naming the variable to replace."""
    for key in ("SECRET_KEY", "GPUPORTAL_AUDIT_KEY"):
        assert "REPLACE-ME" in example[key]
        env = {**settings, **filled_in(example), key: example[key]}
        refused = django_in_production(env, "check")
        assert refused.returncode != 0 and "ImproperlyConfigured" in refused.stderr and key in refused.stderr, key


def test_without_its_secret_the_portal_refuses_to_start(rendered):
    """Each variable production requires is in the Secret: without it, start-up fails naming it."""
    settings = generated(rendered["single-cluster"][1], "ConfigMap", "gpuportal-settings")["data"]
    secret = filled_in(read_env_file(KUSTOMIZE / "secret.env.example"))
    for missing in ("DATABASE_URL", "CELERY_BROKER_URL"):
        env = {**settings, **{k: v for k, v in secret.items() if k != missing}}
        done = subprocess.run([sys.executable, "-c", "import gpuportal.settings"], cwd=REPO, capture_output=True,
                              text=True, timeout=60, env=_clean_env(**env), check=False)
        assert done.returncode != 0 and missing in done.stderr, missing


def test_the_secret_files_stay_out_of_git():
    for overlay in OVERLAYS:
        for name in SECRET_FILES:
            ignored = subprocess.run(["git", "check-ignore", "-q", f"deploy/kustomize/overlays/{overlay}/{name}"],
                                     cwd=REPO, check=False)
            assert ignored.returncode == 0, f"git would take {overlay}/{name}"


# --- systemd --------------------------------------------------------------------------------------------------

UNITS = {"gpuportal-web.service": "web", "gpuportal-worker.service": "worker",
         "gpuportal-worker-agents.service": "worker", "gpuportal-beat.service": "beat",
         "gpuportal-agent.service": "agent"}


def read_unit(path: Path) -> configparser.ConfigParser:
    unit = configparser.ConfigParser(strict=False, interpolation=None, delimiters=("=",), comment_prefixes=("#", ";"))
    unit.optionxform = str  # keys are case-sensitive
    unit.read_string(path.read_text())
    return unit


def test_the_units_are_the_ones_the_guide_installs():
    assert {p.name for p in SYSTEMD.glob("*.service")} == set(UNITS)
    guide = (REPO / "docs" / "install-single-server.md").read_text()
    for name in UNITS:
        assert name in guide, f"the install guide does not mention {name}"


@pytest.mark.parametrize("name", sorted(UNITS))
def test_each_unit_runs_as_its_user_hardened_and_starts_a_real_command(name):
    service = read_unit(SYSTEMD / name)["Service"]
    assert service["User"] not in ("root", "0") and service["User"].startswith("gpuportal")
    assert service["Restart"] == "on-failure"
    for key, value in (("NoNewPrivileges", "yes"), ("ProtectSystem", "strict"), ("PrivateTmp", "yes"),
                       ("ProtectHome", "yes"), ("CapabilityBoundingSet", "")):
        assert service.get(key) == value, f"{name}: {key}"
    argv = shlex.split(service["ExecStart"])
    prefix = "/opt/gpuportal-agent/venv/bin/" if UNITS[name] == "agent" else "/opt/gpuportal/venv/bin/"
    assert argv[0].startswith(prefix), "the program comes from the installation's own virtual environment"
    assert command_problems(argv) == [], argv
    if UNITS[name] == "agent":
        assert service["EnvironmentFile"] == "/etc/gpuportal/agent.env"
        return
    assert service["EnvironmentFile"] == "/etc/gpuportal/gpuportal.env"
    assert service["WorkingDirectory"] == "/opt/gpuportal/app"
    writable = service["ReadWritePaths"].split()
    assert "/var/lib/gpuportal" in writable and service["StateDirectory"] == "gpuportal"
    if UNITS[name] == "beat":
        assert argv[argv.index("--schedule") + 1].startswith("/var/lib/gpuportal/"), "beat's schedule is writable"


def test_the_env_file_holds_everything_production_needs_and_points_where_the_units_write():
    example = read_env_file(SYSTEMD / "gpuportal.env.example")
    writable = {path for name, role in UNITS.items() if role != "agent"
                for path in read_unit(SYSTEMD / name)["Service"]["ReadWritePaths"].split()}
    for key in ("GPUPORTAL_LIVENESS_DIR", "GPUPORTAL_AUDIT_HEAD_FILE"):
        assert any(example[key].startswith(f"{path}/") for path in writable), key
    done = django_in_production(filled_in(example), "check", "--deploy", "--fail-level", "WARNING")
    assert done.returncode == 0, done.stdout + done.stderr
    assert_placeholders_refused({}, example)


def test_the_services_use_the_restricted_role_and_gpuportal_migrate_the_owner():
    """gpuportal.env (every service) names the portal's role; migrate.env, read by gpuportal-migrate alone and after
    gpuportal.env, names the tables' owner; the script migrates, then gives that role its rights."""
    app = read_env_file(SYSTEMD / "gpuportal.env.example")
    owner = read_env_file(SYSTEMD / "migrate.env.example")
    assert set(owner) == {"DATABASE_URL"}
    app_user, owner_user = _url_user(app["DATABASE_URL"]), _url_user(owner["DATABASE_URL"])
    assert app_user and owner_user and app_user != owner_user
    for name in UNITS:
        assert "migrate.env" not in (SYSTEMD / name).read_text(), name
    script = SYSTEMD / "gpuportal-migrate"
    assert os.access(script, os.X_OK) and subprocess.run(["sh", "-n", str(script)], check=False).returncode == 0
    text = script.read_text()
    service = read_unit(SYSTEMD / "gpuportal-web.service")["Service"]
    assert re.findall(r"--property=EnvironmentFile=(\S+)", text) == [service["EnvironmentFile"],
                                                                      "/etc/gpuportal/migrate.env"]
    assert f"--uid={service['User']}" in text and f"--property=WorkingDirectory={service['WorkingDirectory']}" in text
    steps = re.findall(r"^manage (.+)$", text, re.M)
    assert steps == ["migrate --noinput", 'audit_db_roles --app-role "$app_role"']
    assert re.search(r"app_role=\$\{1:-(\w+)\}", text).group(1) == app_user
    done = django_in_production(filled_in({**app, **owner}), "check", "--deploy", "--fail-level", "WARNING")
    assert done.returncode == 0, done.stdout + done.stderr


def test_systemd_analyze_verify_accepts_the_units(tmp_path):
    """systemd's own parser: an unknown or misspelled key is reported (the programs under /opt are not installed
    on this machine, which is the one complaint expected)."""
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed on this machine")

    def complaints(path: Path) -> list[str]:
        done = subprocess.run([analyze, "verify", "--man=no", "--generators=no", str(path)], capture_output=True,
                              text=True, timeout=60, check=False)
        return [line for line in (done.stdout + done.stderr).splitlines()
                if line.strip() and not re.search(r"Command /opt/gpuportal(-agent)?/venv/bin/\w+ is not executable",
                                                  line)]

    for name in UNITS:
        assert complaints(SYSTEMD / name) == [], name
    broken = tmp_path / "gpuportal-web.service"
    broken.write_text((SYSTEMD / "gpuportal-web.service").read_text().replace("NoNewPrivileges=", "NoNewPrivilege="))
    assert any("Unknown key" in line for line in complaints(broken))


def test_the_manage_wrapper_runs_manage_py_as_the_units_do():
    """gpuportal-manage (migrate, collectstatic, check, liveness) gets the services' user, environment file and
    working directory, so what it checks is what they run with."""
    script = SYSTEMD / "gpuportal-manage"
    assert os.access(script, os.X_OK)
    assert subprocess.run(["sh", "-n", str(script)], check=False).returncode == 0
    text = script.read_text()
    service = read_unit(SYSTEMD / "gpuportal-web.service")["Service"]
    for key in ("EnvironmentFile", "WorkingDirectory"):
        assert f"--property={key}={service[key]}" in text, key
    assert f"--uid={service['User']}" in text and f"--gid={service['Group']}" in text
    assert "/opt/gpuportal/venv/bin/python manage.py" in text
