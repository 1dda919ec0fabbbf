"""``python -m convs2s_edu``: see :mod:`convs2s_edu.cli`."""

import sys

from .cli import main

sys.exit(main())
