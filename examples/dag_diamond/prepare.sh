#!/bin/sh
# PRE script of A (runs on the submit machine, in the DAG's directory): make the input
echo "the diamond's input, prepared for $1" > input.txt
