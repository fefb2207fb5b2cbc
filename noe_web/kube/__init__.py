"""The Kubernetes API, as noe uses it; no Flask, no gunicorn.

* :mod:`.config` — kubeconfig files (merged as kubectl merges them) or in-cluster service account →
  :class:`~.config.ApiConfig`;
* :mod:`.client` — :class:`~.client.KubeClient`: Secrets (cached), Events, lists, watches, any call;
* :mod:`.errors` — one exception type per answer a caller acts on;
* :mod:`.exec_plugin` — kubeconfig ``exec`` credential plugins;
* :mod:`.pull_secrets` — a pod's ``imagePullSecrets`` → one keychain, problems as warnings;
* :mod:`.events` — Event objects and the bounded background queue that writes them.
"""
