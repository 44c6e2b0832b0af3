#!/bin/bash
mkdir -p src
