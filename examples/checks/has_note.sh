#!/usr/bin/env bash
# A check script: passes when NOTES.md (in the workspace, the current folder) holds the note.
grep -q -- "$1" NOTES.md
