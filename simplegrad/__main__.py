"""``python -m simplegrad``: the seed demo."""

import sys

from .cli import main

sys.exit(main())
