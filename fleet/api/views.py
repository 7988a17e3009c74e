"""Endpoints for node agents (bearer token of the node), the node inventory and platform admins' node actions."""

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop
from drf_spectacular.utils import extend_schema
from rest_framework import status, viewsets
from rest_framework.decorators import action
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework.views import APIView

from fleet import services
from fleet.agents import tokens as agent_tokens
from fleet.api.serializers import (
    AgentRegistrationSerializer,
    NodeActionSerializer,
    NodeAdminStateSerializer,
    NodeSerializer,
    agent_url_problem,
)
from fleet.models import Node, NodeEvent
from gpuportal.text import phrases
from gpuportal.text.phrases import Phrase
from gpuportal.web.validation import text_problem

LABEL_FIELDS = {"datacenter": "datacenter", "rack": "rack", "network": "network_domain",
                "network_domain": "network_domain"}


class AgentRegistrationView(APIView):
    """An agent announces where it answers, authenticated by its node's token (``Authorization: Bearer``).

    A wrong token and an unknown node get the same 401, so the endpoint does not reveal node names. The
    portal will send the token to the URL at every poll, so the URL must lie inside the agent networks
    (400 on ``url`` otherwise, and the URL is never contacted). Datacenter, rack and network domain decide
    where jobs may span, so an agent may fill them in while empty but moving a node takes an admin: a
    registration that would change one is refused as a whole (400 on ``labels``) and changes nothing."""

    authentication_classes = []
    permission_classes = [AllowAny]
    #: For the schema (gpuportal.web.schema): the node's token is checked before the body.
    error_statuses = ("401",)
    error_descriptions = {
        "400": "The body does not match the schema, or the URL is one the portal may not poll (outside the agent "
               "networks, link-local, loopback), or the labels would move the node (an admin's job).",
        "401": "Unknown node or wrong agent token (the same answer for both)."}

    @extend_schema(request=AgentRegistrationSerializer, responses={200: NodeSerializer}, auth=[{"agentToken": []}])
    def post(self, request):
        scheme, _sep, token = request.headers.get("Authorization", "").partition(" ")
        name = request.data.get("node")
        known = isinstance(name, str) and len(name) <= 128 and not text_problem(name)
        node = Node.objects.filter(name=name).first() if known else None
        if scheme.lower() != "bearer" or node is None or not agent_tokens.verify(node, token.strip()):
            return Response({"detail": _("Unknown node or wrong agent token.")}, status=status.HTTP_401_UNAUTHORIZED)
        body = AgentRegistrationSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        problem = agent_url_problem(body.validated_data["url"])
        if problem:
            return Response({"url": [problem]}, status=status.HTTP_400_BAD_REQUEST)
        labels = body.validated_data.get("labels", {})
        updates = {"agent_url": body.validated_data["url"]}
        placement = {LABEL_FIELDS[k]: v for k, v in labels.items() if k in LABEL_FIELDS}
        moves = [(field, getattr(node, field), value) for field, value in placement.items()
                 if getattr(node, field) and value != getattr(node, field)]
        if moves:
            return Response({"labels": [
                _("An agent may set %(label)s only while it is empty; moving the node from %(old)r to %(new)r "
                  "needs an admin (the node's admin page).") % {"label": field, "old": old, "new": new}
                for field, old, new in moves]}, status=status.HTTP_400_BAD_REQUEST)
        updates.update(placement)
        with transaction.atomic():
            before = {k: getattr(node, k) for k in updates}
            for key, value in updates.items():
                setattr(node, key, value)
            node.save(update_fields=[*updates, "last_updated"])
            registered = Phrase(gettext_noop("Agent registered at %(url)s."), {"url": node.agent_url})
            NodeEvent.objects.create(node=node, at=timezone.now(), kind=NodeEvent.Kind.REGISTRATION,
                                     reason=registered,
                                     data={"before": before, "after": updates, **phrases.data_of(registered)})
        return Response(NodeSerializer(node).data)


class NodeViewSet(viewsets.ReadOnlyModelViewSet):
    """Nodes with their labels, health and GPUs (inventory; no tenant data)."""

    serializer_class = NodeSerializer
    lookup_field = "name"
    lookup_value_regex = "[^/]+"
    filterset_fields = ["gpu_model", "datacenter", "rack", "health", "admin_state"]

    def get_queryset(self):
        return Node.objects.select_related("cluster").prefetch_related("gpus").order_by("name")

    @extend_schema(request=NodeAdminStateSerializer, responses={200: NodeActionSerializer})
    @action(detail=True, methods=["post"], url_path="admin-state")
    def admin_state(self, request, name=None):
        """Platform admins: cordon, drain or reactivate the node, for a reason (400 without one). The answer lists
        the running jobs it touches and what becomes of each (both keep running to their end); with ``dry_run``
        nothing changes. Each running job's timeline records the action with its reason."""
        node = self.get_object()
        body = NodeAdminStateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        state, reason = body.validated_data["state"], body.validated_data["reason"].strip()
        preview = services.preview_admin_state(request.user, node, state)
        if not body.validated_data["dry_run"]:
            services.set_node_admin_state(request.user, node, state, reason)
        return Response(NodeActionSerializer({**preview.__dict__, "applied": not body.validated_data["dry_run"]}).data)
