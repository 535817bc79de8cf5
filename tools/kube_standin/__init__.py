"""kube_standin — an in-repo stand-in for the Kubernetes API server, for tests.

What it is: one Python process (the standard library, and PyYAML for YAML input) serving, over
plain HTTP on loopback, the part of the Kubernetes API that kubectl and a list/watch controller
use, for core/v1 namespaces, pods and secrets, apiextensions.k8s.io/v1
CustomResourceDefinitions and the custom resources they define: discovery (aggregated and
legacy), OpenAPI v3, get/list/create/update/patch/delete/deletecollection, the status
subresource, list+watch with resourceVersion, bookmarks and 410 Gone, Table output for `kubectl
get`, Status errors with the real reasons and codes. Its faithfulness is proven by driving it
with the real kubectl (integration/test_kube_standin.py).

What it is not: a Kubernetes control plane. No authentication or authorization, no
admission plugins, no controllers (no scheduler, kubelet, garbage collector, namespace
controller: their visible effects are applied at once, see docs/kubernetes.md), no
server-side apply field management, no CEL validation, no conversion webhooks, no
protobuf, no TLS, no etcd: a single process with its state in memory (optionally a JSON
file). docs/kubernetes.md lists every difference.

Modules: server (HTTP, routing, watch), store (objects, resourceVersions, history,
persistence), resources (types and registry), builtins (per-kind semantics), schema (CRD
structural schemas), patch (merge, JSON and strategic merge patch), selectors (label and
field selectors, JSONPath), tables (Table output), discovery (discovery and OpenAPI),
protobuf (the protobuf bodies kubectl sends for Secrets and Namespaces), yamlish (a small
YAML reader), errors (Status errors).
"""
VERSION = "1.33.0-standin"
