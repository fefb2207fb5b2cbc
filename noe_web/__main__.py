"""``python -m noe_web``: the ``noe`` command (``serve``, ``certs``, ``mutate``, ``inspect``)."""

import sys

from noe_web.cli import main

sys.exit(main())
