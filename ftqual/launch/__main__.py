"""`python -m ftqual.launch`: runs `ftqual.launch.main` and exits with its code."""

import sys

from ftqual.launch import main

sys.exit(main())
