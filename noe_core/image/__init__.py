"""The image model: platforms, manifests, what is known of an image's platforms, and the nodes they run on."""
