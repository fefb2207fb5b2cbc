"""Names and their grammars: image references, registry host patterns, Kubernetes names."""
