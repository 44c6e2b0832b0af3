#!/bin/bash
echo two > src/value.txt
