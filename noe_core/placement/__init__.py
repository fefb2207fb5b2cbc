"""The placement contract (``docs/placement.md``), pure: its rules and the parts they are built from.

* :mod:`.pipeline` — the one placement pipeline: one pod's inputs → its ``Decision``, for every path of noe
* :mod:`.decider` — the pipeline with the process's lookups, policies and learned platforms (``Decider``)
* :mod:`.rules` — the contract's rules: ``apply_rules`` records its edits, ``Decision`` carries the patch
* :mod:`.session` — one placement's edit session (``PlacementSession``): the fields noe edits, copied once
* :mod:`.scheduling` — node affinity, nodeSelector and toleration editing through ``Edits``
* :mod:`.image_reading` — rule 4 per image (rules 14-17): each image's offer, failure or artifact
* :mod:`.needs` — what a pod needs: its images' offers intersected (rule 6), the fewest node-selector terms
* :mod:`.messages` — warnings and deny messages within the API server's limits
* :mod:`.ephemeral` — rule 18: ``kubectl debug``'s ephemeral containers against the pod's node
* :mod:`.gate` — gate mode: which pods the scheduling gate holds back (``held_back``)
* :mod:`.compatibility` — can a node run a pod's images (the controller's test for misplaced pods)
* :mod:`.admitted` — a live pod as noe admitted it (its platform terms out), and what noe required of it
* :mod:`.node_fit` — how many Nodes can take a pod on noe's terms, and what keeps the others out
"""
