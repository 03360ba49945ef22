"""`python -m batch_assets.cli ...`: the same as the `batch-assets` console script."""

import sys

from batch_assets.cli import main

sys.exit(main())
