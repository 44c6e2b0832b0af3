#!/bin/bash
echo marmalade > answer.txt
