"""`python -m tbtriage` is the `tbtriage` command."""

import sys

from tbtriage.cli.main import main

sys.exit(main())
