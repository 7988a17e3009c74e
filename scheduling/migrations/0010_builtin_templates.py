"""The platform's built-in job templates, version 1 each.

The content is frozen here (a migration must not change with the code); later changes are new versions added
by a platform admin on the templates page, which the audit log records. How parameters become a submission:
``scheduling.templates.services`` (parameters named like submit fields set them; others fill ``{name}`` in the
command). The multi-node command uses the rendezvous variables every job's pods get
(scheduling/executors/kubernetes/manifests.py: MASTER_ADDR, MASTER_PORT, NNODES, NPROC_PER_NODE, NODE_RANK).
"""

from django.db import migrations
from django.utils import timezone
from django.utils.translation import gettext_noop as _

IMAGE = "registry.local/pytorch:2.4-cuda12"

BUILTIN_TEMPLATES = [
    {
        "name": _("PyTorch, one GPU"), "kind": "batch",
        "description": _("Train or fine-tune a model on a single GPU."),
        "parameters": [
            {"name": "script", "type": "text", "default": "train.py", "label": _("Script"),
             "help": _("The Python file to run, relative to the image's working directory.")},
            {"name": "epochs", "type": "int", "default": 10, "min": 1, "label": _("Epochs"),
             "help": _("Passed as --epochs.")},
            {"name": "gpu_model", "type": "text", "default": "A100", "label": _("GPU model"),
             "help": _("A GPU model of the cluster.")},
        ],
        "defaults": {"task_type": "research", "gpus_per_node": 1, "nodes": 1, "image": IMAGE,
                     "command": "python {script} --epochs {epochs}", "max_runtime_minutes": 240},
    },
    {
        "name": _("PyTorch DDP, several nodes"), "kind": "batch",
        "description": _("Distributed data-parallel training with torchrun on several nodes of one network domain; "
                       "the portal sets the rendezvous variables (MASTER_ADDR, MASTER_PORT, NNODES, "
                       "NPROC_PER_NODE, NODE_RANK)."),
        "parameters": [
            {"name": "script", "type": "text", "default": "train.py", "label": _("Script"),
             "help": _("The training script torchrun starts on every GPU.")},
            {"name": "nodes", "type": "int", "default": 2, "min": 2, "label": _("Nodes"),
             "help": _("Nodes of 8 GPUs each, placed in one network domain.")},
            {"name": "gpu_model", "type": "choice", "default": "H100", "choices": ["H100", "A100", "H200"],
             "label": _("GPU model"), "help": _("An interconnected model for multi-node training.")},
        ],
        "defaults": {"task_type": "training", "gpus_per_node": 8, "topology": "same_network_domain", "image": IMAGE,
                     "command": "torchrun --nnodes=$NNODES --nproc-per-node=$NPROC_PER_NODE --node-rank=$NODE_RANK "
                                "--rdzv-backend=c10d --rdzv-endpoint=$MASTER_ADDR:$MASTER_PORT {script}",
                     "max_runtime_minutes": 1440},
    },
    {
        "name": _("DeepSpeed"), "kind": "batch",
        "description": _("DeepSpeed training (ZeRO) across the job's nodes, launched by torchrun with the portal's "
                       "rendezvous variables."),
        "parameters": [
            {"name": "script", "type": "text", "default": "train.py", "label": _("Script")},
            {"name": "config", "type": "text", "default": "ds_config.json", "label": _("DeepSpeed config"),
             "help": _("Passed as --deepspeed_config.")},
            {"name": "zero_stage", "type": "choice", "default": "2", "choices": ["1", "2", "3"],
             "label": _("ZeRO stage")},
            {"name": "nodes", "type": "int", "default": 1, "min": 1, "label": _("Nodes")},
        ],
        "defaults": {"task_type": "training", "gpu_model": "H100", "gpus_per_node": 8, "image":
                     "registry.local/deepspeed:0.15-cuda12",
                     "command": "torchrun --nnodes=$NNODES --nproc-per-node=$NPROC_PER_NODE --node-rank=$NODE_RANK "
                                "--rdzv-backend=c10d --rdzv-endpoint=$MASTER_ADDR:$MASTER_PORT {script} "
                                "--deepspeed --deepspeed_config {config} --zero_stage {zero_stage}",
                     "max_runtime_minutes": 1440},
    },
    {
        "name": _("Jupyter notebook"), "kind": "notebook",
        "description": _("A Jupyter server on a share of a GPU, opened from the job page."),
        "parameters": [
            {"name": "gpu_share", "type": "choice", "default": "0.25", "choices": ["0.25", "0.5", "1"],
             "label": _("GPU share"), "help": _("A quarter, half or whole GPU.")},
            {"name": "max_runtime_minutes", "type": "int", "default": 480, "min": 30, "max": 1440,
             "label": _("How long it stays up (minutes)")},
        ],
        "defaults": {"task_type": "notebook", "gpu_model": "L40S", "gpus_per_node": 1, "nodes": 1,
                     "image": "registry.local/jupyter:cuda12"},
    },
    {
        "name": _("vLLM inference service"), "kind": "service",
        "description": _("An OpenAI-compatible vLLM server on port 8000; add replicas for more throughput."),
        "parameters": [
            {"name": "model", "type": "text", "default": "meta-llama/Llama-3.1-8B-Instruct", "label": _("Model"),
             "help": _("The model vLLM serves (a path or a hub name the image can reach).")},
            {"name": "gpus_per_node", "type": "int", "default": 1, "min": 1, "max": 8,
             "label": _("GPUs per replica"), "help": _("Also vLLM's tensor parallelism.")},
            {"name": "replicas", "type": "int", "default": 1, "min": 1, "max": 64, "label": _("Replicas")},
            {"name": "max_model_len", "type": "int", "default": 8192, "min": 256, "label": _("Context length")},
        ],
        "defaults": {"task_type": "inference", "gpu_model": "A100", "nodes": 1, "port": 8000,
                     "image": "registry.local/vllm:0.6-cuda12",
                     "command": "vllm serve {model} --host 0.0.0.0 --port 8000 "
                                "--tensor-parallel-size $NPROC_PER_NODE --max-model-len {max_model_len}"},
    },
    {
        "name": _("Evaluation run"), "kind": "batch",
        "description": _("Evaluate a checkpoint on a benchmark suite."),
        "parameters": [
            {"name": "checkpoint", "type": "text", "default": None, "label": _("Checkpoint"),
             "help": _("Path of the checkpoint to evaluate, e.g. /data/ckpt/12000.pt.")},
            {"name": "suite", "type": "choice", "default": "standard", "choices": ["quick", "standard", "full"],
             "label": _("Suite")},
            {"name": "batch_size", "type": "int", "default": 32, "min": 1, "label": _("Batch size")},
        ],
        "defaults": {"task_type": "evaluation", "gpu_model": "A100", "gpus_per_node": 1, "nodes": 1, "image": IMAGE,
                     "command": "python -m evaluate --checkpoint {checkpoint} --suite {suite} "
                                "--batch-size {batch_size}",
                     "max_runtime_minutes": 120},
    },
]


def install(apps, schema_editor=None):
    """Create the built-in templates that are missing (by name); existing ones are left as they are."""
    template_model = apps.get_model("scheduling", "JobTemplate")
    version_model = apps.get_model("scheduling", "JobTemplateVersion")
    now = timezone.now()
    for spec in BUILTIN_TEMPLATES:
        template, created = template_model.objects.get_or_create(
            tenant=None, name=spec["name"],
            defaults={"kind": spec["kind"], "description": spec["description"], "builtin": True})
        if created:
            version_model.objects.create(template=template, version=1, parameters=spec["parameters"],
                                         defaults=spec["defaults"], note=_("Built in."), created_at=now)


def remove(apps, schema_editor):
    template_model = apps.get_model("scheduling", "JobTemplate")
    builtin = template_model.objects.filter(builtin=True, tenant=None, name__in=[t["name"] for t in BUILTIN_TEMPLATES])
    used = builtin.filter(versions__jobs__isnull=False).values("pk")
    builtin.exclude(pk__in=used).delete()  # a version a job points to stays (PROTECT)


class Migration(migrations.Migration):

    dependencies = [
        ("scheduling", "0009_workloads"),
    ]

    operations = [
        migrations.RunPython(install, remove),
    ]
