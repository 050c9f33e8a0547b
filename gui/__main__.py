"""``python -m gui``: run the desktop application."""

import sys

from gui.app import main

sys.exit(main())
