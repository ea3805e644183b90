import sys

from memoryd.daemon.main import main

sys.exit(main())
