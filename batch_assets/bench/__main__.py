import sys

from batch_assets.bench import main

sys.exit(main(sys.argv[1:]))
