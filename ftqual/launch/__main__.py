import sys

from ftqual.launch import main

sys.exit(main())
