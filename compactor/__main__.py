import sys

from compactor.cli import main

sys.exit(main())
