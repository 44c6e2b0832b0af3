#!/bin/bash
# The image has no pytest: a small stand-in prints pytest's -rA summary lines.
python3 "$TEST_DIR/test_outputs.py"
