#!/bin/sh
# step.sh NODE PART: one line of work, from the input the PRE script wrote
echo "$1 processed the ${2:-whole} part of: $(cat input.txt)"
