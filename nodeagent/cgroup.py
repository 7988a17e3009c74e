"""Map a process on a GPU to its container and Kubernetes pod through /proc/<pid>/cgroup."""

from __future__ import annotations

import re
from pathlib import Path

_POD = re.compile(r"pod([0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12})")
_CONTAINER = re.compile(r"(?:cri-containerd-|docker-|crio-|containerd://)?([0-9a-f]{64})")


def owner_of(pid: int, proc: str = "/proc") -> dict:
    """``{"container_id", "pod_uid"}`` for ``pid`` (values None when not in a container or unreadable)."""
    try:
        text = Path(proc, str(pid), "cgroup").read_text()
    except OSError:
        return {"container_id": None, "pod_uid": None}
    pod = _POD.search(text)
    container = _CONTAINER.search(text)
    return {"container_id": container.group(1) if container else None,
            "pod_uid": pod.group(1).replace("_", "-") if pod else None}
