"""``python -m fastdeploy_spec.demo``."""

import sys

from fastdeploy_spec.demo import main

sys.exit(main())
