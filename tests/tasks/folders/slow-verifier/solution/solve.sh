#!/bin/bash
touch done.txt
