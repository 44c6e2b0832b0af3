#!/bin/bash
echo "checked, but I forgot the reward"
