"""Registry credentials: keychains and the files, Secrets and kubelet plugins they come from.

The only code in noe_core that runs subprocesses (kubelet credential-provider
plugins). This package itself imports nothing; import its modules.

* :mod:`.keychain` — credentials and the keychains that find them for an image (``Keychain``, ``MultiKeychain``)
* :mod:`.docker_config` — Docker client configuration and image pull Secrets, read as keychains
* :mod:`.containerd_config` — containerd's ``config.toml`` registry credentials, as a keychain
* :mod:`.provider` — kubelet credential-provider exec plugins, as a keychain
* :mod:`.program` — running a credential program: the one way noe starts a subprocess
"""
