"""A notebook's Ingress makes nginx send the shared secret on its auth subrequest (``auth-proxy-set-headers``):
without it the portal answers the subrequest 403 and hands no notebook token (docs/security.md, "Origins")."""

from dataclasses import replace

from scheduling.executors.kubernetes.manifests import EXAMPLE_INGRESS, example_spec, notebook_ingress

KEY = "nginx.ingress.kubernetes.io/auth-proxy-set-headers"


def test_the_notebook_ingress_names_the_configmap_of_the_shared_secret():
    ingress = replace(EXAMPLE_INGRESS, auth_headers="gpuportal/gpuportal-ingress-auth")
    annotations = notebook_ingress("gp-", example_spec(), ingress)["metadata"]["annotations"]
    assert annotations[KEY] == "gpuportal/gpuportal-ingress-auth"
    assert annotations["nginx.ingress.kubernetes.io/auth-response-headers"] == "Authorization"


def test_without_the_configmap_no_header_is_sent_and_the_portal_refuses():
    assert KEY not in notebook_ingress("gp-", example_spec(), EXAMPLE_INGRESS)["metadata"]["annotations"]
