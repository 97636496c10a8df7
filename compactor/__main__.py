import sys

from compactor.cli import entry

sys.exit(entry())
