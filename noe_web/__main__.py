"""``python -m noe_web``: the ``noe`` command (:mod:`noe_web.commands`)."""

import sys

from noe_web.commands import main

sys.exit(main())
