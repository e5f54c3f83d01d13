"""sqllogictest: the .slt files that specify Swell's SQL behaviour end to end, and their
runner (`slt.runner`). Each file under tests/slt/ is one pytest item (tests/slt/conftest.py)
run against the session's shared server from `harness`."""
