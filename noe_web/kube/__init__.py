"""The Kubernetes API, as noe uses it; no Flask, no gunicorn.

* :mod:`.config` — kubeconfig files (merged as kubectl merges them) or in-cluster service account → ``ApiConfig``
* :mod:`.client` — :class:`~.client.KubeClient`: Secrets (cached), Events, lists, watches, any call
* :mod:`.errors` — one exception type per answer a caller acts on
* :mod:`.exec_plugin` — kubeconfig ``exec`` credential plugins
* :mod:`.namespace` — noe's own namespace, from the pod's service-account mount
* :mod:`.nodes` — a Node's platform for rule 18, one GET per node, kept briefly
* :mod:`.pull_secrets` — a pod's ``imagePullSecrets`` → one keychain, problems as warnings
* :mod:`.list_stream` — a list answer decoded item by item as it arrives, never held whole
* :mod:`.list_schema` — a list page decoded by msgspec only as far as a cache keeps its items
* :mod:`.collector` — the garbage collector paused while lists fill the caches, then their objects frozen
* :mod:`.informer` — list-then-watch caches (streamed, watch-cache or consistent lists), relist in place on 410 Gone
* :mod:`.learned_watch` — the ConfigMap ``noe-learned-platforms``, watched in every webhook worker
* :mod:`.policy_watch` — the cluster's placement policies and Namespaces, watched in every webhook worker
* :mod:`.events` — Event objects and the bounded background queue that writes them
"""
