"""noe_core: image references, manifests, platforms and the placement policy of the Noe webhook."""
