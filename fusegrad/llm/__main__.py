import sys
from fusegrad.llm.cli import main

sys.exit(main())
