import sys

from ftqual.cli import main

sys.exit(main())
