"""Kubernetes objects as noe reads them, pure: each read once into frozen values, errors naming the field.

* :mod:`.object_meta` — an object's metadata (:class:`~.object_meta.ObjectMeta`) and its one owner reference
* :mod:`.workload` — a Pod or a workload's pod template as a frozen :class:`~.workload.Workload` view
* :mod:`.owners` — the workload a pod belongs to (:class:`~.owners.TopOwner`), from owners or naming rules
* :mod:`.label_selector` — label selectors (``matchLabels``, ``matchExpressions``) matched as the API server does
* :mod:`.quantity` — resource quantities (``100m``, ``1Gi``) read exactly
* :mod:`.resources` — a pod's CPU and memory requests as kube-scheduler counts them
* :mod:`.node_selection` — which nodes a pod's spec lets kube-scheduler use: selectors, required affinity, taints
"""
