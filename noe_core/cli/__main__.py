import sys

from noe_core.cli import main

sys.exit(main())
