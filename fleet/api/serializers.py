"""Nodes as every signed-in user may see them, and what an agent sends when it registers."""

from rest_framework import serializers


class GPUSerializer(serializers.Serializer):
    index = serializers.IntegerField()
    uuid = serializers.CharField()
    model = serializers.CharField()
    memory_mb = serializers.IntegerField()
    health = serializers.CharField()
    ecc_dbe = serializers.IntegerField()
    last_xid = serializers.IntegerField(allow_null=True)


class NodeSerializer(serializers.Serializer):
    """A node as every signed-in user may see it (no tenant data, no agent secrets)."""

    name = serializers.CharField()
    cluster = serializers.CharField(source="cluster.name")
    gpu_model = serializers.CharField()
    datacenter = serializers.CharField()
    rack = serializers.CharField()
    network_domain = serializers.CharField()
    health = serializers.CharField()
    admin_state = serializers.CharField()
    schedulable = serializers.BooleanField()
    driver_version = serializers.CharField()
    cuda_version = serializers.CharField()
    agent_version = serializers.CharField()
    last_seen = serializers.DateTimeField(allow_null=True)
    gpus = GPUSerializer(many=True)


class AgentRegistrationSerializer(serializers.Serializer):
    node = serializers.CharField(max_length=128)
    url = serializers.URLField(max_length=255)
    labels = serializers.DictField(child=serializers.CharField(max_length=64), required=False)
