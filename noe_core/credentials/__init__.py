"""Registry credentials: keychains and the files, Secrets and kubelet plugins they come from.

The only code in noe_core that runs subprocesses (kubelet credential-provider
plugins). This package itself imports nothing; import its modules.
"""
