#!/bin/bash
echo done > src/done.txt
