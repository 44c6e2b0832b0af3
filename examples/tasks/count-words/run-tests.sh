#!/bin/bash
# Offline images have no pytest; the test file prints pytest's -rA summary lines itself.
python3 "$TEST_DIR/test_outputs.py"
