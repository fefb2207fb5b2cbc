"""The image model, pure: platforms, manifests, what is known of an image's platforms, the nodes they run on.

* :mod:`.platform` — os/architecture/variant/os.version and their aliases: :class:`~.platform.Platform`
* :mod:`.manifest` — manifest and index media types, descriptors, config blobs: ``parse_manifest``
* :mod:`.node_platform` — a node's platform from its labels (:class:`~.node_platform.NodePlatform`), ``usable_on``
* :mod:`.offer` — what an image offers: per (OS, architecture), the Windows builds and x86-64 levels it runs on
* :mod:`.image_platforms` — :class:`~.image_platforms.ImagePlatforms` or ``LookupFailure``: one image's lookup
* :mod:`.declared` — declared platforms (``--platforms``, ``--image-platforms``, policies' ``imagePlatforms``)
* :mod:`.learned` — platforms learned from exec format errors: the ``noe-learned-platforms`` ConfigMap's entries
"""
