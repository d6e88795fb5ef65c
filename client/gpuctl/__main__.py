import sys

from gpuctl.cli import main

sys.exit(main())
