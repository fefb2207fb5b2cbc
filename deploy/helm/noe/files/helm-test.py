"""`helm test`: send a dry-run pod through the API server (and so through noe); expect an architecture requirement.

Runs in the noe image with the test ServiceAccount. PROBE_NAMESPACE is where the
dry-run pod is created (noe never sees pods of its own namespace); PROBE_IMAGE
its image. Exit 0 when the API server's answer carries a required
kubernetes.io/arch node affinity, 1 otherwise, with one line saying why.
"""

import json
import os
import ssl
import sys
import urllib.error
import urllib.request

sa_dir = os.environ.get("SERVICEACCOUNT_DIR", "/var/run/secrets/kubernetes.io/serviceaccount")
host = os.environ["KUBERNETES_SERVICE_HOST"]
base = f"https://{'[' + host + ']' if ':' in host else host}:{os.environ.get('KUBERNETES_SERVICE_PORT', '443')}"
namespace = os.environ["PROBE_NAMESPACE"]
with open(os.path.join(sa_dir, "token"), encoding="utf-8") as f:
    token = f.read().strip()
context = ssl.create_default_context(cafile=os.path.join(sa_dir, "ca.crt"))
pod = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"generateName": "noe-helm-test-", "namespace": namespace,
                 "labels": {"app.kubernetes.io/name": "noe-helm-test"}},
    "spec": {"containers": [{"name": "probe", "image": os.environ["PROBE_IMAGE"]}]},
}
request = urllib.request.Request(
    f"{base}/api/v1/namespaces/{namespace}/pods?dryRun=All",
    data=json.dumps(pod).encode(),
    headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json", "Accept": "application/json"},
    method="POST",
)
try:
    with urllib.request.urlopen(request, context=context, timeout=30) as response:
        created = json.load(response)
except urllib.error.HTTPError as exc:
    print(f"FAIL: the API server refused the dry-run pod: {exc.code} {exc.read()[:300]!r}")
    sys.exit(1)
except OSError as exc:
    print(f"FAIL: cannot reach the API server at {base}: {exc}")
    sys.exit(1)
affinity = (created.get("spec") or {}).get("affinity") or {}
terms = (((affinity.get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution") or {})
         .get("nodeSelectorTerms") or [])
archs = sorted({v for t in terms for e in t.get("matchExpressions") or [] if e.get("key") == "kubernetes.io/arch"
                for v in e.get("values") or []})
if not terms or any(not any(e.get("key") == "kubernetes.io/arch" for e in t.get("matchExpressions") or [])
                    for t in terms):
    print(f"FAIL: the dry-run pod in {namespace} came back without a kubernetes.io/arch requirement: "
          "noe did not answer (check NoeWebhookFailOpen, the webhook's caBundle and noe's logs)")
    sys.exit(1)
print(f"OK: noe placed the dry-run pod on {', '.join(archs)}")
