#!/bin/bash
echo setup-ran > /app/setup-marker.txt
