"""The frozen executable's entry script: the same ``vramplan`` entry point pip installs.

A separate script (rather than gui/launcher.py itself) so that gui/ is imported as the
package it is, never put on sys.path as a folder of top-level modules.
"""

import sys

from gui.launcher import main

if __name__ == "__main__":
    sys.exit(main())
