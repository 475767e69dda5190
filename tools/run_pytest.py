"""Run pytest and treat "no tests collected" (exit 5) as a failure with a clear message: CI must test something."""

import sys

import pytest

code = pytest.main(sys.argv[1:])
if code == pytest.ExitCode.NO_TESTS_COLLECTED:
    print("error: pytest collected no tests", file=sys.stderr)
    sys.exit(1)
sys.exit(int(code))
