"""Notebooks, inference-service replicas and array tasks on Kubernetes, through the real client over
real HTTP against the fake API server: the shapes validate strictly, dispatch makes the objects, the sync moves
the jobs, ``probe`` tells what a running notebook or replica shows, ``stop`` and ``release_group`` delete what
they should and nothing more. The orchestration (when to add, stop or replace a replica) is not tested here: the
steps it takes are, one executor call at a time."""

import base64
import dataclasses

import kubernetes_validate
import pytest
import yaml
from django.core.management import call_command
from django.db import transaction

from fleet.models import Cluster
from kubefake.validation import same_verdict_as_kubernetes_validate
from scheduling.executors.kubernetes import KubernetesExecutor, manifests
from scheduling.jobs import submission
from scheduling.jobs import tokens as job_tokens
from scheduling.models import Job, JobGroup, JobStatus
from scheduling.triggers import request_scheduling_pass
from tests.conftest import job_payload
from tests.scheduling.kube import MODEL

pytestmark = pytest.mark.django_db(transaction=True)

INGRESS = {"INGRESS_HOST": "gpus.test.example", "PORTAL_URL": "https://portal.test.example",
           "INGRESS_CLASS": "nginx"}


def submit(users, **overrides) -> Job:
    payload = job_payload(gpu_model=MODEL, gpus_per_node=1, command="python serve.py")
    payload.update(overrides)
    return Job.objects.get(pk=submission.submit_job(users["alice"], payload).pk)


def executor(kube) -> KubernetesExecutor:
    return KubernetesExecutor(Cluster.objects.get(pk=kube.cluster.pk))


def fresh(job) -> Job:
    return Job.objects.select_related("group", "tenant", "project", "task_type").get(pk=job.pk)


def with_ingress(settings):
    settings.KUBERNETES = {**settings.KUBERNETES, **INGRESS}


def submit_service(users, replicas=2, **overrides) -> tuple[JobGroup, list[Job]]:
    first = submit(users, kind="service", replicas=replicas, port=8000, task_type="inference",
                   max_runtime_minutes=None, image="registry.local/vllm:0.6", command="vllm serve m --port $PORT",
                   **overrides)
    group = first.group
    return group, list(group.members.order_by("group_index"))


def add_replica(users, group: JobGroup, index: int, revision: int) -> Job:
    """What the lead's rollout does for a new replica: a job of the group with the next revision, scheduled."""
    clean = submission.validate_job_request(users["alice"], {**group.request, "kind": "service"})
    with transaction.atomic():
        job = submission.create_member(users["alice"], clean, group.name, group.submitted_at, group, index,
                                       revision=revision)
        request_scheduling_pass()
    return fresh(job)


# --- shapes ---------------------------------------------------------------------------------------------------


def test_every_workload_shape_validates_strictly():
    ingress = manifests.IngressConfig(host="gpus.example.org", portal_url="https://portal", class_name="nginx",
                                      tls_secret="gpus-tls")
    objects = []
    for shape in manifests.WORKLOAD_EXAMPLES:
        spec = manifests.example_spec(shape)
        objects += manifests.for_job("gp-", spec, "http://portal", "t", notebook_token="nb", data_claim=True,
                                     ingress=ingress)
        objects += manifests.for_job("gp-", dataclasses.replace(spec, gpu_milli=500), "http://portal", "t")
    assert {o["kind"] for o in objects} == {"Secret", "Service", "Ingress", "Job", "Deployment"}
    for body in objects:
        assert kubernetes_validate.validate(body, "1.30", strict=True)
        assert same_verdict_as_kubernetes_validate(body)
    deployment = next(o for o in objects if o["kind"] == "Deployment")
    broken = {**deployment, "spec": {**deployment["spec"], "replica": 1}}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, "1.30", strict=True)


def test_shapes_say_what_each_kind_needs():
    notebook = manifests.example_spec("notebook")
    secret, service, ingress, job = manifests.for_job("gp-", notebook, "http://portal", "t", notebook_token="nb",
                                                      ingress=manifests.EXAMPLE_INGRESS)
    assert secret["stringData"] == {"token": "t", "notebook-token": "nb"}
    assert "activeDeadlineSeconds" not in job["spec"]  # no max runtime
    container = job["spec"]["template"]["spec"]["containers"][0]
    assert container["command"][:2] == ["jupyter", "lab"]
    assert "--ServerApp.base_url=/jobs/1234/open/" in container["command"]
    assert "--ServerApp.token=$(JUPYTER_TOKEN)" in container["command"]
    env = {e["name"]: e for e in container["env"]}
    assert env["JUPYTER_TOKEN"]["valueFrom"]["secretKeyRef"] == {"name": "gp-1234-a0-token", "key": "notebook-token"}
    assert service["spec"]["ports"][0]["port"] == 8888 and service["spec"]["type"] == "ClusterIP"
    annotations = ingress["metadata"]["annotations"]
    assert annotations["nginx.ingress.kubernetes.io/auth-url"] == "https://portal.example.org/jobs/1234/open-auth/"
    assert int(annotations["nginx.ingress.kubernetes.io/proxy-read-timeout"]) >= 3600
    [path] = ingress["spec"]["rules"][0]["http"]["paths"]
    assert (path["path"], path["backend"]["service"]["name"]) == ("/jobs/1234/open/", "gp-1234-a0")
    timed = manifests.job("gp-", dataclasses.replace(notebook, max_runtime_minutes=90), "http://portal")
    assert timed["spec"]["activeDeadlineSeconds"] == 5400

    replica = manifests.example_spec("inference-service")
    shared, *rest = manifests.for_job("gp-", replica, "http://portal", "t")
    assert [o["kind"] for o in rest] == ["Secret", "Deployment"]  # no Ingress without an ingress host
    assert shared["metadata"]["name"] == "gp-svc-77" and shared["spec"]["selector"] == {"gpuportal.io/service": "77"}
    deployment = rest[-1]
    assert deployment["spec"]["replicas"] == 1 and deployment["spec"]["strategy"] == {"type": "Recreate"}
    pod = deployment["spec"]["template"]
    assert pod["metadata"]["labels"].items() >= {"gpuportal.io/job": "1234", "gpuportal.io/service": "77",
                                                 "gpuportal.io/revision": "2"}.items()
    assert pod["spec"]["restartPolicy"] == "Always"
    main = pod["spec"]["containers"][0]
    assert main["readinessProbe"]["httpGet"] == {"path": "/health", "port": "http"}
    assert main["livenessProbe"]["httpGet"]["path"] == "/health" and main["ports"][0]["containerPort"] == 8000
    env = {e["name"]: e.get("value") for e in main["env"]}
    assert (env["GPUPORTAL_SERVICE_REPLICA"], env["GPUPORTAL_REVISION"], env["PORT"]) == ("0", "2", "8000")

    array = manifests.example_spec("array")
    *_, array_job = manifests.for_job("gp-", array, "http://portal", "t")
    env = {e["name"]: e.get("value") for e in array_job["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert (env["GPUPORTAL_ARRAY_ID"], env["GPUPORTAL_ARRAY_INDEX"], env["GPUPORTAL_ARRAY_SIZE"]) == ("55", "3", "10")
    assert env["SLURM_ARRAY_TASK_ID"] == "3" and array_job["metadata"]["labels"]["gpuportal.io/array"] == "55"


def test_k8s_manifests_prints_the_workload_examples(capsys):
    expected = {"notebook": ["Secret", "Service", "Ingress", "Job"],
                "inference-service": ["Service", "Ingress", "Secret", "Deployment"],
                "array": ["Secret", "Job"]}
    for example, kinds in expected.items():
        call_command("k8s_manifests", "--example", example)
        documents = list(yaml.safe_load_all(capsys.readouterr().out))
        assert [d["kind"] for d in documents][-len(kinds):] == kinds
        for document in documents:
            kubernetes_validate.validate(document, "1.30", strict=True)
    call_command("k8s_manifests", "--example", "multi-node")  # the batch shapes still print
    assert [d["kind"] for d in yaml.safe_load_all(capsys.readouterr().out)][-3:] == ["Secret", "Service", "Job"]


# --- notebooks ------------------------------------------------------------------------------------------------


def test_a_notebook_gets_its_job_secret_service_and_ingress_and_runs(kube, users, settings):
    with_ingress(settings)
    job = submit(users, kind="notebook", task_type="notebook", command="", max_runtime_minutes=None)
    assert job.status == JobStatus.DISPATCHING
    namespace, name = kube.objects_of(job)
    k8s_job = kube.fake.get("jobs", namespace, name)
    assert k8s_job["spec"]["activeDeadlineSeconds"] == job.max_runtime_minutes * 60  # the task type's default
    secret = kube.fake.get("secrets", namespace, f"{name}-token")


    assert base64.b64decode(secret["data"]["notebook-token"]).decode() == job_tokens.notebook_token(fresh(job))
    service = kube.fake.get("services", namespace, name)
    assert service["spec"]["ports"][0]["port"] == 8888 and service["spec"]["clusterIP"]
    ingress = kube.fake.get("ingresses", namespace, name)
    assert ingress["spec"]["rules"][0]["host"] == "gpus.test.example"
    assert ingress["metadata"]["annotations"]["nginx.ingress.kubernetes.io/auth-url"] == \
        f"https://portal.test.example/jobs/{job.pk}/open-auth/"

    kube.sync()
    job = fresh(job)
    assert job.status == JobStatus.RUNNING
    live = executor(kube).probe(job)
    assert live.upstream == f"http://{name}.{namespace}.svc.cluster.local:8888"
    assert live.ready is False and "readiness" in live.problem  # Jupyter not serving yet
    kube.fake.ready(namespace, name)
    live = executor(kube).probe(job)
    assert (live.ready, live.problem, live.restarts) == (True, "", 0)

    executor(kube).stop(job, "closed")
    for plural in ("jobs", "services", "ingresses"):
        assert (plural, namespace, name) not in kube.fake.objects
    assert ("secrets", namespace, f"{name}-token") not in kube.fake.objects
    assert kube.fake.pods(namespace, name) == []


def test_a_notebook_whose_pod_fails_is_diagnosed_like_a_batch_job(kube, users):
    job = submit(users, kind="notebook", task_type="notebook", command="", max_runtime_minutes=None)
    namespace, name = kube.objects_of(job)
    assert ("ingresses", namespace, name) not in kube.fake.objects  # no ingress host configured
    kube.sync()
    kube.fake.exit(namespace, name, code=1, log="ModuleNotFoundError: No module named 'jupyterlab'")
    kube.sync()
    job = fresh(job)
    assert (job.status, job.failure_category, job.exit_code) == (JobStatus.FAILED, "exit_code", 1)
    assert ("jobs", namespace, name) not in kube.fake.objects and ("services", namespace, name) not in \
        kube.fake.objects


# --- service replicas -----------------------------------------------------------------------------------------


def test_a_service_with_two_replicas_is_two_deployments_behind_one_service(kube, users, settings):
    with_ingress(settings)
    group, replicas = submit_service(users)
    assert [r.status for r in replicas] == [JobStatus.DISPATCHING] * 2
    namespace = "gp-vision"
    deployments = kube.fake.list("deployments", namespace)[0]
    assert sorted(d["metadata"]["name"] for d in deployments) == sorted(kube.objects_of(r)[1] for r in replicas)
    [service] = [s for s in kube.fake.list("services", namespace)[0]
                 if s["metadata"]["name"] == f"gp-svc-{group.pk}"]
    assert service["spec"]["ports"][0]["port"] == 8000
    assert service["spec"]["selector"] == {"gpuportal.io/service": str(group.pk)}
    ingress = kube.fake.get("ingresses", namespace, f"gp-svc-{group.pk}")
    assert ingress["metadata"]["annotations"]["nginx.ingress.kubernetes.io/auth-url"] == \
        f"https://portal.test.example/services/{group.pk}/auth/"
    for replica in replicas:
        name = kube.objects_of(replica)[1]
        [pod] = kube.fake.deployment_pods(namespace, name)
        assert pod["spec"]["nodeName"] == fresh(replica).executor_state["nodes"][0]  # pinned where it was placed
        env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}
        assert (env["GPUPORTAL_SERVICE_REPLICA"], env["GPUPORTAL_REVISION"], env["PORT"]) == (
            str(replica.group_index), "1", "8000")
        assert pod["metadata"]["labels"]["gpuportal.io/service"] == str(group.pk)

    kube.sync()
    assert [fresh(r).status for r in replicas] == [JobStatus.RUNNING] * 2
    live = executor(kube).probe(fresh(replicas[0]))
    assert live.upstream == f"http://gp-svc-{group.pk}.{namespace}.svc.cluster.local:8000"
    assert live.ready is False  # the fake runs no readiness probe: not ready until it says so
    again = executor(kube).dispatch(fresh(replicas[0]))
    assert again["already_existed"] is True and again["service"] == f"gp-svc-{group.pk}"


def test_rolling_update_at_the_object_level(kube, users):
    group, (old_a, old_b) = submit_service(users)
    namespace = "gp-vision"
    kube.sync()
    for old in (old_a, old_b):
        kube.fake.ready(namespace, kube.objects_of(old)[1])
    group.revision = 2
    group.save(update_fields=["revision"])

    new = add_replica(users, group, index=2, revision=2)
    assert new.status == JobStatus.DISPATCHING and new.revision == 2
    new_name = kube.objects_of(new)[1]
    deployment = kube.fake.get("deployments", namespace, new_name)
    assert deployment["spec"]["template"]["metadata"]["labels"]["gpuportal.io/revision"] == "2"
    kube.sync()
    assert fresh(new).status == JobStatus.RUNNING
    assert executor(kube).probe(fresh(new)).ready is False  # the old replica must stay until this is ready

    kube.fake.ready(namespace, new_name)
    assert executor(kube).probe(fresh(new)).ready is True
    assert kube.fake.get("deployments", namespace, new_name)["status"]["readyReplicas"] == 1

    old_name = kube.objects_of(old_a)[1]
    executor(kube).stop(fresh(old_a), "replaced by revision 2")
    assert ("deployments", namespace, old_name) not in kube.fake.objects
    assert ("deployments", namespace, old_name, "Foreground") in kube.fake.deletions
    assert kube.fake.deployment_pods(namespace, old_name) == []
    assert ("services", namespace, f"gp-svc-{group.pk}") in kube.fake.objects  # the service stays
    for kept in (old_b, new):
        assert len(kube.fake.deployment_pods(namespace, kube.objects_of(kept)[1])) == 1
    selector = kube.fake.get("services", namespace, f"gp-svc-{group.pk}")["spec"]["selector"]
    behind = [p for p in kube.fake.list("pods", namespace)[0]
              if p["metadata"]["labels"].items() >= selector.items()]
    assert sorted(p["metadata"]["labels"]["gpuportal.io/revision"] for p in behind) == ["1", "2"]


def test_scale_down_deletes_only_the_stopped_replicas_deployment_and_pods(kube, users):
    group, (first, second) = submit_service(users)
    namespace = "gp-vision"
    kube.sync()
    name = kube.objects_of(second)[1]
    assert len(kube.fake.deployment_pods(namespace, name)) == 1
    executor(kube).stop(fresh(second), "scaled down to 1")
    assert ("deployments", namespace, name) not in kube.fake.objects
    assert ("secrets", namespace, f"{name}-token") not in kube.fake.objects
    assert [p for p in kube.fake.list("pods", namespace)[0] if p["metadata"]["labels"]["gpuportal.io/job"]
            == str(second.pk)] == []
    assert ("deployments", namespace, kube.objects_of(first)[1]) in kube.fake.objects
    assert ("services", namespace, f"gp-svc-{group.pk}") in kube.fake.objects
    executor(kube).stop(fresh(second), "again")  # idempotent: already gone
    assert fresh(second).events.filter(reason__contains="already gone").exists()


def test_a_crash_loop_keeps_the_replica_running_and_shows_in_probe(kube, users):
    _group, (replica, _other) = submit_service(users)
    namespace, name = kube.objects_of(replica)
    kube.sync()
    kube.fake.crash_loop(namespace, name, code=137, reason="OOMKilled", restarts=5, log="loading weights\nKilled")
    report = kube.sync()
    assert report.changed == 0 and fresh(replica).status == JobStatus.RUNNING  # the Deployment restarts it
    live = executor(kube).probe(fresh(replica))
    assert live.ready is False and live.restarts == 5
    assert "crash" in live.problem and "137" in live.problem and "5" in live.problem
    assert live.evidence["exit_code"] == 137 and live.evidence["last_reason"] == "OOMKilled"
    assert live.evidence["reason"] == "CrashLoopBackOff" and live.evidence["restarts"] == 5


def test_failing_readiness_shows_in_probe(kube, users):
    _group, (replica, _other) = submit_service(users)
    namespace, name = kube.objects_of(replica)
    kube.fake.failing_readiness(namespace, name)
    kube.sync()
    assert fresh(replica).status == JobStatus.RUNNING
    live = executor(kube).probe(fresh(replica))
    assert live.ready is False and "readiness" in live.problem and "/healthz:8000" in live.problem
    assert "unready" in live.evidence["condition"]


def test_a_replica_whose_image_never_comes_fails(kube, users):
    _group, (replica, _other) = submit_service(users)
    namespace, name = kube.objects_of(replica)
    with kube.fake._changing():
        [pod] = kube.fake._deployment_pods(namespace, name)
        kube.fake._set_container(pod, waiting={"reason": "ImagePullBackOff", "message": "manifest unknown"})
    kube.sync()
    job = fresh(replica)
    assert (job.status, job.failure_category) == (JobStatus.FAILED, "image")
    assert ("deployments", namespace, name) not in kube.fake.objects


def test_release_group_removes_the_service_and_its_ingress(kube, users, settings):
    with_ingress(settings)
    group, replicas = submit_service(users)
    namespace, service = "gp-vision", f"gp-svc-{group.pk}"
    for replica in replicas:
        executor(kube).stop(fresh(replica), "service stopped")
    assert ("services", namespace, service) in kube.fake.objects
    executor(kube).release_group(group)
    assert ("services", namespace, service) not in kube.fake.objects
    assert ("ingresses", namespace, service) not in kube.fake.objects
    executor(kube).release_group(group)  # again: nothing left, no error


# --- arrays ---------------------------------------------------------------------------------------------------


def test_array_tasks_get_their_index(kube, users):
    first = submit(users, kind="array", array="0-2", task_type="evaluation", command="python eval.py")
    tasks = list(first.group.members.order_by("group_index"))
    assert [t.group_index for t in tasks] == [0, 1, 2]
    for task in tasks:
        namespace, name = kube.objects_of(task)
        k8s_job = kube.fake.get("jobs", namespace, name)
        assert k8s_job["metadata"]["labels"]["gpuportal.io/array"] == str(first.group_id)
        env = {e["name"]: e.get("value") for e in k8s_job["spec"]["template"]["spec"]["containers"][0]["env"]}
        assert (env["GPUPORTAL_ARRAY_INDEX"], env["SLURM_ARRAY_TASK_ID"], env["GPUPORTAL_ARRAY_SIZE"]) == (
            str(task.group_index), str(task.group_index), "3")
        assert env["GPUPORTAL_ARRAY_ID"] == str(first.group_id)
    kube.sync()
    assert {fresh(t).status for t in tasks} == {JobStatus.RUNNING}
    assert executor(kube).probe(fresh(tasks[0])).upstream == ""  # a batch task has no live state


def test_reconcile_lists_deployments_with_jobs(kube, users):
    _group, replicas = submit_service(users, replicas=1)
    batch = submit(users)
    listed = {(o["kind"], o["metadata"]["name"]) for o in executor(kube).managed_jobs()}
    assert listed == {("Deployment", kube.objects_of(replicas[0])[1]), ("Job", kube.objects_of(batch)[1])}
    assert executor(kube).has_objects(fresh(replicas[0]))
    namespace, name = kube.objects_of(replicas[0])
    assert executor(kube).delete_objects(namespace, name)  # kind unknown: whatever is there
    assert not executor(kube).has_objects(fresh(replicas[0]))
