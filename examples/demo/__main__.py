"""``python -m examples.demo``."""

import sys

from examples.demo import main

sys.exit(main())
