"""``python -m autograd_lint`` runs the command line."""

import sys

from autograd_lint.cli import main

sys.exit(main())
