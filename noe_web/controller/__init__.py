"""``noe controller``: the safety net of a fail-open webhook.

It lists and watches Pods and Nodes (:mod:`noe_web.kube.informer`) and the
placement policies (:mod:`noe_web.kube.policy_watch`), and only while it holds
the leader Lease (:mod:`.leader`) it evicts owned pods bound to a node their
images cannot run on and reports ``exec format error`` (:mod:`.reconciler`),
finishes the placement of pods the webhook gated (:mod:`.gates`), and writes
each placement policy's status (:mod:`.policy_status`). It
decides with the webhook's own code: :func:`noe_core.k8s.workload.read_workload`,
:func:`noe_core.placement.rules.place`, the same registry client and pull-secret
reading, the same policy and registry flags. It imports the Kubernetes API
client (:mod:`noe_web.kube.client`), never Flask or gunicorn.
"""
