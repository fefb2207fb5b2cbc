"""``noe controller``: the safety net of a fail-open webhook.

It lists and watches Pods and Nodes (:mod:`noe_web.kube.informer`) and the
placement policies (:mod:`noe_web.kube.policy_watch`), and only while it holds
the leader Lease (:mod:`.leader`) it evicts owned pods bound to a node their
images cannot run on and reports ``exec format error`` (:mod:`.reconciler`),
finishes the placement of pods the webhook gated (:mod:`.gates`), and writes
each placement policy's status (:mod:`.policy_status`). It decides with the
webhook's own code: :func:`noe_core.k8s.workload.read_workload`,
:func:`noe_core.placement.rules.place`, the same registry client and pull-secret
reading, the same policy and registry flags. It imports the Kubernetes API
client (:mod:`noe_web.kube.client`), never Flask or gunicorn.

* :mod:`.command` — flags → ``ControllerConfig``, start-up, SIGTERM
* :mod:`.flags` — the controller's own flags (leader election, eviction back-off, gate timeout, dry run)
* :mod:`.podview` — what is kept of a Pod or Node: readiness, owners, ``deletionTimestamp``, exec errors
* :mod:`.misplaced` — whether a bound pod's images run on its node, judged once per distinct inputs
* :mod:`.pod_fields` — the fields of a Pod ``slim_pod`` reads: the schema a page of pods is decoded into
* :mod:`.workqueue` — a de-duplicating work queue of pod keys with delayed retries
* :mod:`.background` — ``Background``: a pass on its own daemon thread, every interval or when woken
* :mod:`.leader` — leader election on a ``coordination.k8s.io/v1`` Lease, as client-go does
* :mod:`.actions` — the only writes: Events, evictions, resourceVersion-tested JSON Patches
* :mod:`.eviction_record` — the eviction back-off every leader reads (the ConfigMap ``noe-evictions``)
* :mod:`.learning` — exec format errors recorded in the ConfigMap ``noe-learned-platforms``
* :mod:`.rollouts` — rollouts watched: cohort against control, rollback, evictions one at a time
* :mod:`.policy_status` — placement policies' status: ``observedGeneration``, the ``Accepted`` condition
* :mod:`.policy_reports` — ``--policy-reports``: the report's PolicyReports kept up to date per namespace
* :mod:`.reconciler` — misplaced pods and ``exec format error``
* :mod:`.gates` — finishing pods the webhook gated: placement and gate removal in one patch
* :mod:`.unsatisfiable` — Pending pods noe placed that no node can take: ``NoMatchingNode``, the gauge
* :mod:`.metrics` — the controller's metrics and ``/metrics``, ``/livez``, ``/readyz``
"""
