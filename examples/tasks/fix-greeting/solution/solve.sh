#!/bin/bash
sed -i 's/return "Hello, world!"/return f"Hello, {name}!"/' greet.py
