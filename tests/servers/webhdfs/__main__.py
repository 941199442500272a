"""``python -m tests.servers.webhdfs``: run the WebHDFS emulator (see :mod:`.emulator`)."""

import sys

from tests.servers.webhdfs.emulator import main

sys.exit(main())
