"""Kubernetes objects as noe reads them: metadata, workloads, owners, selectors, quantities, requests."""
